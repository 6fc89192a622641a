package randomsource

import (
	"context"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

func noEnv(string) (string, bool) { return "", false }

func TestRegisteredAndLoads(t *testing.T) {
	reg, ok := sdk.Lookup("libpicomq_connector_random_source")
	if !ok || reg.Kind != sdk.KindSource {
		t.Fatal("random source not registered")
	}
	env := map[string]string{"P_INTERVAL": "0s"}
	cfg, err := reg.Load(map[string]any{"records_per_batch": int64(7), "key_shape": "uuid", "max_records": int64(10)}, "P_",
		func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err != nil {
		t.Fatal(err)
	}
	src, err := reg.NewSource(cfg, sdktest.Env(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), []byte(`{"next_seq":5}`)); err != nil {
		t.Fatal(err)
	}
	b, err := src.Poll(context.Background())
	if err != nil || len(b.Messages) != 5 || string(b.State) != `{"next_seq":10}` || len(b.Messages[0].Key) != 36 {
		t.Fatalf("batch %d records, state %s, err %v", len(b.Messages), b.State, err)
	}
	if _, err := reg.Load(map[string]any{"records_per_batch": int64(0), "payload_shape": "xml"}, "P_", noEnv); err == nil ||
		!strings.Contains(err.Error(), "records_per_batch") || !strings.Contains(err.Error(), "payload_shape") {
		t.Fatalf("bad config error = %v", err)
	}
	if err := src.Open(context.Background(), []byte("junk")); err == nil {
		t.Fatal("junk state accepted")
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := randomsourceconfig.Load(map[string]any{}, "P_", noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RecordsPerBatch != 100 || cfg.PayloadSize != 256 || cfg.KeyShape != randomsourceconfig.KeyShapeSequence ||
		cfg.PayloadShape != randomsourceconfig.PayloadShapeJSON || cfg.Seed != 1 || cfg.MaxRecords != nil {
		t.Fatalf("defaults %+v", cfg)
	}
}
