package runtimebin

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	Remove()
	os.Exit(code)
}

func TestBuildOnceAndRun(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the runtime binary")
	}
	first, second := Build(t), Build(t)
	if first != second {
		t.Fatalf("Build built twice: %s, %s", first, second)
	}
	var out Output
	cmd := exec.Command(first, "validate", "--config", "does-not-exist.toml")
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err == nil {
		t.Fatal("validate of a missing file exited 0")
	}
	if !strings.Contains(out.String(), "does-not-exist.toml") {
		t.Fatalf("the error does not name the file:\n%s", out.String())
	}
}
