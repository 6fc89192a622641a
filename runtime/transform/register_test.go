package transform

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

func build(t *testing.T, path string, raw map[string]any) sdk.Transform {
	t.Helper()
	reg, ok := sdk.Lookup(path)
	if !ok || reg.Kind != sdk.KindTransform {
		t.Fatalf("%s not registered", path)
	}
	cfg, err := reg.Load(raw, "T_", func(string) (string, bool) { return "", false })
	if err != nil {
		t.Fatal(err)
	}
	tr, err := reg.NewTransform(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestRegisteredTransforms(t *testing.T) {
	chain := []sdk.Transform{
		build(t, "add_fields", map[string]any{"fields": map[string]any{"origin": "x", "meta.env": "prod"}}),
		build(t, "rename_fields", map[string]any{"fields": map[string]any{"ts": "meta.at"}}),
		build(t, "delete_fields", map[string]any{"fields": []any{"secret"}}),
	}
	rec := &sdk.TransformRecord{Value: map[string]any{"ts": "t", "secret": "s", "origin": "keep?"}}
	for _, tr := range chain {
		if err := tr.Apply(rec); err != nil {
			t.Fatal(err)
		}
	}
	b, _ := json.Marshal(rec.Value)
	if string(b) != `{"meta":{"at":"t","env":"prod"},"origin":"x"}` {
		t.Fatal(string(b))
	}
	reg, _ := sdk.Lookup("add_fields")
	if _, err := reg.Load(map[string]any{}, "T_", func(string) (string, bool) { return "", false }); err == nil || !strings.Contains(err.Error(), "fields") {
		t.Fatalf("missing fields: %v", err)
	}
}
