package main

import (
	"bytes"
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
