package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/sdk"
)

type randomState struct {
	NextSeq int64 `json:"next_seq"`
}

func readState(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	var s randomState
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("state %q: %v", b, err)
	}
	return s.NextSeq
}

// TestSIGKILLResumesFromCheckpoint runs the random source in a real
// pico-connectors process against a broker that outlives it, kills the
// process with SIGKILL mid-stream, restarts it, stops it gracefully, and
// reads the topic back with franz-go: no sequence number is missing, and
// the only duplicates are one batch at most, starting exactly at the
// checkpoint the restart loaded.
func TestMain(m *testing.M) {
	code := m.Run()
	runtimebin.Remove()
	os.Exit(code)
}

func TestSIGKILLResumesFromCheckpoint(t *testing.T) {
	if _, ok := sdk.Lookup("libpicomq_connector_random_source"); !ok {
		t.Fatal("the random source is not linked into pico-connectors (generated/registry import missing)")
	}
	if testing.Short() {
		t.Skip("builds the binary and runs two processes; skipped with -short")
	}
	bin := runtimebin.Build(t)
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	const topic = "kill.numbers"
	const perBatch = 50
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	runtime := fmt.Sprintf("shutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\n[http]\naddress = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[log]\nformat = \"json\"\n", b.Addr())
	def := fmt.Sprintf("type = \"source\"\nkey = \"numbers\"\npath = \"libpicomq_connector_random_source\"\n[[topics]]\ntopic = %q\ncreate_topics = true\n[plugin_config]\nrecords_per_batch = %d\ninterval = \"2ms\"\npayload_size = \"32B\"\n", topic, perBatch)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtime), 0o644)
	os.WriteFile(filepath.Join(dir, "connectors", "numbers.toml"), []byte(def), 0o644)
	statePath := filepath.Join(dir, "state", "numbers.state")

	start := func() (*exec.Cmd, *runtimebin.Output) {
		cmd := exec.Command(bin, "run", "--config", filepath.Join(dir, "runtime.toml"))
		out := &runtimebin.Output{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	waitHW := func(min int64, cmd *exec.Cmd, out *runtimebin.Output) {
		deadline := time.Now().Add(60 * time.Second)
		for b.HighWatermark(topic) < min {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("topic did not reach %d records (at %d); output:\n%s", min, b.HighWatermark(topic), out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}

	// Kill at three different moments: right as a batch lands (produced,
	// state not yet saved), and a few milliseconds later.
	var checkpoints []int64
	var killedAt int64
	for i, delay := range []time.Duration{0, 7 * time.Millisecond, 23 * time.Millisecond} {
		cmd, out := start()
		waitHW(killedAt+2000, cmd, out)
		time.Sleep(delay)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		killedAt = b.HighWatermark(topic)
		checkpoint := readState(t, statePath)
		t.Logf("kill %d: %d records on the topic, checkpoint next_seq=%d", i+1, killedAt, checkpoint)
		if checkpoint == 0 || checkpoint > killedAt {
			t.Fatalf("checkpoint %d with %d records on the topic", checkpoint, killedAt)
		}
		checkpoints = append(checkpoints, checkpoint)
	}

	cmd, out := start()
	waitHW(killedAt+3000, cmd, out)
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, out.String())
	}
	final := readState(t, statePath)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[int64]int{}
	var max int64 = -1
	for _, r := range recs {
		var p struct {
			Seq *int64 `json:"seq"`
		}
		if err := json.Unmarshal(r.Value, &p); err != nil || p.Seq == nil {
			t.Fatalf("offset %d: payload %q has no seq", r.Offset, r.Value)
		}
		counts[*p.Seq]++
		if *p.Seq > max {
			max = *p.Seq
		}
	}
	if final != max+1 {
		t.Fatalf("final checkpoint next_seq=%d, highest sequence on the topic %d", final, max)
	}
	var dups []int64
	for seq := int64(0); seq <= max; seq++ {
		switch counts[seq] {
		case 0:
			t.Fatalf("sequence %d is missing (%d records, highest %d)", seq, len(recs), max)
		case 1:
		case 2:
			dups = append(dups, seq)
		default:
			t.Fatalf("sequence %d appears %d times", seq, counts[seq])
		}
	}
	// Each duplicate belongs to the one batch after a kill's checkpoint:
	// produced, but killed before its state was saved.
	for _, seq := range dups {
		ok := false
		for _, cp := range checkpoints {
			if seq >= cp && seq < cp+perBatch {
				ok = true
			}
		}
		if !ok {
			t.Fatalf("sequence %d is duplicated but lies in no unacknowledged batch after the checkpoints %v", seq, checkpoints)
		}
	}
	t.Logf("%d records, sequences 0..%d all present, %d duplicates, all in the unacknowledged batch after a kill (checkpoints %v)", len(recs), max, len(dups), checkpoints)
}
