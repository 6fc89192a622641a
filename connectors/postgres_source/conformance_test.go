package postgressource

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// build builds a source the way the runtime does: generated Load, then New.
func build(raw map[string]any) (sdk.Source, error) {
	cfg, err := postgressourceconfig.Load(raw, "PICOMQ_CONNECTORS_SOURCE_PG_PLUGIN_CONFIG_", func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	return New(cfg, testEnv())
}

// load builds a source and opens it without a state.
func load(raw map[string]any) (sdk.Source, error) {
	s, err := build(raw)
	if err != nil {
		return nil, err
	}
	if err := s.Open(context.Background(), nil); err != nil {
		s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

func TestConformance(t *testing.T) {
	for _, mode := range []string{"cdc", "cdc-stream", "polling"} {
		t.Run(mode, func(t *testing.T) {
			var raw map[string]any
			setup := func(t *testing.T) {
				db := newDB(t)
				db.exec(`CREATE TABLE ev (id int PRIMARY KEY, v text)`)
				raw = map[string]any{
					"connection_string": db.dsn, "mode": strings.TrimSuffix(mode, "-stream"), "tables": []any{"public.ev"},
					"batch_size": 8, "poll_interval": "20ms", "replication_slot": "s_" + db.tag, "publication": "p_" + db.tag,
				}
				if mode == "cdc-stream" {
					raw["cdc_reader"] = "stream"
				}
				if mode != "polling" {
					s, err := load(raw) // creates the slot and publication
					if err != nil {
						t.Fatal(err)
					}
					s.Close(context.Background())
				}
				for i := 1; i <= 12; i++ {
					db.exec(fmt.Sprintf(`INSERT INTO ev VALUES (%d, 'v')`, i))
				}
			}
			sdktest.TestSource(t, func(t *testing.T) (sdk.Source, error) {
				return build(raw)
			}, sdktest.WithSetup(setup))
		})
	}
}

func TestLoadAndNew(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int PRIMARY KEY)`)
	_, err := load(map[string]any{"connection_string": db.dsn, "tables": []any{"ev"}, "mode": "polling", "delete_after_read": true, "processed_column": "x"})
	if err == nil || !strings.Contains(err.Error(), "delete_after_read and processed_column") {
		t.Errorf("got %v", err)
	}
	_, err = load(map[string]any{"tables": []any{"ev"}})
	if err == nil || !strings.Contains(err.Error(), "connection_string is required") {
		t.Errorf("got %v", err)
	}
	s, err := load(map[string]any{"connection_string": db.dsn, "tables": []any{"ev"}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	if got := db.value(`SELECT slot_name FROM pg_replication_slots WHERE slot_name = 'picomq_test'`); got != "picomq_test" {
		t.Errorf("default slot name: %q", got)
	}
	if _, ok := sdk.Lookup("libpicomq_connector_postgres_source"); !ok {
		t.Error("not registered")
	}
}

// TestRegisteredLoadChecks: the registration's Load, which validate runs,
// applies the rules the schema cannot state, with no server to reach, and
// never quotes the connection string.
func TestRegisteredLoadChecks(t *testing.T) {
	reg, _ := sdk.Lookup("libpicomq_connector_postgres_source")
	noEnv := func(string) (string, bool) { return "", false }
	for _, c := range []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{"connection_string": "postgres://u:pw-CANARY@127.0.0.1:1/db", "tables": []any{"ev"}, "mode": "polling", "delete_after_read": true, "processed_column": "x"},
			"delete_after_read and processed_column: choose one"},
		{map[string]any{"connection_string": "postgres://u:pw-CANARY@127.0.0.1:1/db?sslmode=bogus", "tables": []any{"ev"}},
			"connection_string: not a valid PostgreSQL connection string: failed to configure TLS (sslmode is invalid)"},
		{map[string]any{"connection_string": "postgres://u:pw-CANARY@127.0.0.1:1/db", "tables": []any{`"unclosed`}},
			"tables[0]: "},
		{map[string]any{"connection_string": "postgres://u:pw-CANARY@[::1/db", "tables": []any{"ev"}},
			"connection_string: not a valid PostgreSQL connection string: failed to parse as URL (end of string reached"},
	} {
		_, err := reg.Load(c.raw, "P_", noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Load(%v) = %v; want %q", c.raw["tables"], err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "CANARY") {
			t.Errorf("the error quotes the connection string: %v", err)
		}
	}
	// A check's problem of a key set by an environment variable names it.
	env := func(name string) (string, bool) {
		if name == "P_CONNECTION_STRING" {
			return "postgres://u:pw-CANARY@127.0.0.1:1/db?sslmode=bogus", true
		}
		return "", false
	}
	_, err := reg.Load(map[string]any{"connection_string": "postgres://u:p@h/db", "tables": []any{"ev"}}, "P_", env)
	if want := "connection_string: environment variable P_CONNECTION_STRING: not a valid PostgreSQL connection string"; err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "CANARY") {
		t.Errorf("Load with the string from the environment = %v; want %q", err, want)
	}
}
