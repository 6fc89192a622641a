package sourceloop

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/state"
)

// The child process of TestPipelinedSourceSIGKILL reads these.
const (
	killChildEnv  = "SOURCELOOP_KILL_CHILD_BROKER"
	killChildDir  = "SOURCELOOP_KILL_CHILD_STATE"
	killTopic     = "killed"
	killBatch     = 50
	killLimit     = 6000
	killPollAhead = 4
)

// TestPipelinedSourceSIGKILL runs the loop with a Pipelined source (up to
// four batches polled ahead) and the file store in a child process, kills
// it with SIGKILL five times at different moments and lets a last run
// finish: after each kill the topic holds at most one batch past the
// checkpoint the kill left (the batch in flight), every sequence number is
// on the topic, and the only duplicates are those batches.
func TestPipelinedSourceSIGKILL(t *testing.T) {
	if addr := os.Getenv(killChildEnv); addr != "" {
		os.Exit(killChild(addr, os.Getenv(killChildDir)))
	}
	if testing.Short() {
		t.Skip("runs the loop in child processes; skipped with -short")
	}
	b := startBroker(t, broker.Config{AutoCreateTopics: true})
	dir := t.TempDir()
	store, err := state.NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	start := func() (*exec.Cmd, *runtimebin.Output) {
		cmd := exec.Command(os.Args[0], "-test.run=^TestPipelinedSourceSIGKILL$")
		cmd.Env = append(os.Environ(), killChildEnv+"="+b.Addr(), killChildDir+"="+dir)
		out := &runtimebin.Output{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	checkpoint := func() int {
		blob, err := store.Load(context.Background(), "seq")
		if err != nil {
			t.Fatal(err)
		}
		n, _ := strconv.Atoi(string(blob))
		return n
	}
	var checkpoints []int
	for i, delay := range []time.Duration{0, time.Millisecond, 3 * time.Millisecond, 7 * time.Millisecond, 13 * time.Millisecond} {
		cmd, out := start()
		target := b.HighWatermark(killTopic) + 500
		deadline := time.Now().Add(time.Minute)
		for b.HighWatermark(killTopic) < target {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("run %d: the topic did not reach %d records; output:\n%s", i+1, target, out.String())
			}
			time.Sleep(time.Millisecond)
		}
		time.Sleep(delay)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		cp := checkpoint()
		highest := -1
		for _, n := range seqs(t, readTopic(t, b, killTopic)) {
			highest = max(highest, n)
		}
		t.Logf("kill %d: checkpoint %d, highest sequence on the topic %d", i+1, cp, highest)
		if highest >= cp+killBatch {
			t.Fatalf("kill %d: sequence %d is on the topic, more than one batch (%d) past the checkpoint %d", i+1, highest, killBatch, cp)
		}
		checkpoints = append(checkpoints, cp)
	}
	cmd, out := start()
	if err := cmd.Wait(); err != nil {
		t.Fatalf("last run: %v\n%s", err, out.String())
	}
	counts := map[int]int{}
	for _, n := range seqs(t, readTopic(t, b, killTopic)) {
		counts[n]++
	}
	for n := 0; n < killLimit; n++ {
		switch c := counts[n]; {
		case c == 0:
			t.Fatalf("sequence %d is not on the topic", n)
		case c > 1:
			inWindow := false
			for _, cp := range checkpoints {
				inWindow = inWindow || n >= cp && n < cp+killBatch
			}
			if c > 2 || !inWindow {
				t.Fatalf("sequence %d is on the topic %d times; checkpoints after the kills: %v", n, c, checkpoints)
			}
		}
	}
}

// killChild runs the loop until the source's state reaches killLimit, then
// stops; it returns the exit code.
func killChild(addr, dir string) int {
	store, err := state.NewFileStore(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	blob, err := store.Load(ctx, "seq")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	src := &pipeSource{batch: killBatch, limit: killLimit, depth: killPollAhead}
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Config{Key: "seq", Topics: []definition.Topics{literal(killTopic)}, Source: src, State: blob, Store: store,
			BootstrapServers: addr, Logger: testLogger(nil)})
	}()
	for {
		select {
		case err := <-done:
			fmt.Fprintln(os.Stderr, "source loop stopped:", err)
			return 1
		case <-time.After(5 * time.Millisecond):
		}
		if blob, _ := store.Load(ctx, "seq"); string(blob) == strconv.Itoa(killLimit) {
			cancel()
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			return 0
		}
	}
}
