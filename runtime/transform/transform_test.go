package transform

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

func apply(t *testing.T, tr sdk.Transform, in string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(in), &v); err != nil {
		t.Fatal(err)
	}
	rec := &sdk.TransformRecord{Value: v}
	if err := tr.Apply(rec); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(rec.Value)
	return string(b)
}

func TestAddFields(t *testing.T) {
	tr := AddFields(map[string]any{"source": "picomq", "meta.env": "prod", "n": int64(3), "list": []any{"a"}}, true)
	got := apply(t, tr, `{"source":"old","meta":{"x":1}}`)
	if got != `{"list":["a"],"meta":{"env":"prod","x":1},"n":3,"source":"picomq"}` {
		t.Fatal(got)
	}
	if got := apply(t, AddFields(map[string]any{"source": "new", "a.b.c": true}, false), `{"source":"old"}`); got != `{"a":{"b":{"c":true}},"source":"old"}` {
		t.Fatal(got)
	}
	rec := &sdk.TransformRecord{Value: map[string]any{"meta": "scalar"}}
	if err := tr.Apply(rec); err == nil || !strings.Contains(err.Error(), `"meta.env"`) {
		t.Fatalf("error = %v", err)
	}
}

func TestAddFieldsCopiesValues(t *testing.T) {
	tr := AddFields(map[string]any{"list": []any{"a"}}, true)
	r1 := &sdk.TransformRecord{Value: map[string]any{}}
	r2 := &sdk.TransformRecord{Value: map[string]any{}}
	tr.Apply(r1)
	tr.Apply(r2)
	r1.Value.(map[string]any)["list"].([]any)[0] = "changed"
	if r2.Value.(map[string]any)["list"].([]any)[0] != "a" {
		t.Fatal("records share an added value")
	}
}

func TestDeleteFields(t *testing.T) {
	got := apply(t, DeleteFields([]string{"password", "card.number", "missing", "x.y.z"}), `{"password":"p","card":{"number":"1","exp":"2"},"x":1}`)
	if got != `{"card":{"exp":"2"},"x":1}` {
		t.Fatal(got)
	}
}

func TestRenameFields(t *testing.T) {
	got := apply(t, RenameFields(map[string]string{"user_id": "uid", "ts": "meta.timestamp", "gone": "x"}), `{"user_id":7,"ts":"t","uid":0}`)
	if got != `{"meta":{"timestamp":"t"},"uid":7}` {
		t.Fatal(got)
	}
}

func TestNotAnObject(t *testing.T) {
	for _, tr := range []sdk.Transform{AddFields(map[string]any{"a": 1}, true), DeleteFields([]string{"a"}), RenameFields(map[string]string{"a": "b"})} {
		for _, v := range []any{[]byte("raw"), "text", []any{}, nil} {
			err := tr.Apply(&sdk.TransformRecord{Value: v})
			if err == nil || !strings.Contains(err.Error(), "is not a JSON object") {
				t.Errorf("%T on %T: %v", tr, v, err)
			}
		}
	}
}
