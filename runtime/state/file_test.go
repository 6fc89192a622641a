package state

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestFileStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "nested", "state")
	s, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := s.Load(ctx, "gen"); err != nil || b != nil {
		t.Fatalf("empty store: %q, %v", b, err)
	}
	for _, blob := range [][]byte{[]byte("one"), []byte("two-longer"), {}} {
		if err := s.Save(ctx, "gen", blob); err != nil {
			t.Fatal(err)
		}
		got, err := s.Load(ctx, "gen")
		if err != nil || !bytes.Equal(got, blob) || got == nil {
			t.Fatalf("Load = %q, %v; want %q", got, err, blob)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "gen.state")); err != nil {
		t.Fatalf("state file not named by key: %v", err)
	}
	for _, bad := range []string{"", "../x", "a/b", "UP"} {
		if err := s.Save(ctx, bad, []byte("x")); err == nil {
			t.Errorf("Save(%q) accepted", bad)
		}
	}
}

// A crash between writing the temporary file and renaming it leaves a
// truncated temporary file: the previous blob must still load, and the
// next start cleans the leftover.
func TestFileStoreTruncatedTempFile(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, _ := NewFileStore(dir)
	if err := s.Save(ctx, "gen", []byte("committed")); err != nil {
		t.Fatal(err)
	}
	leftover := filepath.Join(dir, tempPrefix+"gen-123")
	if err := os.WriteFile(leftover, []byte("half-writ"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b, _ := s.Load(ctx, "gen"); string(b) != "committed" {
		t.Fatalf("Load = %q", b)
	}
	s2, err := NewFileStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); !os.IsNotExist(err) {
		t.Fatalf("leftover temp file not removed: %v", err)
	}
	if b, _ := s2.Load(ctx, "gen"); string(b) != "committed" {
		t.Fatalf("Load after restart = %q", b)
	}
}

// blobFor builds a self-checking blob: sequence number, length, then a
// body of the sequence number's low byte.
func blobFor(seq uint64) []byte {
	n := 64<<10 + int(seq%7)*4096
	b := make([]byte, 16+n)
	binary.BigEndian.PutUint64(b, seq)
	binary.BigEndian.PutUint64(b[8:], uint64(n))
	for i := 16; i < len(b); i++ {
		b[i] = byte(seq)
	}
	return b
}

func checkBlob(b []byte) (uint64, error) {
	if len(b) < 16 {
		return 0, fmt.Errorf("blob of %d bytes is torn", len(b))
	}
	seq := binary.BigEndian.Uint64(b)
	n := binary.BigEndian.Uint64(b[8:])
	if uint64(len(b)-16) != n {
		return seq, fmt.Errorf("blob %d: body %d bytes, header says %d", seq, len(b)-16, n)
	}
	for _, c := range b[16:] {
		if c != byte(seq) {
			return seq, fmt.Errorf("blob %d: mixed content", seq)
		}
	}
	return seq, nil
}

// TestFileStoreWriterProcess is the child of TestFileStoreSIGKILL: it saves
// ever-increasing blobs until killed.
func TestFileStoreWriterProcess(t *testing.T) {
	dir := os.Getenv("PICO_STATE_CRASH_DIR")
	if dir == "" {
		t.Skip("helper process for TestFileStoreSIGKILL")
	}
	start, _ := strconv.ParseUint(os.Getenv("PICO_STATE_CRASH_START"), 10, 64)
	s, err := NewFileStore(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	for seq := start; ; seq++ {
		if err := s.Save(context.Background(), "crash", blobFor(seq)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		if seq == start {
			fmt.Println("saving")
		}
	}
}

// TestFileStoreSIGKILL kills a process that saves in a loop at arbitrary
// moments; after each kill the store must hold one complete blob, never
// older than the last one seen.
func TestFileStoreSIGKILL(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	var last uint64
	rounds := 8
	if testing.Short() {
		rounds = 3
	}
	for round := 0; round < rounds; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestFileStoreWriterProcess$", "-test.v")
		cmd.Env = append(os.Environ(), "PICO_STATE_CRASH_DIR="+dir, "PICO_STATE_CRASH_START="+strconv.FormatUint(last+1, 10))
		out := &syncBuffer{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for !strings.Contains(out.String(), "saving") {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("writer did not start: %s", out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(20+round*13) * time.Millisecond)
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()

		s, err := NewFileStore(dir)
		if err != nil {
			t.Fatal(err)
		}
		b, err := s.Load(ctx, "crash")
		if err != nil {
			t.Fatal(err)
		}
		seq, err := checkBlob(b)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if seq <= last {
			t.Fatalf("round %d: state went back or did not move: %d after %d", round, seq, last)
		}
		t.Logf("round %d: killed after blob %d", round, seq)
		last = seq
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
