package gen

import (
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
)

// TestRegenerateReproducesCommittedOutput generates everything into
// temporary folders and compares it, byte for byte and file for file, with
// generated/ and schemas/runtime/ in the repository: deleting generated/
// and running picogen gen must give back exactly what is committed.
func TestRegenerateReproducesCommittedOutput(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out, rt := t.TempDir(), t.TempDir()
	if _, err := Write(Options{Root: root, Out: out, RuntimeSchemas: rt}); err != nil {
		t.Fatal(err)
	}
	compareTrees(t, out, filepath.Join(root, "generated"))
	compareTrees(t, rt, filepath.Join(root, "schemas", "runtime"))

	// A second run writes nothing: output is stable.
	changed, err := Write(Options{Root: root, Out: out, RuntimeSchemas: rt})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed) != 0 {
		t.Errorf("second run changed %v", changed)
	}
}

func compareTrees(t *testing.T, fresh, committed string) {
	t.Helper()
	files := func(dir string) map[string][]byte {
		m := map[string][]byte{}
		_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			rel, _ := filepath.Rel(dir, p)
			b, _ := os.ReadFile(p)
			m[filepath.ToSlash(rel)] = b
			return nil
		})
		return m
	}
	a, b := files(fresh), files(committed)
	for n, want := range a {
		got, ok := b[n]
		if !ok {
			t.Errorf("%s: generated but not in %s; run go run ./cmd/picogen gen", n, committed)
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s/%s differs from a fresh generation; run go run ./cmd/picogen gen\n%s", committed, n, firstDiff(got, want))
		}
	}
	for n := range b {
		if _, ok := a[n]; !ok {
			t.Errorf("%s/%s is not produced by the generator (hand-written or stale)", committed, n)
		}
	}
}
