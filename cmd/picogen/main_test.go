package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestDispatch(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"help"}, &out, &errb); code != 0 || !strings.Contains(out.String(), "gen ") {
		t.Fatalf("help: %d %q", code, out.String())
	}
	out.Reset()
	if code := run([]string{"nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown command "nope"`) {
		t.Fatalf("unknown: %d %q", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"gen", "-root", t.TempDir()}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "reading schemas") {
		t.Fatalf("gen in an empty folder: %d %q", code, errb.String())
	}
}

func TestGenRefusesLintFindings(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "schemas"), 0o755); err != nil {
		t.Fatal(err)
	}
	schema := `{"$schema":"https://json-schema.org/draft/2020-12/schema","title":"x_sink","description":"A sink.",
"x-kind":"sink","x-path":"libpicomq_connector_x_sink","type":"object","additionalProperties":false,
"properties":{"api_token":{"type":"string","description":"The token."}}}`
	if err := os.WriteFile(filepath.Join(root, "schemas", "x_sink.json"), []byte(schema), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"gen", "-root", root}, &out, &errb)
	if code != 1 || !strings.Contains(errb.String(), "api_token") || !strings.Contains(errb.String(), "secret-not-marked") {
		t.Fatalf("gen with an unmarked secret: exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(root, "generated")); !os.IsNotExist(err) {
		t.Fatalf("gen wrote output despite lint findings (stat: %v)", err)
	}
}
