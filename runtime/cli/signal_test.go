package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// TestSignals runs the binary: the first SIGTERM starts a graceful stop;
// with the broker gone the source cannot finish its batch, so a second
// SIGTERM must end the process at once, with exit code 1. Logs are JSON.
func TestSignals(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary; skipped with -short")
	}
	bin := runtimebin.Build(t)
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(fmt.Sprintf(
		"shutdown_grace = \"5m\"\n[broker]\nbootstrap_servers = %q\n[http]\naddress = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[log]\nformat = \"json\"\n", b.Addr())), 0o644)
	os.WriteFile(filepath.Join(dir, "connectors", "n.toml"), []byte(
		"type = \"source\"\nkey = \"n\"\npath = \"libpicomq_connector_random_source\"\n[[topics]]\ntopic = \"sig\"\ncreate_topics = true\n[plugin_config]\nrecords_per_batch = 10\ninterval = \"1ms\"\n"), 0o644)

	cmd := exec.Command(bin, "run", "--config", filepath.Join(dir, "runtime.toml"))
	out := &runtimebin.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	deadline := time.Now().Add(60 * time.Second)
	for b.HighWatermark("sig") < 100 {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("no records; output:\n%s", out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	b.Close() // the broker goes away: the batch in flight cannot be delivered
	time.Sleep(100 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGTERM)
	waitLog := func(text string) {
		deadline := time.Now().Add(30 * time.Second)
		for !strings.Contains(out.String(), text) {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no %q in output:\n%s", text, out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitLog("stopping gracefully")
	select {
	case err := <-done:
		t.Fatalf("exited before the second signal (%v): the stop should wait for the batch in flight\n%s", err, out.String())
	case <-time.After(300 * time.Millisecond):
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-done:
		ee, ok := err.(*exec.ExitError)
		if !ok || ee.ExitCode() != 1 {
			t.Fatalf("second signal: exit %v, want code 1", err)
		}
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("second signal did not end the process; output:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "second signal") {
		t.Fatalf("no second-signal log line:\n%s", out.String())
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasPrefix(line, "%") || line == "" {
			continue // librdkafka's own stderr lines
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Errorf("log line is not JSON: %s", line)
		}
	}
}
