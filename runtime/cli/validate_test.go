package cli

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

type testConfig map[string]any

func (c testConfig) Redacted() map[string]any {
	out := map[string]any{}
	for k, v := range c {
		if k == "token" {
			v = "****"
		}
		out[k] = v
	}
	return out
}

type nopSink struct{}

func (nopSink) Open(context.Context) error                  { return nil }
func (nopSink) Consume(context.Context, []sdk.Record) error { return nil }
func (nopSink) Close(context.Context) error                 { return nil }

func init() {
	load := func(raw map[string]any, prefix string, env sdk.LookupEnv) (sdk.Config, error) {
		out := testConfig{}
		for k, v := range raw {
			out[k] = v
		}
		if v, ok := env(prefix + "TOKEN"); ok {
			out["token"] = v
		}
		return out, nil
	}
	sdk.Register(sdk.Registration{Name: "cli_test_sink", Path: "libpicomq_connector_cli_test_sink", Kind: sdk.KindSink, Load: load,
		NewSink: func(sdk.Config, sdk.Env) (sdk.Sink, error) { return nopSink{}, nil }})
	sdk.Register(sdk.Registration{Name: "cli_test_source", Path: "libpicomq_connector_cli_test_source", Kind: sdk.KindSource, Load: load})
}

const validSource = `type = "source"
key = "gen"
path = "libpicomq_connector_cli_test_source"

[[topics]]
topic = "numbers"
linger_time = "5ms"

[plugin_config]
token = "t0p-s3cret"
`

const validSink = `type = "sink"
key = "out"
path = "libpicomq_connector_cli_test_sink"

[[topics]]
pattern = 'numbers.*'
`

func setup(t *testing.T, runtime string, defs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtime), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range defs {
		if err := os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "runtime.toml")
}

func TestValidateMessages(t *testing.T) {
	cases := []struct {
		name    string
		runtime string
		def     string
		env     []string
		want    string // file suffix + ": " + key + ": " + message
	}{
		{"unknown top-level key", "", strings.Replace(validSource, "key =", "enabeld = true\nkey =", 1), nil,
			`connectors/def.toml: enabeld: unknown top-level key "enabeld" (did you mean "enabled"?)`},
		{"unknown runtime key", "[broker]\nbootstrap_server = \"x:1\"\n", validSource, nil,
			`runtime.toml: broker.bootstrap_server: unknown key "bootstrap_server" (did you mean "bootstrap_servers"?)`},
		{"bad type", "", strings.Replace(validSource, "key =", "version = \"one\"\nkey =", 1), nil,
			`connectors/def.toml: version: expected an integer, got a string ("one")`},
		{"missing path", "", strings.Replace(validSource, "path = \"libpicomq_connector_cli_test_source\"\n", "", 1), nil,
			`connectors/def.toml: path: missing: name the plugin, such as path = "libpicomq_connector_random_source"`},
		{"unknown plugin", "", strings.Replace(validSource, "cli_test_source", "cli_tset_source", 1), nil,
			`connectors/def.toml: path: unknown plugin "libpicomq_connector_cli_tset_source" (did you mean "libpicomq_connector_cli_test_source"?)`},
		{"bad regex pattern", "", strings.Replace(validSink, "numbers.*", "numbers.(*", 1), nil,
			`connectors/def.toml: topics[0].pattern: "numbers.(*" is not a valid regular expression: missing argument to repetition operator: ` + "`*`"},
		{"partitions = 3", "", strings.Replace(validSource, "linger_time", "partitions = 3\nlinger_time", 1), nil,
			`connectors/def.toml: topics[0].partitions: partitions = 3 is not supported: PicoMQ topics have one partition; set partitions = 1 or remove it`},
		{"replication_factor = 2", "", strings.Replace(validSource, "linger_time", "replication_factor = 2\nlinger_time", 1), nil,
			`connectors/def.toml: topics[0].replication_factor: replication_factor = 2 is not supported: PicoMQ topics have one partition; set replication_factor = 1 or remove it`},
		{"bad duration", "", strings.Replace(validSource, `"5ms"`, `"fast"`, 1), nil,
			`connectors/def.toml: topics[0].linger_time: "fast" is not a duration; use a number with a unit such as 100ms, 5s or 1m30s`},
		{"bad runtime duration", "shutdown_grace = \"30\"\n", validSource, nil,
			`runtime.toml: shutdown_grace: "30" is not a duration`},
		{"bad env override value", "", validSource, []string{"PICOMQ_CONNECTORS_SOURCE_GEN_ENABLED=perhaps"},
			`connectors/def.toml: enabled: environment variable PICOMQ_CONNECTORS_SOURCE_GEN_ENABLED = "perhaps" is not a boolean; use true or false`},
		{"bad env override duration", "", validSource, []string{"PICOMQ_CONNECTORS_SOURCE_GEN_TOPICS_0_LINGER_TIME=soon"},
			`connectors/def.toml: topics[0].linger_time: "soon" (from environment variable PICOMQ_CONNECTORS_SOURCE_GEN_TOPICS_0_LINGER_TIME) is not a duration`},
		{"reserved property in broker.properties", "[broker.properties]\n\"enable.auto.commit\" = \"true\"\n", validSource, nil,
			`runtime.toml: broker.properties."enable.auto.commit": is set by the runtime and cannot be overridden; remove it`},
		{"bad runtime env override", "", validSource, []string{"PICOMQ_CONNECTORS_STATE_HTTP_MAX_ATTEMPTS=lots"},
			`runtime.toml: state.http.max_attempts: environment variable PICOMQ_CONNECTORS_STATE_HTTP_MAX_ATTEMPTS = "lots" is not an integer`},
		{"env block after a gap", "", validSource, []string{"PICOMQ_CONNECTORS_SOURCE_GEN_TOPICS_3_TOPIC=x"},
			`connectors/def.toml: topics[3]: added by environment variable PICOMQ_CONNECTORS_SOURCE_GEN_TOPICS_3_TOPIC, but nothing sets topics[1]; variables add blocks right after the file's last one (topics[1] here), without gaps`},
		{"misspelt env variable", "", validSource, []string{"PICOMQ_CONNECTORS_SOURCE_GEN_ENABLD=true"},
			`connectors/def.toml: environment variable PICOMQ_CONNECTORS_SOURCE_GEN_ENABLD matches no key of this definition (did you mean "PICOMQ_CONNECTORS_SOURCE_GEN_ENABLED"?)`},
		{"routing rule", "", strings.Replace(validSource, `topic = "numbers"`, `topic = { strategy = "feild", template = "orders.{tenant}" }`, 1), nil,
			`connectors/def.toml: topics[0].topic.strategy: "feild" is not allowed; use "field" or "key" or "header" (did you mean "field"?)`},
		{"duplicate key in a file", "", strings.Replace(validSource, "key = \"gen\"", "key = \"gen\"\nkey = \"gen2\"", 1), nil,
			`connectors/def.toml: line 3 (key): Key 'key' has already been defined.`},
		{"weakening producer property", "", strings.Replace(validSource, "linger_time", "properties = { acks = \"0\" }\nlinger_time", 1), nil,
			`connectors/def.toml: topics[0].properties.acks: the runtime produces with acks=all`},
		{"weakening property from env", "", validSource, []string{"PICOMQ_CONNECTORS_BROKER_PROPERTIES_ENABLE_IDEMPOTENCE=false"},
			`runtime.toml: broker.properties."enable.idempotence": the runtime produces with enable.idempotence=true so that a retried produce never duplicates or reorders records; "false" turns that off; remove it (from environment variable PICOMQ_CONNECTORS_BROKER_PROPERTIES_ENABLE_IDEMPOTENCE)`},
		{"reserved producer property (source loop check)", "", strings.Replace(validSource, "linger_time", "properties = { \"transactional.id\" = \"x\" }\nlinger_time", 1), nil,
			`connectors/def.toml: topics[0].properties."transactional.id" is set by the runtime and cannot be overridden`},
		{"syntax error", "", "type = \"source\"\nkey = \n", nil,
			`connectors/def.toml: line 2 (key): expected value but found '\n' instead`},
		{"unquoted secret", "", strings.Replace(validSource, "[plugin_config]", "[plugin_config]\napi_token = tokCANARY123", 1), nil,
			`connectors/def.toml: line 10 (plugin_config.api_token): expected value but found text not shown instead (it may be a secret); a string needs quotes, as in api_token = "..."`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := setup(t, tc.runtime, map[string]string{"def.toml": tc.def})
			var out, errOut bytes.Buffer
			code := Main([]string{"validate", "--config", path}, &out, &errOut, tc.env)
			if code != 1 {
				t.Fatalf("exit code %d, want 1; output:\n%s%s", code, out.String(), errOut.String())
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Fatalf("output lacks\n  %s\ngot:\n%s", tc.want, out.String())
			}
			if all := out.String() + errOut.String(); strings.Contains(all, "CANARY") || strings.Contains(all, "t0p-s3cret") {
				t.Fatalf("a secret's value is in the output:\n%s", all)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	bad := "colour = 1\nversion = true\n[[topics]]\ntopic = \"x\"\npartitions = 3\nlinger_time = \"x\"\n"
	path := setup(t, "", map[string]string{"a.toml": "type = \"source\"\nkey = \"a\"\n" + bad, "b.toml": validSink})
	var out bytes.Buffer
	if code := Main([]string{"validate", "--config", path}, &out, &out, []string{"PICOMQ_CONNECTORS_SINK_OUT_TOPICS_0_BATCH_LENGTH=-5"}); code != 1 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"a.toml: colour:", "a.toml: version:", "a.toml: path: missing", "a.toml: topics[0].partitions:", "a.toml: topics[0].linger_time:", "b.toml: topics[0].batch_length: -5 (from environment variable PICOMQ_CONNECTORS_SINK_OUT_TOPICS_0_BATCH_LENGTH): must be 1 to 1000000", "6 problems found"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("missing %q in:\n%s", want, out.String())
		}
	}
}

func TestValidateOK(t *testing.T) {
	path := setup(t, "", map[string]string{"gen.toml": validSource, "out.toml": validSink})
	var out bytes.Buffer
	if code := Main([]string{"validate", "--config", path}, &out, &out, nil); code != 0 {
		t.Fatalf("exit %d:\n%s", code, out.String())
	}
	if !strings.Contains(out.String(), "is valid: 2 connector definitions") {
		t.Fatal(out.String())
	}
}

func TestConfigMasksSecrets(t *testing.T) {
	path := setup(t, "[http]\napi_key = \"api-s3cret\"\n[state]\nstorage = \"http\"\n[state.http]\nurl = \"https://u:url-s3cret@example.com/state\"\n",
		map[string]string{"gen.toml": validSource})
	env := []string{"PICOMQ_CONNECTORS_SOURCE_GEN_PLUGIN_CONFIG_TOKEN=env-s3cret", "PICOMQ_CONNECTORS_SOURCE_GEN_TOPICS_0_TOPIC=from_env"}
	for _, args := range [][]string{{"config", "--config", path, "gen"}, {"config", "--config", path, "source/gen", "--json"}, {"config", "--config", path}} {
		var out, errOut bytes.Buffer
		if code := Main(args, &out, &errOut, env); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		s := out.String()
		if strings.Contains(s, "s3cret") {
			t.Fatalf("%v leaked a secret:\n%s", args, s)
		}
		if len(args) > 3 && (!strings.Contains(s, "from_env") || !strings.Contains(s, "****")) {
			t.Fatalf("%v: effective view lacks the override or the mask:\n%s", args, s)
		}
		t.Logf("%v:\n%s", args, s)
	}
	var out, errOut bytes.Buffer
	if code := Main([]string{"config", "--config", path, "gne"}, &out, &errOut, nil); code != 1 || !strings.Contains(errOut.String(), `did you mean "gen"?`) {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	out.Reset()
	errOut.Reset()
	missing := filepath.Join(t.TempDir(), "none.toml")
	if code := Main([]string{"config", "--config", missing}, &out, &errOut, nil); code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "cannot read") {
		t.Fatalf("config of a missing file: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout", code, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	broken := setup(t, "[http\napi_key = \"api-s3cret\"\n", map[string]string{"gen.toml": validSource})
	if code := Main([]string{"config", "--config", broken}, &out, &errOut, nil); code != 1 || out.Len() != 0 || !strings.Contains(errOut.String(), "to end table name") || strings.Contains(errOut.String(), "api-s3cret") {
		t.Fatalf("config of a file that does not parse: exit %d, stdout %q, stderr %q; want exit 1, nothing on stdout", code, out.String(), errOut.String())
	}
}
