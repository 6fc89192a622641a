package s3sink

import (
	"os"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/definition"
)

// TestExampleDefinition loads examples/s3_sink.toml the way the runtime
// does and checks that the plugin_config is valid.
func TestExampleDefinition(t *testing.T) {
	data, err := os.ReadFile("../../examples/s3_sink.toml")
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
}
