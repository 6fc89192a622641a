package confgen

import (
	"reflect"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

func lookupMap(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestParseEnvValue(t *testing.T) {
	tests := []struct {
		in   string
		kind EnvKind
		want any
	}{
		{"42", EnvInt, int64(42)},
		{" -7 ", EnvInt, int64(-7)},
		{"1.5", EnvNumber, 1.5},
		{"true", EnvBool, true},
		{"off", EnvBool, false},
		{"a, b,c", EnvList, []any{"a", "b", "c"}},
		{`["a,b", "c"]`, EnvList, []any{"a,b", "c"}},
		{"", EnvList, []any{}},
		{" keep ", EnvString, " keep "},
	}
	for _, tt := range tests {
		got, err := ParseEnvValue(tt.in, tt.kind)
		if err != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("ParseEnvValue(%q, %d) = %#v, %v", tt.in, tt.kind, got, err)
		}
	}
	for _, tt := range []struct {
		in   string
		kind EnvKind
	}{{"x", EnvInt}, {"99999999999999999999", EnvInt}, {"NaN", EnvNumber}, {"maybe", EnvBool}, {"[1,", EnvList}} {
		if _, err := ParseEnvValue(tt.in, tt.kind); err == nil {
			t.Errorf("ParseEnvValue(%q) accepted", tt.in)
		}
	}
}

func TestBindEnv(t *testing.T) {
	doc := map[string]any{"scalar": "x"}
	env := lookupMap(map[string]string{
		"P_MAX": "12", "P_TLS_CA": "ca.pem", "P_BAD": "twelve", "P_SECRET": "s3cr3t", "P_SCALAR_X": "1",
	})
	if p := BindEnv(doc, []string{"max"}, "P_MAX", EnvInt, false, env); p != nil {
		t.Fatal(p)
	}
	if p := BindEnv(doc, []string{"tls", "ca"}, "P_TLS_CA", EnvString, false, env); p != nil {
		t.Fatal(p)
	}
	if p := BindEnv(doc, []string{"unset"}, "P_UNSET", EnvInt, false, env); p != nil {
		t.Fatal(p)
	}
	want := map[string]any{"scalar": "x", "max": int64(12), "tls": map[string]any{"ca": "ca.pem"}}
	if !reflect.DeepEqual(doc, want) {
		t.Fatalf("doc = %#v", doc)
	}
	p := BindEnv(doc, []string{"bad"}, "P_BAD", EnvInt, false, env)
	if p == nil || p.Key != "bad" || p.Rule != "env" || p.Message != `environment variable P_BAD = "twelve" is not an integer; use a whole number such as 1000` {
		t.Fatalf("%#v", p)
	}
	p = BindEnv(doc, []string{"secret"}, "P_SECRET", EnvInt, true, env)
	if p == nil || strings.Contains(p.Error(), "s3cr3t") || !strings.Contains(p.Message, "P_SECRET") || p.Value != confkit.Mask {
		t.Fatalf("%#v", p)
	}
	p = BindEnv(doc, []string{"scalar", "x"}, "P_SCALAR_X", EnvInt, false, env)
	if p == nil || !strings.Contains(p.Message, "scalar is not a table") {
		t.Fatalf("%#v", p)
	}
	if EnvName("PICOMQ_CONNECTORS_SINK_K_PLUGIN_CONFIG_", "tls", "ca_file") != "PICOMQ_CONNECTORS_SINK_K_PLUGIN_CONFIG_TLS_CA_FILE" {
		t.Fatal("EnvName")
	}
}

func FuzzBindEnv(f *testing.F) {
	for _, s := range []string{"12", "true", "a,b", `["x"]`, "[", "", "1e309", "-0"} {
		f.Add(s, uint8(0))
		f.Add(s, uint8(4))
	}
	f.Fuzz(func(t *testing.T, text string, k uint8) {
		kind := EnvKind(k % 5)
		doc := map[string]any{}
		p := BindEnv(doc, []string{"a", "b"}, "V", kind, kind == EnvString, func(string) (string, bool) { return text, true })
		if p != nil {
			if !strings.Contains(p.Message, "V") || p.Key != "a.b" {
				t.Fatalf("problem %#v", p)
			}
			return
		}
		v := doc["a"].(map[string]any)["b"]
		switch kind {
		case EnvInt:
			_ = v.(int64)
		case EnvNumber:
			_ = v.(float64)
		case EnvBool:
			_ = v.(bool)
		case EnvList:
			_ = v.([]any)
		default:
			if v.(string) != text {
				t.Fatal("string changed")
			}
		}
	})
}

func TestBindEnvRefusesInvalidUTF8(t *testing.T) {
	env := map[string]string{"X_PREFIX": "raw/\xff\xfe", "X_TOKEN": "s3cr\xffet"}
	lookup := func(n string) (string, bool) { v, ok := env[n]; return v, ok }
	doc := map[string]any{}
	p := BindEnv(doc, []string{"prefix"}, "X_PREFIX", EnvString, false, lookup)
	if p == nil || !strings.Contains(p.Message, "X_PREFIX") || !strings.Contains(p.Message, "not valid UTF-8") {
		t.Fatalf("invalid UTF-8 in a plain value: %+v", p)
	}
	p = BindEnv(doc, []string{"token"}, "X_TOKEN", EnvString, true, lookup)
	if p == nil || strings.Contains(p.Message, "s3cr") || strings.Contains(p.Value, "s3cr") || !strings.Contains(p.Message, "X_TOKEN") {
		t.Fatalf("invalid UTF-8 in a secret: %+v", p)
	}
	if len(doc) != 0 {
		t.Fatalf("a refused value was applied: %v", doc)
	}
}
