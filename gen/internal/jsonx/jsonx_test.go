package jsonx

import (
	"strings"
	"testing"
)

func TestOrderAndRoundTrip(t *testing.T) {
	src := `{"z": 1, "a": {"y": [true, null, "s\u003c"], "b": 2.50}, "m": {}}`
	n, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(n.Keys, ",") != "z,a,m" || strings.Join(n.Get("a").Keys, ",") != "y,b" {
		t.Fatalf("order %v", n.Keys)
	}
	n.Get("a").Set("x", NewString("new"), "y")
	out := string(Marshal(n))
	want := "{\n  \"z\": 1,\n  \"a\": {\n    \"y\": [\n      true,\n      null,\n      \"s<\"\n    ],\n    \"x\": \"new\",\n    \"b\": 2.50\n  },\n  \"m\": {}\n}\n"
	if out != want {
		t.Fatalf("got\n%s\nwant\n%s", out, want)
	}
	again, err := Parse([]byte(out))
	if err != nil || string(Marshal(again)) != out {
		t.Fatalf("not stable: %v", err)
	}
}

func TestErrors(t *testing.T) {
	for src, want := range map[string]string{
		`{"a": 1, "a": 2}`:            `"/a": duplicate key`,
		`{"a": {"b/c": 1, "b/c": 1}}`: `"/a/b~1c": duplicate key`,
		`{"a": `:                      "at",
		`{} {}`:                       "after the top-level value",
	} {
		if _, err := Parse([]byte(src)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%s) = %v; want %q", src, err, want)
		}
	}
}
