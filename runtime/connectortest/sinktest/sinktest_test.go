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
	"github.com/picomq/pico-connectors/sdk"
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

func (s *bufSink) Consume(_ context.Context, batch []sdk.Record) error {
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
		New: func(*testing.T) (sdk.Sink, error) {
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

// deferSink is a DeferredSink: it buffers, writes every flushAt records
// (and on Close), and reports as durable what it wrote. The flaws flags
// break it on purpose.
type deferSink struct {
	dst     *store
	flushAt int
	flaws   deferFlaws

	mu      sync.Mutex
	buf     []sdk.Record
	next    int64 // next offset expected, -1 before the first record
	durable int64
}

type deferFlaws struct {
	durableEarly bool // Durable reports what is only buffered
	noSkip       bool // a redelivered record is written again
}

func (s *deferSink) Open(context.Context) error { return nil }

func (s *deferSink) Consume(_ context.Context, batch []sdk.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		if r.Offset < s.next && !s.flaws.noSkip {
			continue
		}
		s.buf = append(s.buf, r)
		s.next = r.Offset + 1
	}
	if len(s.buf) >= s.flushAt {
		return s.flush()
	}
	return nil
}

// flush writes the buffer; on failure the buffer stays, accepted.
func (s *deferSink) flush() error {
	if len(s.buf) == 0 {
		return nil
	}
	p := make([][]byte, len(s.buf))
	for i, r := range s.buf {
		p[i] = r.Payload
	}
	if err := s.dst.write(p); err != nil {
		return err
	}
	s.durable = s.buf[len(s.buf)-1].Offset + 1
	s.buf = nil
	return nil
}

func (s *deferSink) Durable() map[sdk.TopicPartition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.durable
	if s.flaws.durableEarly {
		d = s.next
	}
	if d <= 0 {
		return nil
	}
	return map[sdk.TopicPartition]int64{{Topic: "sinktest"}: d}
}

func (s *deferSink) Release(context.Context, []sdk.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.buf, s.next = nil, s.durable
	return nil
}

func (s *deferSink) Close(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flush()
}

func deferHarness(flushAt int, f deferFlaws) sinktest.Harness {
	var dst *store
	return sinktest.Harness{
		Setup: func(*testing.T) { dst = &store{} },
		New: func(*testing.T) (sdk.Sink, error) {
			return &deferSink{dst: dst, flushAt: flushAt, flaws: f, next: -1}, nil
		},
		Written: func(t *testing.T) [][]byte { return dst.payloads(t) },
		Break:   func(t *testing.T) func() { return dst.breakIt(t) },
	}
}

func TestRunPassesADeferredSink(t *testing.T) {
	// 30 records in batches of 10: at the kill, 20 are written and 10 buffered.
	sinktest.Run(t, deferHarness(20, deferFlaws{}))
}

var broken = map[string]struct {
	harness func() sinktest.Harness
	want    string
}{
	"NoFlushOnClose": {func() sinktest.Harness { return harness(1000, flaws{noFlushOnClose: true}) }, "the destination lacks 30 of 30 records"},
	"DropOnFailure":  {func() sinktest.Harness { return harness(25, flaws{dropOnFailure: true}) }, "the destination lacks"},
	"DurableEarly": {func() sinktest.Harness { return deferHarness(1000, deferFlaws{durableEarly: true}) },
		"were committed, but the destination lacks"},
	"NoSkip": {func() sinktest.Harness { return deferHarness(25, deferFlaws{noSkip: true}) }, "written more than once"},
}

// TestRunCatchesBrokenSinks runs each broken sink in a child process,
// because a conformance failure fails the test that ran it.
func TestRunCatchesBrokenSinks(t *testing.T) {
	if name := os.Getenv("SINKTEST_BROKEN"); name != "" {
		sinktest.Run(t, broken[name].harness())
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
