package cmdline

import (
	"bytes"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		args       []string
		code       int
		stop       bool
		root, help string
	}{
		{args: []string{"-C", "x"}, root: "x"},
		{args: []string{"-root", "y"}, root: "y"},
		{args: []string{"-h"}, stop: true, root: ".", help: "usage: test\n"},
		{args: []string{"-nope"}, code: 2, stop: true, root: ".", help: "usage: test\n"},
	} {
		var stderr bytes.Buffer
		fs := Flags("test", "usage: test\n", &stderr)
		root := Root(fs, ".", "root")
		code, stop := Parse(fs, c.args)
		if code != c.code || stop != c.stop || *root != c.root {
			t.Errorf("%v: got code %d stop %v root %q, want %d %v %q", c.args, code, stop, *root, c.code, c.stop, c.root)
		}
		if c.help != "" && !bytes.HasSuffix(stderr.Bytes(), []byte(c.help)) {
			t.Errorf("%v: stderr %q does not end with the usage", c.args, stderr.String())
		}
	}
}
