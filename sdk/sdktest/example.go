package sdktest

import (
	"os"
	"testing"

	"github.com/BurntSushi/toml"
)

// Definition is what a test reads of a definition file: enough to check
// that it names the connector and that its plugin_config loads.
type Definition struct {
	// Type is "sink" or "source".
	Type string `toml:"type"`
	// Key is the connector's key.
	Key string `toml:"key"`
	// Path names the registered connector.
	Path string `toml:"path"`
	// PluginConfig is the [plugin_config] table, as the runtime hands it
	// to the connector's generated Load.
	PluginConfig map[string]any `toml:"plugin_config"`
}

// ReadDefinition reads the definition file at path, failing t when it
// cannot be read or is not TOML. The runtime checks much more of it
// (pico-connectors validate); this is for a connector's own test of its
// example definition.
func ReadDefinition(t testing.TB, path string) Definition {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read the definition: %v", err)
	}
	var d Definition
	if err := toml.Unmarshal(b, &d); err != nil {
		t.Fatalf("%s is not a valid TOML definition: %v", path, err)
	}
	return d
}
