package sinktest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/picomq/pico-connectors/runtime/connectortest/sinktest"
	"github.com/picomq/pico-connectors/runtime/plugin"
)

// store is a destination that can be broken.
type store struct {
	mu      sync.Mutex
	broken  bool
	written [][]byte
}

func (s *store) write(p [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.broken {
		return errors.New("destination unavailable")
	}
	s.written = append(s.written, p...)
	return nil
}

func (s *store) payloads(*testing.T) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.written...)
}

func (s *store) breakIt(*testing.T) func() {
	s.mu.Lock()
	s.broken = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.broken = false
		s.mu.Unlock()
	}
}

// bufSink buffers up to flushAt records before writing them to its store.
// The flaws flags break it on purpose.
type bufSink struct {
	dst     *store
	flushAt int
	buf     [][]byte
	flaws   flaws
}

type flaws struct {
	noFlushOnClose bool // Close drops the buffer
	dropOnFailure  bool // a failed flush drops the buffer
}

func (s *bufSink) Open(context.Context) error { return nil }

func (s *bufSink) Consume(_ context.Context, batch []plugin.Record) error {
	for _, r := range batch {
		s.buf = append(s.buf, r.Payload)
	}
	if len(s.buf) >= s.flushAt {
		return s.flush()
	}
	return nil
}

func (s *bufSink) flush() error {
	if err := s.dst.write(s.buf); err != nil {
		// A good sink keeps its buffer: it holds records of earlier,
		// successful Consume calls. The failed batch's records come again
		// with the redelivery, a duplicate that at-least-once allows.
		if s.flaws.dropOnFailure {
			s.buf = nil
		}
		return err
	}
	s.buf = nil
	return nil
}

func (s *bufSink) Close(context.Context) error {
	if s.flaws.noFlushOnClose || len(s.buf) == 0 {
		return nil
	}
	return s.flush()
}

func harness(flushAt int, f flaws) sinktest.Harness {
	var dst *store
	return sinktest.Harness{
		Setup: func(*testing.T) { dst = &store{} },
		New: func(*testing.T) (plugin.Sink, error) {
			return &bufSink{dst: dst, flushAt: flushAt, flaws: f}, nil
		},
		Written: func(t *testing.T) [][]byte { return dst.payloads(t) },
		Break:   func(t *testing.T) func() { return dst.breakIt(t) },
	}
}

func TestRunPassesAWriteThroughSink(t *testing.T) {
	sinktest.Run(t, harness(1, flaws{}))
}

func TestRunPassesABufferingSink(t *testing.T) {
	sinktest.Run(t, harness(25, flaws{}))
}

func TestRunSkipsRedeliveryWithoutBreak(t *testing.T) {
	h := harness(1, flaws{})
	h.Break = nil
	sinktest.Run(t, h)
}

func TestRecords(t *testing.T) {
	rs := sinktest.Records("orders", 5, 2)
	if len(rs) != 2 || rs[1].Offset != 6 || string(rs[1].Payload) != `{"topic":"orders","offset":6}` || string(rs[0].Key) != "key-5" {
		t.Fatalf("Records = %+v", rs)
	}
}

var broken = map[string]struct {
	flushAt int
	flaws   flaws
	want    string
}{
	"NoFlushOnClose": {1000, flaws{noFlushOnClose: true}, "the destination lacks 30 of 30 records"},
	"DropOnFailure":  {25, flaws{dropOnFailure: true}, "the destination lacks"},
}

// TestRunCatchesBrokenSinks runs each broken sink in a child process,
// because a conformance failure fails the test that ran it.
func TestRunCatchesBrokenSinks(t *testing.T) {
	if name := os.Getenv("SINKTEST_BROKEN"); name != "" {
		b := broken[name]
		sinktest.Run(t, harness(b.flushAt, b.flaws))
		return
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRunCatchesBrokenSinks$", "-test.v")
			cmd.Env = append(os.Environ(), "SINKTEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("Run passed a sink that breaks the contract:\n%s", out)
			}
			if !strings.Contains(string(out), b.want) {
				t.Fatalf("Run failed without saying %q:\n%s", b.want, out)
			}
		})
	}
}

func TestLogCapture(t *testing.T) {
	c := sinktest.NewLogCapture(t)
	l := c.Logger.With("connector", "x")
	l.Info("record", "payload", "a")
	l.Debug("record", "payload", "b")
	l.WithGroup("g").Info("other", "k", 1)
	if got := c.Values("record", "payload"); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("Values = %q", got)
	}
	if got := c.Values("record", "connector"); len(got) != 2 || got[0] != "x" {
		t.Fatalf("Values of a With attribute = %q", got)
	}
	if got := c.Values("other", "g.k"); len(got) != 1 || got[0] != "1" {
		t.Fatalf("Values in a group = %q", got)
	}
	c.Reset()
	if len(c.Messages()) != 0 {
		t.Fatal("Reset kept records")
	}
}
