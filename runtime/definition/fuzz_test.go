package definition

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The fuzz targets load definitions through the test plugins registered in
// load_test.go (libpicomq_connector_test_sink/_source, add_fields). Seeds
// live in testdata/fuzz/<FuzzName>/ as well as below.

const fuzzSink = `type = "sink"
key = "orders_s3"
version = 0
name = "Orders"
path = "libpicomq_connector_test_sink"

[[topics]]
pattern = 'orders\..*'
batch_length = 10
poll_interval = "100ms"
[topics.properties]
"fetch.min.bytes" = 1

[plugin_config]
bucket = "b"
`

const fuzzSource = `type = "source"
key = "gen"
path = "libpicomq_connector_test_source"

[[topics]]
topic = { strategy = "field", path = "tenant", template = "orders.{value}", fallback = "orders.other" }
linger_time = "1ms"
create_topics = true
partitions = 1

[[transforms]]
type = "add_fields"
field = "x"

[plugin_config]
bucket = "c"
`

// fuzzLoad writes a runtime config and definition files to a fresh folder
// and loads them.
func fuzzLoad(t *testing.T, runtime string, defs map[string][]byte, env map[string]string) (*Config, error) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtime), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range defs {
		if err := os.WriteFile(filepath.Join(dir, "connectors", name), body, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return Load(filepath.Join(dir, "runtime.toml"), env)
}

// FuzzLoadDefinition feeds arbitrary bytes to the loader as one definition
// file: it must return a config or problems, never panic, and a problem
// must say something.
func FuzzLoadDefinition(f *testing.F) {
	f.Add([]byte(fuzzSink))
	f.Add([]byte(fuzzSource))
	f.Add([]byte("type = \"sink\"\nkey = 1\n"))
	f.Add([]byte("type = \"source\"\n\xff\xfe = 1\n"))
	f.Add([]byte(strings.Replace(fuzzSink, `'orders\..*'`, `'orders\.('`, 1)))
	f.Add([]byte(strings.Replace(fuzzSource, "partitions = 1", "partitions = 99999999999999999999", 1)))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := fuzzLoad(t, "[state]\npath = \"st\"\n", map[string][]byte{"c.toml": data}, nil)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("empty error for %q", data)
			}
			return
		}
		if cfg == nil {
			t.Fatalf("nil config and nil error for %q", data)
		}
		for _, d := range cfg.Connectors {
			if d.Type != "sink" && d.Type != "source" {
				t.Fatalf("loaded a definition of type %q from %q", d.Type, data)
			}
		}
	})
}

// FuzzEnvOverrides applies one arbitrary PICOMQ_CONNECTORS_ variable to a
// valid runtime config with a sink and a source: the result is a config or
// problems, never a panic, and an accepted override (other than of
// connectors_dir) leaves both definitions loaded.
func FuzzEnvOverrides(f *testing.F) {
	f.Add("SINK_ORDERS_S3_TOPICS_0_BATCH_LENGTH", "ten")
	f.Add("SINK_ORDERS_S3_TOPICS_0_PATTERN", "(")
	f.Add("SINK_ORDERS_S3_ENABLED", "maybe")
	f.Add("SINK_ORDERS_S3_PLUGIN_CONFIG_BUCKET", "raw\xff\xfe")
	f.Add("SOURCE_GEN_TOPICS_0_PARTITIONS", "3")
	f.Add("SOURCE_GEN_TOPICS_7_TOPIC", "x")
	f.Add("SOURCE_GEN_TOPICS_0_TOPIC", `{"strategy":"field"}`)
	f.Add("SOURCE_GEN_TRANSFORMS_0_TYPE", "nope")
	f.Add("STATE_STORAGE", "ftp")
	f.Add("STATE_HTTP_MAX_ATTEMPTS", "99999999999999999999999")
	f.Add("BROKER_PROPERTIES_LINGER_MS", "-1")
	f.Add("SHUTDOWN_GRACE", "-3s")
	f.Add("HTTP_ADDRESS", "::::")
	f.Fuzz(func(t *testing.T, name, value string) {
		env := map[string]string{EnvPrefix + name: value}
		cfg, err := fuzzLoad(t, "[state]\npath = \"st\"\n", map[string][]byte{"a.toml": []byte(fuzzSink), "b.toml": []byte(fuzzSource)}, env)
		if err != nil {
			if strings.TrimSpace(err.Error()) == "" {
				t.Fatalf("empty error for %s=%q", name, value)
			}
			return
		}
		if cfg == nil {
			t.Fatalf("nil config and nil error for %s=%q", name, value)
		}
		if len(cfg.Connectors) != 2 && !strings.HasPrefix(name, "CONNECTORS_DIR") {
			t.Fatalf("%s=%q: %d definitions loaded, want 2", name, value, len(cfg.Connectors))
		}
	})
}
