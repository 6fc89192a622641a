package apicompat

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestRemovedFunctionFails builds a small module in a git repository,
// removes an exported function in the working tree, and checks that
// apicompat fails naming it, then passes once CHANGELOG.md lists it.
func TestRemovedFunctionFails(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@example.com"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(dir, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/kit\n\ngo 1.26.0\n")
	write("sdk/sdk.go", "package sdk\n\n// Open opens.\nfunc Open() error { return nil }\n\n// Close closes.\nfunc Close() error { return nil }\n\n// T is a type.\ntype T struct{ A int }\n\n// M is a method.\nfunc (*T) M() {}\n")
	write("CHANGELOG.md", "# Changelog\n\n## Unreleased\n\n## v0.1.0\n\n- sdk.Close: removed (an older entry: it does not count)\n")
	git("init", "-q")
	git("add", "-A")
	git("commit", "-qm", "v1")

	// Compatible: a function added.
	write("sdk/sdk.go", "package sdk\n\nfunc Open() error { return nil }\n\nfunc Close() error { return nil }\n\nfunc Flush() {}\n\ntype T struct{ A int }\n\nfunc (*T) M() {}\n")
	var out, errOut bytes.Buffer
	if code := Main([]string{"--base", "HEAD", "-C", dir, "sdk"}, &out, &errOut); code != 0 {
		t.Fatalf("an added function failed the check (exit %d):\n%s%s", code, out.String(), errOut.String())
	}

	// Incompatible: Close and T.M removed.
	write("sdk/sdk.go", "package sdk\n\nfunc Open() error { return nil }\n\ntype T struct{ A int }\n")
	out.Reset()
	errOut.Reset()
	code := Main([]string{"--base", "HEAD", "-C", dir, "sdk", "gone"}, &out, &errOut)
	if code != 1 {
		t.Fatalf("removing Close passed the check (exit %d):\n%s%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"sdk: Close: removed (NOT LISTED)", "sdk: (*T).M: removed (NOT LISTED)", "2 incompatible API change(s) since HEAD are not in CHANGELOG.md", "such as sdk.Close"} {
		if !strings.Contains(out.String()+errOut.String(), want) {
			t.Errorf("the check's output lacks %q:\n%s%s", want, out.String(), errOut.String())
		}
	}

	// Listed under the next version, both pass.
	write("CHANGELOG.md", "# Changelog\n\n## Unreleased\n\n- `sdk.Close` is removed: Open's context ends it.\n- sdk.T.M is removed.\n\n## v0.1.0\n")
	out.Reset()
	errOut.Reset()
	if code := Main([]string{"--base", "HEAD", "-C", dir, "sdk"}, &out, &errOut); code != 0 {
		t.Fatalf("listed changes failed the check (exit %d):\n%s%s", code, out.String(), errOut.String())
	}
	if !strings.Contains(out.String(), "sdk: Close: removed (listed in CHANGELOG.md)") {
		t.Errorf("the check's output does not mark Close as listed:\n%s", out.String())
	}
}

func TestChangedName(t *testing.T) {
	for msg, want := range map[string]string{
		"Close: removed":                        "Close",
		"(*T).M: removed":                       "T.M",
		"SinkHarness.Written: changed from int": "SinkHarness.Written",
	} {
		if got := changedName(msg); got != want {
			t.Errorf("changedName(%q) = %q, want %q", msg, got, want)
		}
	}
}
