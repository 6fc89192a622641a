package definition

import (
	"fmt"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// TestSigningKey: state.signing_key is accepted for the broker store when
// at least MinSigningKey bytes long, refused otherwise with its length
// (from the file or the environment) but never its value, and masked in
// the config view.
func TestSigningKey(t *testing.T) {
	const good = "CANARY-0123456789abcdef0123456789"
	runtime := func(storage, key string) string {
		s := fmt.Sprintf("[state]\nstorage = %q\n", storage)
		if key != "" {
			s += fmt.Sprintf("signing_key = %q\n", key)
		}
		return s
	}
	cases := []struct {
		name, runtime string
		env           map[string]string
		want          string
	}{
		{"broker", runtime("broker", good), nil, ""},
		{"short", runtime("broker", "CANARY-short"), nil, "state.signing_key: is 12 bytes long; use at least 32 bytes"},
		{"short from env", runtime("broker", ""), map[string]string{"PICOMQ_CONNECTORS_STATE_SIGNING_KEY": "CANARY"},
			"state.signing_key: is 6 bytes long (from environment variable PICOMQ_CONNECTORS_STATE_SIGNING_KEY); use at least 32 bytes"},
		{"file store", runtime("file", good), nil, `state.signing_key: is set, but state.storage = "file": only the broker store signs its checkpoints`},
	}
	for _, c := range cases {
		path := writeFiles(t, map[string]string{"runtime.toml": c.runtime, "connectors/a.toml": goodSink})
		cfg, err := Load(path, c.env)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v; want %q", c.name, err, c.want)
		case err != nil && strings.Contains(err.Error(), "CANARY"):
			t.Errorf("%s: the key is in the message: %v", c.name, err)
		}
		if c.want == "" {
			if cfg.Runtime.State.SigningKey.Reveal() != good {
				t.Errorf("%s: signing key of %d bytes, want the one set", c.name, len(cfg.Runtime.State.SigningKey.Reveal()))
			}
			if v := cfg.Runtime.Redacted()["state"].(map[string]any)["signing_key"]; v != confkit.Mask {
				t.Errorf("%s: config view shows %v", c.name, v)
			}
		}
	}
}
