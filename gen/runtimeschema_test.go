package gen

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/sdk/confgen"
)

// TestRuntimeSchemasAcceptSpecExamples validates definition files written
// as the specs write them against the reflected schemas/runtime/*.json.
func TestRuntimeSchemasAcceptSpecExamples(t *testing.T) {
	connector := compileFile(t, "../schemas/runtime/connector.json")
	runtime := compileFile(t, "../schemas/runtime/runtime.json")
	good := map[string]string{
		"s3 quick start": `
type = "sink"
key = "orders_s3"
enabled = true
version = 0
name = "Orders to S3"
path = "libpicomq_connector_s3_sink"

[[topics]]
pattern = 'orders\..*'
schema = "json"
batch_length = 1000
poll_interval = "100ms"

[plugin_config]
bucket = "picomq-archive"
region = "eu-west-1"
max_file_size = "64MiB"
`,
		"source with a routing rule and transforms": `
type = "source"
key = "orders_cdc"
enabled = true
version = 0
name = "Orders CDC"
path = "libpicomq_connector_postgres_source"

[[topics]]
topic = { strategy = "field", path = "tenant", template = "orders.{value}", fallback = "orders.unrouted" }
schema = "json"
create_topics = true
properties = { "linger.ms" = "5" }

[[transforms]]
type = "add_fields"
fields = { source = "picomq" }
`,
	}
	for name, doc := range good {
		var v map[string]any
		if _, err := toml.Decode(doc, &v); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if err := connector.Validate(confgen.Normalize(v)); err != nil {
			t.Errorf("%s rejected: %v", name, err)
		}
	}
	var bad map[string]any
	if _, err := toml.Decode("type = \"pump\"\nkey = \"Bad Key\"\nenabled = true\nversion = 0\nname = \"x\"\npath = \"p\"\n", &bad); err != nil {
		t.Fatal(err)
	}
	if err := connector.Validate(confgen.Normalize(bad)); err == nil || !strings.Contains(fmt.Sprintf("%#v", err), "/type") || !strings.Contains(fmt.Sprintf("%#v", err), "/key") {
		t.Errorf("bad definition: %v", err)
	}
	var rt map[string]any
	if _, err := toml.Decode("connectors_dir = \"connectors\"\n[broker]\nbootstrap_servers = \"127.0.0.1:9092\"\n[state]\nstorage = \"file\"\n[log]\nlevel = \"debug\"\n", &rt); err != nil {
		t.Fatal(err)
	}
	if err := runtime.Validate(confgen.Normalize(rt)); err != nil {
		t.Errorf("runtime config rejected: %v", err)
	}
}

func compileFile(t *testing.T, path string) interface{ Validate(any) error } {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := confgen.CompileSchema(path, b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
