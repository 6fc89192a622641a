package sdktest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// store is a destination that can be broken.
type store struct {
	mu         sync.Mutex
	brokenSink bool
	written    [][]byte
}

func (s *store) write(p [][]byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.brokenSink {
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
	s.brokenSink = true
	s.mu.Unlock()
	return func() {
		s.mu.Lock()
		s.brokenSink = false
		s.mu.Unlock()
	}
}

// bufSink buffers up to flushAt records before writing them to its store.
// The sinkFlaws flags break it on purpose.
type bufSink struct {
	dst       *store
	flushAt   int
	buf       [][]byte
	sinkFlaws sinkFlaws
}

type sinkFlaws struct {
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
		if s.sinkFlaws.dropOnFailure {
			s.buf = nil
		}
		return err
	}
	s.buf = nil
	return nil
}

func (s *bufSink) Close(context.Context) error {
	if s.sinkFlaws.noFlushOnClose || len(s.buf) == 0 {
		return nil
	}
	return s.flush()
}

func harness(flushAt int, f sinkFlaws) sdktest.SinkHarness {
	var dst *store
	return sdktest.SinkHarness{
		Setup: func(*testing.T) { dst = &store{} },
		New: func(*testing.T) (sdk.Sink, error) {
			return &bufSink{dst: dst, flushAt: flushAt, sinkFlaws: f}, nil
		},
		Written: func(t *testing.T) [][]byte { return dst.payloads(t) },
		Break:   func(t *testing.T) func() { return dst.breakIt(t) },
	}
}

func TestRunPassesAWriteThroughSink(t *testing.T) {
	sdktest.TestSink(t, harness(1, sinkFlaws{}))
}

func TestRunPassesABufferingSink(t *testing.T) {
	sdktest.TestSink(t, harness(25, sinkFlaws{}))
}

func TestRunSkipsRedeliveryWithoutBreak(t *testing.T) {
	h := harness(1, sinkFlaws{})
	h.Break = nil
	sdktest.TestSink(t, h)
}

func TestRecords(t *testing.T) {
	rs := sdktest.Records("orders", 5, 2)
	if len(rs) != 2 || rs[1].Offset != 6 || string(rs[1].Payload) != `{"topic":"orders","offset":6}` || string(rs[0].Key) != "key-5" {
		t.Fatalf("Records = %+v", rs)
	}
}

// deferSink is a DeferredSink: it buffers, writes every flushAt records
// (and on Close), and reports as durable what it wrote. The sinkFlaws flags
// break it on purpose.
type deferSink struct {
	dst       *store
	flushAt   int
	sinkFlaws deferFlaws

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
		if r.Offset < s.next && !s.sinkFlaws.noSkip {
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
	if s.sinkFlaws.durableEarly {
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

func deferHarness(flushAt int, f deferFlaws) sdktest.SinkHarness {
	var dst *store
	return sdktest.SinkHarness{
		Setup: func(*testing.T) { dst = &store{} },
		New: func(*testing.T) (sdk.Sink, error) {
			return &deferSink{dst: dst, flushAt: flushAt, sinkFlaws: f, next: -1}, nil
		},
		Written: func(t *testing.T) [][]byte { return dst.payloads(t) },
		Break:   func(t *testing.T) func() { return dst.breakIt(t) },
	}
}

func TestRunPassesADeferredSink(t *testing.T) {
	// 30 records in batches of 10: at the kill, 20 are written and 10 buffered.
	sdktest.TestSink(t, deferHarness(20, deferFlaws{}))
}

var brokenSink = map[string]struct {
	harness func() sdktest.SinkHarness
	want    string
}{
	"NoFlushOnClose": {func() sdktest.SinkHarness { return harness(1000, sinkFlaws{noFlushOnClose: true}) }, "the destination lacks 30 of 30 records"},
	"DropOnFailure":  {func() sdktest.SinkHarness { return harness(25, sinkFlaws{dropOnFailure: true}) }, "the destination lacks"},
	"DurableEarly": {func() sdktest.SinkHarness { return deferHarness(1000, deferFlaws{durableEarly: true}) },
		"were committed, but the destination lacks"},
	"NoSkip": {func() sdktest.SinkHarness { return deferHarness(25, deferFlaws{noSkip: true}) }, "written more than once"},
}

// TestRunCatchesBrokenSinks runs each brokenSink sink in a child process,
// because a conformance failure fails the test that ran it.
func TestRunCatchesBrokenSinks(t *testing.T) {
	if name := os.Getenv("SINKTEST_BROKEN"); name != "" {
		sdktest.TestSink(t, brokenSink[name].harness())
		return
	}
	for name, b := range brokenSink {
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
	c := sdktest.NewLogCapture(t)
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

// TestSuiteSaysWhatItDidNotRun runs TestSink without Written and Break in a
// child process (its output is the point): the cases that need them do not
// run, and the suite names each with the hook that would run it.
func TestSuiteSaysWhatItDidNotRun(t *testing.T) {
	if os.Getenv("SINKTEST_NO_HOOKS") != "" {
		h := harness(1, sinkFlaws{})
		h.Written, h.Break = nil, nil
		sdktest.TestSink(t, h)
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteSaysWhatItDidNotRun$", "-test.v", "-test.short")
	cmd.Env = append(os.Environ(), "SINKTEST_NO_HOOKS=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("TestSink without hooks failed a sink that keeps the contract: %v\n%s", err, out)
	}
	for _, want := range []string{
		"--- PASS: TestSuiteSaysWhatItDidNotRun/ConsumeAndClose",
		"1 of 8 conformance cases ran; not run:",
		"Checks: the connector does not implement sdk.Checker",
		"CloseFlushes: SinkHarness.Written is not set",
		"FailedConsumeRedelivered: SinkHarness.Written is not set",
		"RuntimeCommits: runs the runtime's sink loop (librdkafka) against the embedded broker; skipped with -short",
		"DeferredSkipsRedelivered: SinkHarness.Written is not set",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the output lacks %q:\n%s", want, out)
		}
	}
}
