package s3sink

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/cli"
)

// TestParquetValidateTopics: pico-connectors validate hands the sink its
// [[topics]] blocks. With output_format = parquet and no columns, a JSON
// block is refused, naming the file, the block, its topic and the key; an
// Avro block (its schema from avro_schema_path) passes.
func TestParquetValidateTopics(t *testing.T) {
	write, validate := validateDir(t)
	write("connectors/order.avsc", smallAvro)
	def := lakeAvroDef + `%s
[plugin_config]
bucket = "picomq-archive"
region = "eu-west-1"
output_format = "parquet"
`
	write("connectors/lake.toml", strings.Replace(def, "%s", "", 1))
	if code, out := validate(); code != 0 {
		t.Fatalf("an Avro topic without columns: exit %d\n%s", code, out)
	}
	write("connectors/lake.toml", strings.Replace(def, "%s", "\n[[topics]]\ntopic = \"clicks\"\n", 1))
	code, out := validate()
	want := `connectors/lake.toml: topics[1] (clicks) has schema = "json": output_format = "parquet" takes a JSON topic's columns from [[plugin_config.columns]], and none are listed`
	if code != 1 || !strings.Contains(out, want) {
		t.Fatalf("a JSON topic without columns: exit %d\n%s\nwant %s", code, out, want)
	}
}

// validateDir makes a config directory with an empty runtime.toml: write
// puts a file in it, validate runs pico-connectors validate on it and
// returns the exit code and the output.
func validateDir(t *testing.T) (write func(name, body string), validate func() (int, string)) {
	dir := t.TempDir()
	write = func(name, body string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	validate = func() (int, string) {
		var out bytes.Buffer
		code := cli.Main([]string{"validate", "--config", filepath.Join(dir, "runtime.toml")}, &out, &out, nil)
		return code, out.String()
	}
	write("runtime.toml", "")
	return write, validate
}

// lakeAvroDef starts the definition of sink lake, whose first [[topics]]
// block is the Avro topic orders, its schema in order.avsc.
const lakeAvroDef = `type = "sink"
key = "lake"
path = "libpicomq_connector_s3_sink"

[[topics]]
topic = "orders"
schema = "avro"
avro_schema_path = "order.avsc"
`
