package broker

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// kfakeUpstream is the upstream kfake that third_party/kfake copies.
const kfakeUpstream = "github.com/twmb/franz-go/pkg/kfake@v0.0.0-20260918054303-01f206a7e32c"

// TestKfakeUpstreamSeries checks the patch series offered upstream
// (third_party/kfake/upstream, one change a patch, each building on its
// own): applied in order to the upstream sources, it gives exactly the
// vendored copy. A change to the copy without its patch fails here.
func TestKfakeUpstreamSeries(t *testing.T) {
	if testing.Short() {
		t.Skip("downloads the upstream module")
	}
	out, err := exec.Command("go", "mod", "download", "-json", kfakeUpstream).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v (the Go module proxy must be reachable)", kfakeUpstream, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download %s: no Dir in %s", kfakeUpstream, out)
	}
	copyDir := filepath.Join("..", "..", "third_party", "kfake")
	work := t.TempDir()
	tree := filepath.Join(work, "pkg", "kfake")
	if err := os.MkdirAll(tree, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range goSources(t, mod.Dir) {
		b, err := os.ReadFile(filepath.Join(mod.Dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(tree, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	patches, err := filepath.Glob(filepath.Join(copyDir, "upstream", "*.patch"))
	if err != nil || len(patches) == 0 {
		t.Fatalf("no patches in third_party/kfake/upstream (%v)", err)
	}
	sort.Strings(patches)
	for _, p := range patches {
		abs, _ := filepath.Abs(p)
		cmd := exec.Command("git", "apply", abs)
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git apply %s: %v\n%s", filepath.Base(p), err, out)
		}
	}
	ours, theirs := goSources(t, copyDir), goSources(t, tree)
	if strings.Join(ours, " ") != strings.Join(theirs, " ") {
		t.Fatalf("the copy's files differ from upstream's:\ncopy:     %v\nupstream: %v", ours, theirs)
	}
	for _, name := range ours {
		a, _ := os.ReadFile(filepath.Join(copyDir, name))
		b, _ := os.ReadFile(filepath.Join(tree, name))
		if !bytes.Equal(a, b) {
			t.Errorf("%s: the copy differs from upstream + patches; add the change to third_party/kfake/upstream as a patch (see its README)", name)
		}
	}
}

// goSources lists dir's non-test Go files of package kfake.
func goSources(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") || n == "main.go" {
			continue
		}
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
