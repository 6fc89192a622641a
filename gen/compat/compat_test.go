package compat

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

// base is the old schema every case edits.
const base = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "type": "object",
  "additionalProperties": false,
  "required": ["bucket"],
  "properties": {
    "bucket": {"type": "string", "minLength": 3, "maxLength": 63, "description": "Bucket."},
    "max_attempts": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3, "x-aliases": ["max_retries"]},
    "max_file_size": {"type": ["string", "integer"], "x-type": "size", "x-maximum": "5GiB", "default": "8MiB"},
    "retry_delay": {"type": "string", "x-type": "duration", "default": "1s"},
    "path": {"type": "string", "x-type": "template", "x-placeholders": ["topic", "date"]},
    "output_format": {"type": "string", "enum": ["json_lines", "json_array", "raw"], "default": "json_lines",
      "x-enum-aliases": {"jsonl": "json_lines"}},
    "tls": {"type": "object", "additionalProperties": false, "properties": {
      "ca_file": {"type": "string"},
      "verify": {"type": "boolean", "default": true}
    }},
    "columns": {"type": "array", "items": {"type": "object", "required": ["name"], "properties": {
      "name": {"type": "string"},
      "type": {"type": "string", "enum": ["string", "int64"], "default": "string"},
      "scale": {"type": "integer", "minimum": 0}
    }}}
  }
}`

// column returns the schema of the element key k of columns in p.
func column(p map[string]map[string]any, k string) map[string]any {
	return p["columns"]["items"].(map[string]any)["properties"].(map[string]any)[k].(map[string]any)
}

// edit applies f to a decoded copy of base and returns the new schema.
func edit(t *testing.T, f func(s map[string]any, p map[string]map[string]any)) []byte {
	t.Helper()
	var s map[string]any
	if err := json.Unmarshal([]byte(base), &s); err != nil {
		t.Fatal(err)
	}
	p := map[string]map[string]any{}
	for k, v := range s["properties"].(map[string]any) {
		p[k] = v.(map[string]any)
	}
	f(s, p)
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestBreakingChanges(t *testing.T) {
	cases := []struct {
		name string
		edit func(s map[string]any, p map[string]map[string]any)
		want Change
	}{
		{"KeyRemoved", func(s map[string]any, p map[string]map[string]any) {
			delete(s["properties"].(map[string]any), "retry_delay")
		}, Change{Key: "retry_delay", Kind: KeyRemoved}},
		{"KeyRenamedWithoutAlias", func(s map[string]any, p map[string]map[string]any) {
			props := s["properties"].(map[string]any)
			props["backoff"] = props["retry_delay"]
			delete(props, "retry_delay")
		}, Change{Key: "retry_delay", Kind: KeyRemoved}},
		{"NestedKeyRemoved", func(s map[string]any, p map[string]map[string]any) {
			delete(p["tls"]["properties"].(map[string]any), "ca_file")
		}, Change{Key: "tls.ca_file", Kind: KeyRemoved}},
		{"TypeChanged", func(s map[string]any, p map[string]map[string]any) {
			p["bucket"]["type"] = "integer"
		}, Change{Key: "bucket", Kind: TypeChanged}},
		{"XTypeChanged", func(s map[string]any, p map[string]map[string]any) {
			p["retry_delay"]["x-type"] = "size"
		}, Change{Key: "retry_delay", Kind: TypeChanged}},
		{"TypeNarrowed", func(s map[string]any, p map[string]map[string]any) {
			p["max_file_size"]["type"] = "string"
		}, Change{Key: "max_file_size", Kind: TypeChanged}},
		{"NewRequiredKeyWithoutDefault", func(s map[string]any, p map[string]map[string]any) {
			s["properties"].(map[string]any)["region"] = map[string]any{"type": "string"}
			s["required"] = []any{"bucket", "region"}
		}, Change{Key: "region", Kind: RequiredAdded}},
		{"OptionalKeyMadeRequired", func(s map[string]any, p map[string]map[string]any) {
			p["tls"]["required"] = []any{"ca_file"}
		}, Change{Key: "tls.ca_file", Kind: RequiredAdded}},
		{"EnumValueRemoved", func(s map[string]any, p map[string]map[string]any) {
			p["output_format"]["enum"] = []any{"json_lines", "json_array"}
		}, Change{Key: "output_format", Kind: EnumValueRemoved}},
		{"EnumAliasRemoved", func(s map[string]any, p map[string]map[string]any) {
			// An alias is not an enum value; removing one is caught
			// only if it was listed in enum. Old files using "raw" break.
			p["output_format"]["enum"] = []any{"json_lines", "json_array", "jsonl"}
		}, Change{Key: "output_format", Kind: EnumValueRemoved}},
		{"NewConditionalRequirement", func(s map[string]any, p map[string]map[string]any) {
			p["tls"]["properties"].(map[string]any)["ca_file"].(map[string]any)["x-required-if"] = map[string]any{"key": "verify", "equals": true}
		}, Change{Key: "tls.ca_file", Kind: RequiredAdded}},
		{"NewBothOrNeither", func(s map[string]any, p map[string]map[string]any) {
			p["bucket"]["x-both-or-neither"] = "retry_delay"
		}, Change{Key: "bucket", Kind: RequiredAdded}},
		{"KeyAliasRemoved", func(s map[string]any, p map[string]map[string]any) {
			delete(p["max_attempts"], "x-aliases")
		}, Change{Key: "max_attempts", Kind: KeyRemoved}},
		{"EnumValueAliasRemoved", func(s map[string]any, p map[string]map[string]any) {
			delete(p["output_format"], "x-enum-aliases")
		}, Change{Key: "output_format", Kind: EnumValueRemoved}},
		{"MinimumRaised", func(s map[string]any, p map[string]map[string]any) {
			p["max_attempts"]["minimum"] = 2
		}, Change{Key: "max_attempts", Kind: BoundsNarrowed}},
		{"MaximumLowered", func(s map[string]any, p map[string]map[string]any) {
			p["max_attempts"]["maximum"] = 5
		}, Change{Key: "max_attempts", Kind: BoundsNarrowed}},
		{"SizeMaximumLowered", func(s map[string]any, p map[string]map[string]any) {
			p["max_file_size"]["x-maximum"] = "1GiB"
		}, Change{Key: "max_file_size", Kind: BoundsNarrowed}},
		{"MaxLengthLowered", func(s map[string]any, p map[string]map[string]any) {
			p["bucket"]["maxLength"] = 40
		}, Change{Key: "bucket", Kind: BoundsNarrowed}},
		{"NewMinimum", func(s map[string]any, p map[string]map[string]any) {
			p["retry_delay"]["x-minimum"] = "10ms"
		}, Change{Key: "retry_delay", Kind: BoundsNarrowed}},
		{"NewPattern", func(s map[string]any, p map[string]map[string]any) {
			p["bucket"]["pattern"] = "^[a-z]+$"
		}, Change{Key: "bucket", Kind: BoundsNarrowed}},
		{"DefaultChanged", func(s map[string]any, p map[string]map[string]any) {
			p["max_attempts"]["default"] = 5
		}, Change{Key: "max_attempts", Kind: DefaultChanged}},
		{"SizeDefaultChanged", func(s map[string]any, p map[string]map[string]any) {
			p["max_file_size"]["default"] = "16MiB"
		}, Change{Key: "max_file_size", Kind: DefaultChanged}},
		{"NestedDefaultChanged", func(s map[string]any, p map[string]map[string]any) {
			p["tls"]["properties"].(map[string]any)["verify"].(map[string]any)["default"] = false
		}, Change{Key: "tls.verify", Kind: DefaultChanged}},
		{"ElementKeyRemoved", func(s map[string]any, p map[string]map[string]any) {
			delete(p["columns"]["items"].(map[string]any)["properties"].(map[string]any), "scale")
		}, Change{Key: "columns[].scale", Kind: KeyRemoved}},
		{"ElementTypeChanged", func(s map[string]any, p map[string]map[string]any) {
			column(p, "scale")["type"] = "string"
		}, Change{Key: "columns[].scale", Kind: TypeChanged}},
		{"NewRequiredElementKey", func(s map[string]any, p map[string]map[string]any) {
			p["columns"]["items"].(map[string]any)["required"] = []any{"name", "scale"}
		}, Change{Key: "columns[].scale", Kind: RequiredAdded}},
		{"ElementEnumValueRemoved", func(s map[string]any, p map[string]map[string]any) {
			column(p, "type")["enum"] = []any{"string"}
		}, Change{Key: "columns[].type", Kind: EnumValueRemoved}},
		{"ElementDefaultChanged", func(s map[string]any, p map[string]map[string]any) {
			column(p, "type")["default"] = "int64"
		}, Change{Key: "columns[].type", Kind: DefaultChanged}},
		{"ElementBoundNarrowed", func(s map[string]any, p map[string]map[string]any) {
			column(p, "scale")["minimum"] = 1
		}, Change{Key: "columns[].scale", Kind: BoundsNarrowed}},
		{"NewUniqueKey", func(s map[string]any, p map[string]map[string]any) {
			p["columns"]["x-unique"] = "name"
		}, Change{Key: "columns", Kind: BoundsNarrowed}},
		{"ArrayOfTablesBecameStrings", func(s map[string]any, p map[string]map[string]any) {
			p["columns"]["items"] = map[string]any{"type": "string"}
		}, Change{Key: "columns[]", Kind: TypeChanged}},
		{"PlaceholderRemoved", func(s map[string]any, p map[string]map[string]any) {
			p["path"]["x-placeholders"] = []any{"topic"}
		}, Change{Key: "path", Kind: BoundsNarrowed}},
		{"DefaultRemoved", func(s map[string]any, p map[string]map[string]any) {
			delete(p["retry_delay"], "default")
		}, Change{Key: "retry_delay", Kind: DefaultChanged}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := Compare([]byte(base), edit(t, c.edit))
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != 1 || got[0].Key != c.want.Key || got[0].Kind != c.want.Kind {
				t.Fatalf("Compare = %q, want one %q change of %s", got, c.want.Kind, c.want.Key)
			}
			if got[0].Detail == "" {
				t.Errorf("change %v has no detail", got[0])
			}
		})
	}
}

func TestCompatibleChanges(t *testing.T) {
	newSchema := edit(t, func(s map[string]any, p map[string]map[string]any) {
		props := s["properties"].(map[string]any)
		// Rename with an alias for the old name.
		props["backoff"] = props["retry_delay"]
		props["backoff"].(map[string]any)["x-aliases"] = []any{"retry_delay"}
		delete(props, "retry_delay")
		// New optional key, and a new required key with a default.
		props["endpoint"] = map[string]any{"type": "string"}
		props["region"] = map[string]any{"type": "string", "default": "us-east-1"}
		s["required"] = []any{"bucket", "region"}
		// Widened bounds and type, a new enum value and a new alias.
		p["max_attempts"]["maximum"] = 100
		p["max_attempts"]["minimum"] = 0
		p["max_file_size"]["x-maximum"] = "10GiB"
		p["bucket"]["type"] = []any{"string", "null"}
		p["output_format"]["enum"] = []any{"json_lines", "json_array", "raw", "avro"}
		p["output_format"]["x-enum-aliases"] = map[string]any{"jsonl": "json_lines", "jsonlines": "json_lines"}
		// Same default written another way, and an edited description.
		p["max_file_size"]["default"] = "8388608"
		p["bucket"]["description"] = "The bucket to write to."
		// A new optional element key, and an element key with a new default.
		column(p, "name")["description"] = "The column."
		p["columns"]["items"].(map[string]any)["properties"].(map[string]any)["path"] = map[string]any{"type": "string"}
		column(p, "scale")["default"] = 0
		// A new placeholder.
		p["path"]["x-placeholders"] = []any{"topic", "date", "hour"}
		// An enum value removed but kept as an alias.
		p["output_format"]["enum"] = []any{"json_lines", "json_array", "avro"}
		p["output_format"]["x-enum-aliases"] = map[string]any{"jsonl": "json_lines", "raw": "json_lines"}
	})
	got, err := Compare([]byte(base), newSchema)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 {
		t.Fatalf("compatible changes reported as breaking: %q", got)
	}
	if got, _ := Compare([]byte(base), []byte(base)); len(got) != 0 {
		t.Fatalf("identical schemas differ: %q", got)
	}
}

func TestCompareRejectsBadJSON(t *testing.T) {
	if _, err := Compare([]byte(base), []byte(`{"type":`)); err == nil || !strings.Contains(err.Error(), "new schema") {
		t.Fatalf("err = %v, want one naming the new schema", err)
	}
}

func TestMainFiles(t *testing.T) {
	dir := t.TempDir()
	old := filepath.Join(dir, "old.json")
	cur := filepath.Join(dir, "new.json")
	os.WriteFile(old, []byte(base), 0o644)
	os.WriteFile(cur, edit(t, func(s map[string]any, p map[string]map[string]any) { p["max_attempts"]["default"] = 7 }), 0o644)
	var out, errb bytes.Buffer
	if code := Main([]string{old, cur}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stdout %s stderr %s", code, &out, &errb)
	}
	if want := "max_attempts: default changed: 3 became 7"; !strings.Contains(out.String(), want) {
		t.Fatalf("output %q lacks %q", &out, want)
	}
	out.Reset()
	if code := Main([]string{old, old}, &out, &errb); code != 0 {
		t.Fatalf("exit %d for identical files; %s", code, &out)
	}
	if code := Main([]string{old}, &out, &errb); code != 2 {
		t.Fatalf("exit %d with one argument, want 2", code)
	}
	if code := Main([]string{old, filepath.Join(dir, "missing.json")}, &out, &errb); code != 2 {
		t.Fatalf("exit %d with a missing file, want 2", code)
	}
}

func TestMainBase(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "schemas", "a_sink.json"), []byte(base), 0o644)
	git("init", "-q")
	git("add", ".")
	git("commit", "-qm", "v1")
	// Break a_sink, add b_sink (new: passes).
	os.WriteFile(filepath.Join(dir, "schemas", "a_sink.json"), edit(t, func(s map[string]any, p map[string]map[string]any) {
		delete(s["properties"].(map[string]any), "bucket")
	}), 0o644)
	os.WriteFile(filepath.Join(dir, "schemas", "b_sink.json"), []byte(base), 0o644)
	var out, errb bytes.Buffer
	code := Main([]string{"--base", "HEAD", "-C", dir}, &out, &errb)
	if code != 1 || !strings.Contains(out.String(), "schemas/a_sink.json: bucket: key removed") ||
		!strings.Contains(out.String(), "schemas/b_sink.json: new at this revision") {
		t.Fatalf("exit %d, stdout:\n%s\nstderr:\n%s", code, &out, &errb)
	}
	os.Remove(filepath.Join(dir, "schemas", "a_sink.json"))
	out.Reset()
	if code := Main([]string{"--base", "HEAD", "-C", dir}, &out, &errb); code != 1 || !strings.Contains(out.String(), "schemas/a_sink.json: schema removed") {
		t.Fatalf("exit %d for a removed schema:\n%s%s", code, &out, &errb)
	}
	out.Reset()
	if code := Main([]string{"--base", "HEAD", "-C", dir, "schemas/b_sink.json"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d for a new schema only:\n%s", code, &out)
	}
	errb.Reset()
	if code := Main([]string{"--base", "no-such-rev", "-C", dir}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `"no-such-rev" not found`) {
		t.Fatalf("exit %d for a bad revision; stderr %s", code, &errb)
	}
}

// TestEveryKeywordReviewed fails when the model reads a keyword that compat
// has not been told about (see Reviewed).
func TestEveryKeywordReviewed(t *testing.T) {
	for _, k := range model.PropertyKeywords() {
		if Reviewed[k] == "" {
			t.Errorf("keyword %s is read by the model but compat does not say what it does with it: add it to Reviewed (and compare it if a change can break files)", k)
		}
	}
}
