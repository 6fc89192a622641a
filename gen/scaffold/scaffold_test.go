package scaffold

import (
	"bytes"
	"errors"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/gen/lint"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

const module = "github.com/picomq/pico-connectors"

// ownModule is the module of TestGolden's connectors written outside
// pico-connectors.
const ownModule = "example.com/acme-connectors"

// TestGolden compares every template's output for a sink and a source named
// "example" with testdata/golden: in pico-connectors itself (golden/sink,
// golden/source) and in a module of its own, with the files the first
// connector brings there (golden/own-module). Run with -update after
// changing a template, and review the diff.
func TestGolden(t *testing.T) {
	for _, c := range []struct{ module, dir string }{{module, ""}, {ownModule, "own-module"}} {
		for _, kind := range []string{"sink", "source"} {
			testGolden(t, c.module, kind, filepath.Join("testdata", "golden", c.dir, kind))
		}
	}
}

func testGolden(t *testing.T, module, kind, dir string) {
	t.Helper()
	d := DataFor(kind, "example", module, "")
	files, err := Render(d)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 4 {
		t.Fatalf("%s renders %d files, want 4", kind, len(files))
	}
	moduleFiles, err := RenderModule(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[bool]int{true: 0, false: 5}[d.InSDK()]; len(moduleFiles) != want {
		t.Fatalf("%s in %s brings %d module files, want %d", kind, module, len(moduleFiles), want)
	}
	files = append(files, moduleFiles...)
	{
		for _, f := range files {
			golden := filepath.Join(dir, filepath.FromSlash(f.Path)+".golden")
			if *update {
				os.MkdirAll(filepath.Dir(golden), 0o755)
				if err := os.WriteFile(golden, f.Content, 0o644); err != nil {
					t.Fatal(err)
				}
				continue
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./gen/scaffold -update)", err)
			}
			if !bytes.Equal(f.Content, want) {
				t.Errorf("%s differs from %s; run go test ./gen/scaffold -update and review the diff", f.Path, golden)
			}
		}
	}
}

// TestStarterSchemasLintClean: the starter schemas pass picogen lint.
func TestStarterSchemasLintClean(t *testing.T) {
	for _, kind := range []string{"sink", "source"} {
		files, err := Render(DataFor(kind, "example", module, ""))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if strings.HasSuffix(f.Path, ".json") {
				if found := lint.Schema(f.Path, f.Content); len(found) > 0 {
					t.Errorf("%s:\n%v", f.Path, found)
				}
			}
		}
	}
}

func TestCheckName(t *testing.T) {
	good := []string{"webhook", "http2", "my_db", "a"}
	for _, n := range good {
		if err := CheckName("sink", n); err != nil {
			t.Errorf("CheckName(%q) = %v", n, err)
		}
	}
	bad := map[string]string{
		"":                      "missing name",
		"Webhook":               `bad name "Webhook": use lower-case letters, digits and _, starting with a letter (such as "webhook")`,
		"web-hook":              `(such as "web_hook")`,
		"2fast":                 "starting with a letter",
		"a b":                   `(such as "a_b")`,
		"a__b":                  "no doubled or trailing _",
		"a_":                    "no doubled or trailing _",
		"webhook_sink":          `picogen adds _sink itself; use "webhook"`,
		"sink":                  "picogen adds _sink itself",
		"x_source":              `use "x"`,
		"../etc":                "bad name",
		strings.Repeat("a", 41): "at most 40 characters",
	}
	for n, want := range bad {
		err := CheckName("sink", n)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("CheckName(%q) = %v, want an error containing %q", n, err, want)
		}
	}
	if err := CheckName("transform", "x"); err == nil || !strings.Contains(err.Error(), "use sink or source") {
		t.Errorf("CheckName(transform) = %v", err)
	}
}

// repo makes a minimal repository root with go.mod and one schema.
func repo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "go.mod"), []byte("module "+module+"\n\ngo 1.26\n"), 0o644)
	os.MkdirAll(filepath.Join(dir, "schemas"), 0o755)
	os.WriteFile(filepath.Join(dir, "schemas", "s3_sink.json"), []byte(`{"x-path": "libpicomq_connector_s3_sink"}`), 0o644)
	return dir
}

func TestNewWritesFiles(t *testing.T) {
	dir := repo(t)
	var out, errb bytes.Buffer
	if code := Main([]string{"-C", dir, "sink", "webhook"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, &errb)
	}
	for _, p := range []string{"schemas/webhook_sink.json", "connectors/webhook_sink/sink.go", "connectors/webhook_sink/sink_test.go", "examples/webhook_sink.toml"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err != nil {
			t.Errorf("%s not written: %v", p, err)
		}
		if !strings.Contains(out.String(), "  "+p+"\n") {
			t.Errorf("output does not list %s:\n%s", p, &out)
		}
	}
	if !strings.Contains(out.String(), "Next steps:\n  1. go generate ./...") || strings.Count(out.String(), "\n  ") < 7 {
		t.Errorf("output lacks the three next steps:\n%s", &out)
	}
}

func TestDryRunWritesNothing(t *testing.T) {
	dir := repo(t)
	var out, errb bytes.Buffer
	if code := Main([]string{"--dry-run", "-C", dir, "source", "ticker"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, &errb)
	}
	if !strings.Contains(out.String(), "would write ticker_source:\n  connectors/ticker_source/source.go") {
		t.Errorf("dry run output:\n%s", &out)
	}
	for _, p := range []string{"connectors", "examples", "schemas/ticker_source.json"} {
		if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
			t.Errorf("dry run wrote %s", p)
		}
	}
}

func TestRefusals(t *testing.T) {
	t.Run("BadName", func(t *testing.T) {
		dir := repo(t)
		var out, errb bytes.Buffer
		if code := Main([]string{"-C", dir, "sink", "Web-Hook"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `bad name "Web-Hook"`) {
			t.Fatalf("exit %d, stderr %q", code, &errb)
		}
	})
	t.Run("BadKind", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := Main([]string{"-C", repo(t), "sinc", "x"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown connector kind "sinc"`) {
			t.Fatalf("exit %d, stderr %q", code, &errb)
		}
	})
	t.Run("ExistingConnector", func(t *testing.T) {
		dir := repo(t)
		if _, _, err := New(Options{Root: dir, Kind: "sink", Name: "webhook"}); err != nil {
			t.Fatal(err)
		}
		sinkGo := filepath.Join(dir, "connectors", "webhook_sink", "sink.go")
		os.WriteFile(sinkGo, []byte("package webhooksink // edited\n"), 0o644)
		var out, errb bytes.Buffer
		code := Main([]string{"-C", dir, "sink", "webhook"}, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "connector webhook_sink already exists (connectors/webhook_sink, examples/webhook_sink.toml, schemas/webhook_sink.json); picogen new never overwrites") {
			t.Fatalf("exit %d, stderr %q", code, &errb)
		}
		if b, _ := os.ReadFile(sinkGo); string(b) != "package webhooksink // edited\n" {
			t.Fatal("the existing connector was overwritten")
		}
	})
	t.Run("ExistingSchemaOnly", func(t *testing.T) {
		dir := repo(t)
		os.WriteFile(filepath.Join(dir, "schemas", "webhook_sink.json"), []byte("{}"), 0o644)
		_, _, err := New(Options{Root: dir, Kind: "sink", Name: "webhook"})
		if err == nil || !strings.Contains(err.Error(), "(schemas/webhook_sink.json)") {
			t.Fatalf("err = %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "connectors")); err == nil {
			t.Fatal("wrote the connector although the schema was in the way")
		}
	})
	t.Run("PathUsedByAnotherSchema", func(t *testing.T) {
		dir := repo(t)
		os.WriteFile(filepath.Join(dir, "schemas", "other.json"), []byte(`{"x-path": "libpicomq_connector_webhook_sink"}`), 0o644)
		_, _, err := New(Options{Root: dir, Kind: "sink", Name: "webhook"})
		if err == nil || !strings.Contains(err.Error(), "plugin path libpicomq_connector_webhook_sink is already used by") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("FolderIsAFile", func(t *testing.T) {
		dir := repo(t)
		os.WriteFile(filepath.Join(dir, "examples"), []byte("not a folder"), 0o644)
		var out, errb bytes.Buffer
		code := Main([]string{"-C", dir, "sink", "webhook"}, &out, &errb)
		if code != 1 || !strings.Contains(errb.String(), "cannot write examples/webhook_sink.toml: ") || !strings.Contains(errb.String(), "is a file, not a folder") {
			t.Fatalf("exit %d, stderr %q", code, &errb)
		}
		if _, err := os.Stat(filepath.Join(dir, "schemas", "webhook_sink.json")); err == nil {
			t.Fatal("wrote some files although one target was not writable")
		}
	})
	t.Run("UnwritableFolder", func(t *testing.T) {
		dir := repo(t)
		os.Chmod(filepath.Join(dir, "schemas"), 0o555)
		t.Cleanup(func() { os.Chmod(filepath.Join(dir, "schemas"), 0o755) })
		var out, errb bytes.Buffer
		code := 0
		if os.Geteuid() != 0 {
			code = Main([]string{"-C", dir, "sink", "webhook"}, &out, &errb)
		} else {
			// Root writes anywhere: run picogen as nobody instead.
			code = runAsNobody(t, dir, &out, &errb, "new", "-C", dir, "sink", "webhook")
		}
		if code != 1 || !strings.Contains(errb.String(), "cannot write ") || !strings.Contains(errb.String(), "is not writable (permission denied)") {
			t.Fatalf("exit %d, stderr %q", code, &errb)
		}
		if _, err := os.Stat(filepath.Join(dir, "examples")); err == nil {
			t.Fatal("wrote some files although a target folder was not writable")
		}
	})
	t.Run("NoGoMod", func(t *testing.T) {
		_, _, err := New(Options{Root: t.TempDir(), Kind: "sink", Name: "webhook"})
		if err == nil || !strings.Contains(err.Error(), "no go.mod in") {
			t.Fatalf("err = %v", err)
		}
		t.Chdir(t.TempDir())
		_, _, err = New(Options{Kind: "sink", Name: "webhook"})
		if err == nil || !strings.Contains(err.Error(), "or any folder above it") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("FindsRootFromSubfolder", func(t *testing.T) {
		dir := repo(t)
		os.MkdirAll(filepath.Join(dir, "a", "b"), 0o755)
		t.Chdir(filepath.Join(dir, "a", "b"))
		if _, _, err := New(Options{Kind: "sink", Name: "webhook", DryRun: true}); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("Usage", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := Main([]string{"sink"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), "usage: picogen new") {
			t.Fatalf("exit %d, stderr %q", code, &errb)
		}
	})
}

// runAsNobody builds picogen and runs it as the user nobody, for a refusal
// that root would not meet. It skips when that is not possible.
func runAsNobody(t *testing.T, repoDir string, stdout, stderr *bytes.Buffer, args ...string) int {
	t.Helper()
	if testing.Short() {
		t.Skip("builds picogen to run it as nobody; skipped with -short")
	}
	runuser, err := exec.LookPath("runuser")
	if err != nil {
		t.Skip("running as root without runuser: cannot check an unwritable folder")
	}
	bin, err := os.MkdirTemp("", "picogen-nobody-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(bin) })
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "picogen"), "github.com/picomq/pico-connectors/cmd/picogen")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build picogen: %v\n%s", err, out)
	}
	// nobody must reach the repository: open up the folders above it.
	for d := repoDir; strings.HasPrefix(d, os.TempDir()+string(filepath.Separator)); d = filepath.Dir(d) {
		if st, err := os.Stat(d); err == nil && st.Mode().Perm()&0o005 != 0o005 {
			os.Chmod(d, st.Mode().Perm()|0o005)
		}
	}
	os.Chmod(bin, 0o755)
	cmd := exec.Command(runuser, append([]string{"-u", "nobody", "--", filepath.Join(bin, "picogen")}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	err = cmd.Run()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.ExitCode()
	}
	t.Skipf("cannot run as nobody: %v", err)
	return 0
}
