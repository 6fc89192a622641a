package s3sink

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/definition"
)

// TestExampleDefinition loads examples/s3_sink.toml the way the runtime
// does and checks that the plugin_config is valid.
func TestExampleDefinition(t *testing.T) {
	o := loadExample(t, "../../examples/s3_sink.toml")
	if o.Format != formatJSONLines {
		t.Fatalf("format %v", o.Format)
	}
}

// TestParquetExampleDefinition checks examples/s3_sink_parquet.toml the
// same way, and through pico-connectors validate.
func TestParquetExampleDefinition(t *testing.T) {
	o := loadExample(t, "../../examples/s3_sink_parquet.toml")
	if o.Format != formatParquet || o.ParquetCodec != "zstd" || len(o.Columns) != 7 ||
		o.Columns[2] != (columnSpec{Name: "amount", Type: "decimal", Precision: 12, Scale: 2}) {
		t.Fatalf("options = %+v", o)
	}
	l, err := newPQLayout(&o)
	if err != nil {
		t.Fatal(err)
	}
	if len(l.cols) != 12 || l.cols[5].name != "order_id" {
		t.Fatalf("columns %+v", l.cols)
	}
	dir := t.TempDir()
	data, err := os.ReadFile("../../examples/s3_sink_parquet.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "connectors", "s3_sink_parquet.toml"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	rt := filepath.Join(dir, "runtime.toml")
	if err := os.WriteFile(rt, []byte("connectors_dir = \"connectors\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// What pico-connectors validate runs.
	cfg, err := definition.Load(rt, definition.Environ(nil))
	if err != nil {
		t.Fatalf("validate: %v", err)
	}
	if len(cfg.Connectors) != 1 || cfg.Connectors[0].Key != "orders_parquet" {
		t.Fatalf("connectors %+v", cfg.Connectors)
	}
}

func loadExample(t *testing.T, path string) options {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var def definition.Connector
	if _, err := toml.Decode(string(data), &def); err != nil {
		t.Fatal(err)
	}
	if def.Path != s3sinkconfig.Path || def.Type != "sink" || len(def.Topics) != 1 {
		t.Fatalf("definition = %+v", def)
	}
	cfg, err := s3sinkconfig.Load(def.PluginConfig, envPrefix, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	o := fromConfig(cfg)
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	return o
}
