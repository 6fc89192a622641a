package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestInvalidSchemas checks that a broken schema gives an error naming the
// file and the JSON pointer, and never a panic or broken code.
func TestInvalidSchemas(t *testing.T) {
	head := `"$schema": "https://json-schema.org/draft/2020-12/schema", "x-kind": "sink", "x-path": "p", "type": "object", `
	tests := []struct {
		name, schema string
		want         []string
	}{
		{"not_json", `{"type": `, []string{"not valid JSON"}},
		{"not_object", `[1, 2]`, []string{"must be a JSON object"}},
		{"no_kind", `{"type": "object", "x-path": "p"}`, []string{"at /x-kind", "x-kind is required"}},
		{"bad_kind", `{"type": "object", "x-kind": "pump", "x-path": "p"}`, []string{"at /x-kind", `"pump"`}},
		{"no_path", `{"type": "object", "x-kind": "source"}`, []string{"at /x-path", "x-path is required"}},
		{"title", `{` + head + `"title": "other"}`, []string{"at /title", "must equal the file name"}},
		{"dup_key", `{` + head + `"properties": {"a": {"type": "string"}, "a": {"type": "string"}}}`, []string{`"/properties/a"`, "duplicate key"}},
		{"bad_xtype", `{` + head + `"properties": {"a": {"type": "string", "x-type": "color"}}}`, []string{"at /properties/a/x-type", `unknown x-type "color"`}},
		{"size_bool", `{` + head + `"properties": {"a": {"type": "boolean", "x-type": "size"}}}`, []string{"at /properties/a/type", "x-type size needs"}},
		{"no_type", `{` + head + `"properties": {"a": {"description": "x"}}}`, []string{"at /properties/a/type", "type is required"}},
		{"union", `{` + head + `"properties": {"a": {"type": ["string", "boolean"]}}}`, []string{"at /properties/a/type", "union type"}},
		{"enum_int", `{` + head + `"properties": {"a": {"type": "string", "enum": ["x", 1]}}}`, []string{"at /properties/a/enum/1", "must be strings"}},
		{"bad_default", `{` + head + `"properties": {"a": {"type": "integer", "default": "three"}}}`, []string{"at /properties/a/default", `default "three" does not fit`}},
		{"bad_size_default", `{` + head + `"properties": {"a": {"type": "string", "x-type": "size", "default": "8XB"}}}`, []string{"at /properties/a/default"}},
		{"bad_tpl_default", `{` + head + `"properties": {"a": {"type": "string", "x-type": "template", "x-placeholders": ["x"], "default": "{y}"}}}`, []string{"at /properties/a/default"}},
		{"req_if_unknown", `{` + head + `"properties": {"a": {"type": "integer", "x-required-if": {"key": "nope", "equals": "x"}}}}`, []string{"at /properties/a/x-required-if", `"nope"`}},
		{"req_if_shape", `{` + head + `"properties": {"a": {"type": "integer", "x-required-if": {"key": "a"}}}}`, []string{"at /properties/a/x-required-if", "needs equals or present"}},
		{"equals_type", `{` + head + `"properties": {"m": {"type": "string", "enum": ["x"]}, "a": {"type": "integer", "x-required-if": {"key": "m", "equals": "y"}}}}`, []string{"at /properties/a/x-required-if", `equals "y" does not fit`}},
		{"both_unknown", `{` + head + `"properties": {"a": {"type": "string", "x-both-or-neither": "b"}}}`, []string{"at /properties/a/x-both-or-neither", `"b"`}},
		{"default_if_value", `{` + head + `"properties": {"e": {"type": "string"}, "a": {"type": "boolean", "x-default-if": {"when": {"key": "e", "present": true}, "value": "yes"}}}}`, []string{"at /properties/a/x-default-if/value"}},
		{"bad_regex", `{` + head + `"properties": {"a": {"type": "string", "pattern": "(?<=x)"}}}`, []string{"at /properties/a/pattern", "regular expression"}},
		{"bad_unless_regex", `{` + head + `"properties": {"a": {"type": "string", "x-pattern-unless": {"pattern": "(", "unless": {"key": "a", "present": true}}}}}`, []string{"at /properties/a/x-pattern-unless/pattern"}},
		{"bound_on_int", `{` + head + `"properties": {"a": {"type": "integer", "x-maximum": "5"}}}`, []string{"at /properties/a/x-maximum", "applies only to x-type size or duration"}},
		{"bad_bound", `{` + head + `"properties": {"a": {"type": "string", "x-type": "duration", "x-maximum": "soon"}}}`, []string{"at /properties/a/x-maximum", "invalid duration"}},
		{"placeholders_on_string", `{` + head + `"properties": {"a": {"type": "string", "x-placeholders": ["x"]}}}`, []string{"at /properties/a/x-placeholders"}},
		{"secret_int", `{` + head + `"properties": {"a": {"type": "integer", "x-secret": true}}}`, []string{"at /properties/a/x-secret"}},
		{"alias_clash", `{` + head + `"properties": {"a": {"type": "string", "x-aliases": ["b"]}, "b": {"type": "string"}}}`, []string{"at /properties/a/x-aliases", `alias "b"`}},
		{"enum_alias_bad", `{` + head + `"properties": {"a": {"type": "string", "enum": ["x"], "x-enum-aliases": {"y": "z"}}}}`, []string{"at /properties/a/x-enum-aliases/y"}},
		{"array_objects_no_properties", `{` + head + `"properties": {"a": {"type": "array", "items": {"type": "object"}}}}`, []string{"at /properties/a/items", `"properties"`}},
		{"array_of_arrays", `{` + head + `"properties": {"a": {"type": "array", "items": {"type": "array"}}}}`, []string{"at /properties/a/items/type", "not supported"}},
		{"array_objects_default", `{` + head + `"properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string"}}}, "default": []}}}`, []string{"at /properties/a/default", "element keys defaults"}},
		{"array_objects_alias", `{` + head + `"properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "string", "x-aliases": ["c"]}}}}}}`, []string{"at /properties/a/items/properties/b/x-aliases", "not supported"}},
		{"array_objects_bad_default", `{` + head + `"properties": {"a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "integer", "default": "x"}}}}}}`, []string{"at /properties/a/items/properties/b/default"}},
		{"array_objects_cond", `{` + head + `"properties": {"z": {"type": "string"}, "a": {"type": "array", "items": {"type": "object", "properties": {"b": {"type": "integer", "x-required-if": {"key": "z", "present": true}}}}}}}`, []string{"at /properties/a/items/properties/b/x-required-if", `"z"`}},
		{"required_unknown", `{` + head + `"required": ["zz"], "properties": {"a": {"type": "string"}}}`, []string{"at /required", `"zz"`}},
		{"invalid_json_schema", `{` + head + `"properties": {"a": {"type": "string", "minLength": "three"}}}`, []string{"not a valid JSON Schema 2020-12", "minLength"}},
		{"env_collision", `{` + head + `"properties": {"Name": {"type": "string"}, "name": {"type": "string"}}}`, []string{"at /properties/name", `key "name" and key "Name"`, "NAME"}},
		{"env_collision_nested", `{` + head + `"properties": {"a_b": {"type": "string"}, "a": {"type": "object", "properties": {"b": {"type": "string"}}}}}`, []string{"at /properties/a/properties/b", "A_B"}},
		{"property_not_object", `{` + head + `"properties": {"a": 5}}`, []string{"at /properties/a", "must be an object"}},
		{"top_not_object", `{"$schema": "https://json-schema.org/draft/2020-12/schema", "x-kind": "sink", "x-path": "p", "type": "string"}`, []string{"at /type"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			file := filepath.Join(dir, tt.name+".json")
			schema := strings.ReplaceAll(tt.schema, `"title": "other"`, `"title": "other"`)
			if err := os.WriteFile(file, []byte(schema), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := RenderSchemas(dir)
			if err == nil {
				t.Fatal("no error")
			}
			msg := err.Error()
			if !strings.Contains(msg, tt.name+".json") {
				t.Errorf("error does not name the file: %s", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

// FuzzSchema feeds arbitrary schema text to the generator: it must return
// an error or code that gofmt accepts, and never panic.
func FuzzSchema(f *testing.F) {
	for _, s := range []string{
		`{"$schema": "https://json-schema.org/draft/2020-12/schema", "x-kind": "sink", "x-path": "p", "type": "object", "properties": {"a": {"type": "string"}}}`,
		`{"x-kind": "transform", "type": "object", "properties": {"*/": {"type": "integer", "description": "*/ \u0000"}}}`,
		`{"x-kind": "source", "x-path": "q", "type": "object", "properties": {"t": {"type": "object", "properties": {"u": {"type": "string", "enum": ["", "a"]}}}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		dir := t.TempDir()
		if err := os.WriteFile(filepath.Join(dir, "fz.json"), []byte(schema), 0o644); err != nil {
			t.Fatal(err)
		}
		files, err := RenderSchemas(dir)
		if err != nil {
			if !strings.Contains(err.Error(), "fz.json") {
				t.Fatalf("error without file name: %v", err)
			}
			return
		}
		if _, ok := files["fzconfig/config.go"]; !ok {
			t.Fatal("no code")
		}
	})
}
