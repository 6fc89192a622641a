package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

func init() {
	sdk.RegisterAdmin("libpicomq_connector_cli_test_source",
		sdk.AdminCommand{Name: "echo", Args: "[WORDS]", Summary: "print the key, a config value and the words",
			Run: func(_ context.Context, req sdk.AdminRequest) error {
				cfg := req.Config.(testConfig)
				fmt.Fprintf(req.Out, "key=%s token=%v args=%s\n", req.Key, cfg["token"], strings.Join(req.Args, ","))
				return nil
			}},
		sdk.AdminCommand{Name: "fail", Summary: "always fails",
			Run: func(context.Context, sdk.AdminRequest) error { return errors.New("the thing is in use") }},
	)
}

// TestAdmin: the binary runs what a connector registered, with the
// connector's effective config (environment overrides applied), for a
// disabled definition too; it lists the commands, and refuses unknown ones.
func TestAdmin(t *testing.T) {
	disabled := strings.Replace(validSource, "key = \"gen\"", "key = \"gen\"\nenabled = false", 1)
	path := setup(t, "", map[string]string{"gen.toml": disabled, "out.toml": validSink})
	run := func(env []string, args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := Main(append([]string{"admin", "--config", path}, args...), &out, &errOut, env)
		return out.String(), errOut.String(), code
	}

	out, errOut, code := run(nil, "gen")
	if code != 0 || !strings.Contains(out, "echo [WORDS]") || !strings.Contains(out, "print the key") || !strings.Contains(out, "fail ") {
		t.Errorf("listing: exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = run([]string{"PICOMQ_CONNECTORS_SOURCE_GEN_PLUGIN_CONFIG_TOKEN=from-env"}, "source/gen", "echo", "a", "b")
	if code != 0 || out != "key=gen token=from-env args=a,b\n" {
		t.Errorf("echo: exit %d\n%s%s", code, out, errOut)
	}
	_, errOut, code = run(nil, "gen", "fail")
	if code != 1 || !strings.Contains(errOut, "pico-connectors admin gen fail: the thing is in use") {
		t.Errorf("fail: exit %d\n%s", code, errOut)
	}
	_, errOut, code = run(nil, "gen", "ehco")
	if code != 2 || !strings.Contains(errOut, `has no command "ehco"; it offers echo, fail`) {
		t.Errorf("unknown command: exit %d\n%s", code, errOut)
	}
	out, _, code = run(nil, "out")
	if code != 0 || !strings.Contains(out, "offers no admin commands") {
		t.Errorf("a connector without commands: exit %d\n%s", code, out)
	}
	_, errOut, code = run(nil, "nope", "echo")
	if code != 1 || !strings.Contains(errOut, `no connector "nope"`) {
		t.Errorf("unknown key: exit %d\n%s", code, errOut)
	}
	_, errOut, code = run(nil)
	if code != 2 || !strings.Contains(errOut, "KEY is required") {
		t.Errorf("no key: exit %d\n%s", code, errOut)
	}
}
