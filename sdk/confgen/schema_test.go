package confgen

import (
	"strings"
	"testing"
)

const testSchema = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["bucket"],
  "properties": {
    "bucket": {"type": "string", "minLength": 3},
    "size": {"type": ["string", "integer"], "format": "size"},
    "delay": {"type": "string", "format": "duration"},
    "tpl": {"type": "string", "format": "template"},
    "fmt": {"type": "string", "enum": ["json_lines", "raw"]},
    "n": {"type": "integer", "minimum": 1},
    "key": {"type": "string", "pattern": "^A", "x-secret": true},
    "tls": {"type": "object", "additionalProperties": false, "properties": {"ca": {"type": "string"}}}
  }
}`

func TestCheckSchema(t *testing.T) {
	s, err := CompileSchema("test", []byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	spec := &SchemaSpec{
		Keys: map[string]KeyInfo{
			"key": {Secret: true},
			"n":   {Messages: map[string]string{"minimum": "n ({value}) must be positive"}},
		},
		Known: map[string][]string{"": {"bucket", "size", "delay", "tpl", "fmt", "n", "key", "tls"}, "tls": {"ca"}},
	}
	doc := NormalizeTable(map[string]any{
		"size": "8XB", "delay": "-1s", "tpl": "{a", "fmt": "json_line", "n": 0, "key": "zzsecret",
		"tls": map[string]any{"cax": "x"}, "buckt": "b", "it's, 'odd'": 1,
	})
	ps := CheckSchema(s, doc, spec)
	want := map[string]string{
		"bucket":  "is required but not set",
		"size":    `unknown unit "XB"`,
		"delay":   "must not be negative",
		"tpl":     "unbalanced '{'",
		"fmt":     `must be one of "json_lines", "raw", got "json_line" (did you mean "json_lines"?)`,
		"n":       "n (0) must be positive",
		"key":     "breaks the rule pattern",
		"tls.cax": `unknown key (did you mean "ca"?)`,
		"buckt":   `unknown key (did you mean "bucket"?)`,
	}
	for k, w := range want {
		found := false
		for _, p := range ps {
			if p.Key == k && strings.Contains(p.Message, w) {
				found = true
			}
		}
		if !found {
			t.Errorf("no problem for %s containing %q in\n%v", k, w, ps)
		}
	}
	if strings.Contains(ps.Error(), "zzsecret") {
		t.Errorf("secret leaked: %v", ps)
	}
	if ps := CheckSchema(s, NormalizeTable(map[string]any{"bucket": "abc", "size": 12, "n": 3, "fmt": 7}), spec); len(ps) != 1 || ps[0].Message != "must be a string, got integer 7" {
		t.Errorf("type problem: %v", ps)
	}
	if _, err := CompileSchema("bad", []byte(`{"type": 12}`)); err == nil || !strings.Contains(err.Error(), "schema bad") {
		t.Errorf("bad schema: %v", err)
	}
}
