package scaffold

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScaffoldInRepoCopy does what a connector author does, in a temporary
// copy of this repository (its git-tracked files): picogen new sink and
// picogen new source, then go generate, go build, go test of the new
// connectors and pico-connectors validate on their examples, with no edit
// in between. It takes about a minute (the copy builds from scratch); -short
// skips it.
func TestScaffoldInRepoCopy(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a copy of the repository; skipped with -short")
	}
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	repo := filepath.Join(t.TempDir(), "repo")
	copyTracked(t, root, repo)

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
		t.Logf("%s %s: %v", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		return out.String()
	}
	picogen := filepath.Join(t.TempDir(), "picogen")
	run(repo, "go", "build", "-o", picogen, "./cmd/picogen")
	out := run(repo, picogen, "new", "sink", "smoke")
	if !strings.Contains(out, "Next steps:") {
		t.Fatalf("picogen new sink printed no next steps:\n%s", out)
	}
	run(repo, picogen, "new", "source", "smoke")
	run(repo, "go", "generate", "./...")
	for _, p := range []string{"generated/smokesinkconfig", "generated/smokesourceconfig", "generated/docs/smoke_sink.md"} {
		if _, err := os.Stat(filepath.Join(repo, p)); err != nil {
			t.Fatalf("go generate did not write %s", p)
		}
	}
	registry, _ := os.ReadFile(filepath.Join(repo, "generated", "registry", "registry.go"))
	for _, c := range []string{"connectors/smoke_sink", "connectors/smoke_source"} {
		if !bytes.Contains(registry, []byte(c+`"`)) {
			t.Fatalf("the generated registry does not link %s:\n%s", c, registry)
		}
	}
	run(repo, "go", "build", "./...")
	run(repo, "go", "test", "-count=1", "./connectors/smoke_sink/...", "./connectors/smoke_source/...")
	run(repo, picogen, "lint", "schemas/smoke_sink.json", "schemas/smoke_source.json")

	// pico-connectors validate, on a runtime config whose connectors_dir
	// holds just the two examples.
	dir := filepath.Join(t.TempDir(), "validate")
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	for _, ex := range []string{"smoke_sink.toml", "smoke_source.toml"} {
		b, err := os.ReadFile(filepath.Join(repo, "examples", ex))
		if err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "connectors", ex), b, 0o644)
	}
	runtime := filepath.Join(dir, "runtime.toml")
	os.WriteFile(runtime, []byte("connectors_dir = \"connectors\"\n"), 0o644)
	out = run(repo, "go", "run", "./cmd/pico-connectors", "validate", "--config", runtime)
	for _, want := range []string{"sink smoke (libpicomq_connector_smoke_sink)", "source smoke (libpicomq_connector_smoke_source)"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
}

// copyTracked copies the git-tracked files of the repository at src
// (their working-tree content) to dst.
func copyTracked(t *testing.T, src, dst string) {
	t.Helper()
	cmd := exec.Command("git", "-C", src, "ls-files", "-z")
	out, err := cmd.Output()
	if err != nil {
		t.Skipf("not a git checkout (%v): the copy needs git ls-files", err)
	}
	n := 0
	for _, rel := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if rel == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, rel))
		if err != nil {
			continue // deleted in the working tree
		}
		p := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if st, err := os.Stat(filepath.Join(src, rel)); err == nil && st.Mode()&0o111 != 0 {
			mode = 0o755
		}
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		n++
	}
	t.Logf("copied %d tracked files", n)
}
