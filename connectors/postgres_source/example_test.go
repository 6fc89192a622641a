package postgressource

import (
	"context"
	"testing"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
)

// The example definition loads, and runs against a real server with the
// connection string from the environment variable its header documents.
func TestExampleDefinition(t *testing.T) {
	var def struct {
		Key          string         `toml:"key"`
		Path         string         `toml:"path"`
		PluginConfig map[string]any `toml:"plugin_config"`
	}
	if _, err := toml.DecodeFile("../../examples/postgres_source.toml", &def); err != nil {
		t.Fatal(err)
	}
	if def.Path != postgressourceconfig.Path {
		t.Fatalf("path %q", def.Path)
	}
	db := newDB(t)
	db.exec(`CREATE TABLE orders (id serial PRIMARY KEY, tenant text, amount numeric); INSERT INTO orders (tenant, amount) VALUES ('acme', 1)`)
	env := map[string]string{"PICOMQ_CONNECTORS_SOURCE_ORDERS_CDC_PLUGIN_CONFIG_CONNECTION_STRING": db.dsn}
	cfg, err := postgressourceconfig.Load(def.PluginConfig, "PICOMQ_CONNECTORS_SOURCE_ORDERS_CDC_PLUGIN_CONFIG_", func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Redacted()["connection_string"]; got != "****" {
		t.Errorf("redacted connection_string = %v", got)
	}
	src, err := New(cfg, testEnv())
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	s := src.(*Source)
	b := next(t, s) // the initial snapshot
	if len(b.Messages) != 1 {
		t.Fatalf("got %v", payloads(b))
	}
	db.exec(`SELECT pg_drop_replication_slot('orders_cdc')`)
}
