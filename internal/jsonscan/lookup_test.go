package jsonscan

import "testing"

func TestLookup(t *testing.T) {
	doc := []byte(` {"id": 7, "skip": {"region": "no"}, "customer" : {"name":"A\"b", "region" : "eu-west", "n": [1, {"x": 2}]},
		"re\u0067ion": "top", "region": "second", "nul": null}`)
	for _, tt := range []struct {
		path  []string
		want  string
		found bool
	}{
		{[]string{"id"}, `7`, true},
		{[]string{"customer", "region"}, `"eu-west"`, true},
		{[]string{"customer", "name"}, `"A\"b"`, true},
		{[]string{"customer", "n"}, `[1, {"x": 2}]`, true},
		{[]string{"region"}, `"top"`, true}, // the escaped key, written first
		{[]string{"nul"}, `null`, true},
		{[]string{"missing"}, ``, false},
		{[]string{"id", "x"}, ``, false},
		{[]string{"customer", "missing"}, ``, false},
		{nil, ``, false},
	} {
		raw, found := Lookup(doc, tt.path)
		if found != tt.found || string(raw) != tt.want {
			t.Errorf("Lookup(%v) = %q, %v; want %q, %v", tt.path, raw, found, tt.want, tt.found)
		}
	}
	for _, bad := range []string{``, `[1]`, `{"a" 1}`, `{"a": }`, `{"a": 1 "b": 2}`, `{"a": 1,`, `"x"`} {
		if raw, found := Lookup([]byte(bad), []string{"b"}); found {
			t.Errorf("Lookup(%q) found %q", bad, raw)
		}
	}
	// The scan stops at the value: what follows it is not read.
	if raw, found := Lookup([]byte(`{"a": "x", "b": nonsense`), []string{"a"}); !found || string(raw) != `"x"` {
		t.Errorf("early stop: %q %v", raw, found)
	}
	for _, tt := range []struct{ in, want string }{{`"plain"`, "plain"}, {`"a\u00e9\n"`, "aé\n"}} {
		if got, ok := AppendUnquoted(nil, []byte(tt.in)); !ok || string(got) != tt.want {
			t.Errorf("AppendUnquoted(%s) = %q, %v", tt.in, got, ok)
		}
	}
	for _, bad := range []string{`7`, `"`, `"\x"`} {
		if _, ok := AppendUnquoted(nil, []byte(bad)); ok {
			t.Errorf("AppendUnquoted(%s) accepted", bad)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	doc := []byte(`{"id":123456,"ts":"2026-01-02T03:04:05Z","customer":{"name":"someone","tier":"gold"},"region":"eu-west-1","items":[1,2,3]}`)
	path := []string{"region"}
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, ok := Lookup(doc, path); !ok {
			b.Fatal("not found")
		}
	}
}
