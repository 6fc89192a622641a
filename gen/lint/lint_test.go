package lint

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const clean = `{
  "$schema": "https://json-schema.org/draft/2020-12/schema",
  "description": "Writes records to a bucket.",
  "x-kind": "sink",
  "x-path": "libpicomq_connector_clean",
  "type": "object",
  "properties": {
    "bucket": {"type": "string", "description": "Bucket name."},
    "api_token": {"type": "string", "description": "Token.", "x-secret": true},
    "partition_key": {"type": "string", "description": "Field to partition by.", "x-secret": false},
    "use_key": {"type": "boolean", "description": "Whether to send the key."},
    "max_file_size": {"type": ["string", "integer"], "x-type": "size", "x-exclusive-minimum": 0, "x-maximum": "5GiB",
      "default": "8MiB", "description": "Rotation size."},
    "retry_delay": {"type": "string", "x-type": "duration", "default": "1s", "description": "Delay."},
    "max_attempts": {"type": "integer", "minimum": 1, "default": 3, "description": "Attempts."},
    "format": {"type": "string", "enum": ["json", "raw", "text"], "default": "json", "description": "Format: json or raw.",
      "x-enum-descriptions": {"text": "Lines of text."}},
    "tls": {"type": "object", "description": "TLS.", "properties": {
      "ca_file": {"type": "string", "description": "CA file."}
    }}
  }
}`

// head makes a fragment a schema the generator reads.
const head = `"x-kind":"sink","x-path":"p","type":"object",`

func TestCleanSchema(t *testing.T) {
	if fs := Schema("clean.json", []byte(clean)); len(fs) != 0 {
		t.Fatalf("findings in a clean schema:\n%v", fs)
	}
}

func TestFindings(t *testing.T) {
	cases := []struct {
		name, schema string
		rule         Rule
		key, want    string
	}{
		{"Password", `{"description":"d",` + head + `"properties":{"password":{"type":"string","description":"d"}}}`,
			SecretNotMarked, "password", `not marked "x-secret": true`},
		{"SecretSuffix", `{"description":"d",` + head + `"properties":{"client_secret":{"type":"string","description":"d"}}}`,
			SecretNotMarked, "client_secret", "looks like a secret"},
		{"TokenSuffix", `{"description":"d",` + head + `"properties":{"auth_token":{"type":"string","description":"d"}}}`,
			SecretNotMarked, "auth_token", "looks like a secret"},
		{"KeySuffix", `{"description":"d",` + head + `"properties":{"access_key":{"type":"string","description":"d"}}}`,
			SecretNotMarked, "access_key", "looks like a secret"},
		{"ConnectionString", `{"description":"d",` + head + `"properties":{"connection_string":{"type":"string","description":"d"}}}`,
			SecretNotMarked, "connection_string", "looks like a secret"},
		{"NestedSecret", `{"description":"d",` + head + `"properties":{"auth":{"type":"object","description":"d","properties":{"password":{"type":"string","description":"d"}}}}}`,
			SecretNotMarked, "auth.password", "looks like a secret"},
		{"NoSchemaDescription", `{` + head + `"properties":{}}`, MissingDescription, "", "schema has no description"},
		{"NoKeyDescription", `{"description":"d",` + head + `"properties":{"bucket":{"type":"string"}}}`,
			MissingDescription, "bucket", "no description"},
		{"DefaultBelowMinimum", `{"description":"d",` + head + `"properties":{"n":{"type":"integer","minimum":1,"default":0,"description":"d"}}}`,
			BadDefault, "n", "default 0 fails the key's rules"},
		{"DefaultWrongType", `{"description":"d",` + head + `"properties":{"n":{"type":"integer","default":"3","description":"d"}}}`,
			BadDefault, "n", `default "3" does not fit`},
		{"DefaultNotInEnum", `{"description":"d",` + head + `"properties":{"f":{"type":"string","enum":["a"],"x-enum-descriptions":{"a":"A."},"default":"b","description":"d"}}}`,
			BadDefault, "f", `default "b" does not fit`},
		{"DefaultBadSize", `{"description":"d",` + head + `"properties":{"s":{"type":"string","x-type":"size","default":"8 parsecs","description":"d"}}}`,
			BadDefault, "s", `default "8 parsecs"`},
		{"DefaultAboveSizeMaximum", `{"description":"d",` + head + `"properties":{"s":{"type":"string","x-type":"size","x-maximum":"5GiB","default":"6GiB","description":"d"}}}`,
			BadDefault, "s", "is above x-maximum"},
		{"DefaultBadDuration", `{"description":"d",` + head + `"properties":{"d":{"type":"string","x-type":"duration","default":"soon","description":"d"}}}`,
			BadDefault, "d", `default "soon"`},
		{"DefaultZeroDurationExclusive", `{"description":"d",` + head + `"properties":{"d":{"type":"string","x-type":"duration","x-exclusive-minimum":"0s","default":"0s","description":"d"}}}`,
			BadDefault, "d", "not above x-exclusive-minimum"},
		{"DefaultTemplateUnknownPlaceholder", `{"description":"d",` + head + `"properties":{"p":{"type":"string","x-type":"template","x-placeholders":["topic"],"default":"{topic}/{day}","description":"d"}}}`,
			BadDefault, "p", "does not fit"},
		{"EnumWithoutDescriptions", `{"description":"d",` + head + `"properties":{"f":{"type":"string","enum":["a","b"],"description":"a or ab"}}}`,
			EnumUndescribed, "f", "enum value(s) b are not described"},
		{"ListEnumUndescribed", `{"description":"d",` + head + `"properties":{"ops":{"type":"array","description":"Changes: insert.","items":{"type":"string","enum":["insert","delete"]}}}}`,
			EnumUndescribed, "ops", "enum value(s) delete are not described"},
		{"NotJSON", `{"description":`, Invalid, "", "not valid JSON"},
		{"GeneratorError", `{"description":"d",` + head + `"properties":{"c":{"type":"string","x-type":"color","description":"d"}}}`,
			Invalid, "c", `unknown x-type "color"`},
		{"UnknownKeyword", `{"description":"d",` + head + `"properties":{"n":{"type":"integer","x-alias":["m"],"description":"d"}}}`,
			UnknownKeyword, "n", `x-alias is not a keyword of the dialect, so the generator ignores it (did you mean "x-aliases"?)`},
		{"UnknownTopKeyword", `{"description":"d",` + head + `"x-knd":"source","properties":{}}`,
			UnknownKeyword, "", `did you mean "x-kind"?`},
		{"UnknownItemsKeyword", `{"description":"d",` + head + `"properties":{"l":{"type":"array","items":{"type":"string","x-secrets":true},"description":"d"}}}`,
			UnknownKeyword, "l", `x-secrets is not a keyword`},
		{"ElementKeyNoDescription", `{"description":"d",` + head + `"properties":{"cols":{"type":"array","description":"d","items":{"type":"object","properties":{"name":{"type":"string"}}}}}}`,
			MissingDescription, "cols[].name", "no description"},
		{"ElementSecret", `{"description":"d",` + head + `"properties":{"cols":{"type":"array","description":"d","items":{"type":"object","properties":{"api_token":{"type":"string","description":"d"}}}}}}`,
			SecretNotMarked, "cols[].api_token", "looks like a secret"},
		{"ElementBadDefault", `{"description":"d",` + head + `"properties":{"cols":{"type":"array","description":"d","items":{"type":"object","properties":{"n":{"type":"integer","maximum":3,"default":4,"description":"d"}}}}}}`,
			BadDefault, "cols[].n", "default 4 fails the key's rules"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := Schema("x.json", []byte(c.schema))
			if len(fs) != 1 {
				t.Fatalf("got %d findings, want one %s:\n%v", len(fs), c.rule, fs)
			}
			f := fs[0]
			if f.Rule != c.rule || f.Key != c.key || !strings.Contains(f.Message, c.want) || f.File != "x.json" {
				t.Fatalf("finding %q, want rule %s on key %q saying %q", f, c.rule, c.key, c.want)
			}
		})
	}
}

func TestLooksSecret(t *testing.T) {
	for name, want := range map[string]bool{
		"password": true, "db_password": true, "secret_access_key": true, "api_key": true, "key": true,
		"token": true, "connection_string": true, "keys": false, "key_field": false, "monkey": false,
		"tokenizer": false, "bucket": false,
	} {
		if got := LooksSecret(name); got != want {
			t.Errorf("LooksSecret(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestMainCommand(t *testing.T) {
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "schemas", "a_sink.json"), []byte(clean), 0o644)
	var out, errb bytes.Buffer
	if code := Main([]string{"-C", dir}, &out, &errb); code != 0 {
		t.Fatalf("exit %d on a clean repo:\n%s%s", code, &out, &errb)
	}
	os.WriteFile(filepath.Join(dir, "schemas", "b_sink.json"), []byte(`{"properties":{"password":{"type":"string"}}}`), 0o644)
	out.Reset()
	if code := Main([]string{"-C", dir}, &out, &errb); code != 1 || !strings.Contains(out.String(), "b_sink.json: password: ") {
		t.Fatalf("exit %d:\n%s", code, &out)
	}
	if code := Main([]string{filepath.Join(dir, "nope.json")}, &out, &errb); code != 2 {
		t.Fatalf("exit %d for a missing file, want 2", code)
	}
}
