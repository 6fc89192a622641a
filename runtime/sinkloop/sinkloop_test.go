package sinkloop

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// recSink records every Consume call. fail, when set, decides whether a
// call fails; block, when set, is waited on inside Consume.
type recSink struct {
	mu       sync.Mutex
	calls    [][]sdk.Record
	ok       []sdk.Record // records of successful calls
	opened   bool
	closed   bool
	closedAt int // len(ok) when Close ran
	fail     func(call int, batch []sdk.Record) error
	inside   func(call int)
}

func (s *recSink) Open(context.Context) error {
	s.mu.Lock()
	s.opened = true
	s.mu.Unlock()
	return nil
}

func (s *recSink) Consume(_ context.Context, batch []sdk.Record) error {
	s.mu.Lock()
	s.calls = append(s.calls, append([]sdk.Record(nil), batch...))
	call := len(s.calls)
	s.mu.Unlock()
	if s.inside != nil {
		s.inside(call)
	}
	if s.fail != nil {
		if err := s.fail(call, batch); err != nil {
			return err
		}
	}
	s.mu.Lock()
	s.ok = append(s.ok, batch...)
	s.mu.Unlock()
	return nil
}

func (s *recSink) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.closedAt = len(s.ok)
	s.mu.Unlock()
	return nil
}

func (s *recSink) okCount() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.ok) }

func testLogger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

func startBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func produce(t *testing.T, b *broker.Broker, topic string, values ...string) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range values {
		r := &kgo.Record{Topic: topic, Value: []byte(v), Key: []byte("k"), Headers: []kgo.RecordHeader{{Key: "h", Value: []byte("x")}}}
		if err := cl.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
}

func committed(t *testing.T, b *broker.Broker, group string) map[string]int64 {
	t.Helper()
	out, err := fetchCommitted(b, group)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// fetchCommitted reads a group's committed offsets by topic; an error while
// the group does not exist yet is normal.
func fetchCommitted(b *broker.Broker, group string) (map[string]int64, error) {
	return fleet.Committed(b.Addr(), group)
}

type running struct {
	cancel context.CancelFunc
	done   chan error
}

func run(t *testing.T, cfg Config) *running {
	t.Helper()
	if cfg.Key == "" {
		cfg.Key = "test_sink"
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- Run(ctx, cfg) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("sink loop did not stop")
	}
	return nil
}

func values(recs []sdk.Record, topic string) []string {
	var out []string
	for _, r := range recs {
		if r.Topic == topic {
			out = append(out, string(r.Payload))
		}
	}
	return out
}

func jsonValues(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf(`{"%s":%d}`, prefix, i)
	}
	return out
}

func TestPatternLiteralBatchesAndCommits(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "orders.eu", jsonValues("eu", 25)...)
	produce(t, b, "orders.us", jsonValues("us", 5)...)
	produce(t, b, "audit", "plain text")
	produce(t, b, "ignored", "x")
	sink := &recSink{}
	tr := status.New("sink", "test_sink", nil)
	r := run(t, Config{
		Topics: []definition.Topics{
			{Pattern: `orders\..*`, Schema: "json", BatchLength: 10, PollInterval: "50ms"},
			{Topic: definition.Route{Literal: "audit"}, Schema: "text", BatchLength: 10, PollInterval: "50ms"},
		},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr,
	})
	testwait.For(t, time.Minute, "31 records", func() bool { return sink.okCount() == 31 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(values(sink.ok, "orders.eu")); got != fmt.Sprint(jsonValues("eu", 25)) {
		t.Fatalf("orders.eu out of order: %s", got)
	}
	for _, c := range sink.calls {
		if len(c) > 10 {
			t.Fatalf("batch of %d records exceeds batch_length 10", len(c))
		}
	}
	for _, rec := range sink.ok {
		want := sdk.SchemaJSON
		if rec.Topic == "audit" {
			want = sdk.SchemaText
		}
		if rec.Schema != want || string(rec.Key) != "k" || len(rec.Headers) != 1 || rec.Timestamp.IsZero() {
			t.Fatalf("record %+v", rec)
		}
		if rec.Topic == "ignored" {
			t.Fatal("consumed a topic outside the subscription")
		}
	}
	if !sink.opened || !sink.closed || sink.closedAt != 31 {
		t.Fatalf("open %v close %v at %d", sink.opened, sink.closed, sink.closedAt)
	}
	offs := committed(t, b, "pico-connectors-test_sink")
	if offs["orders.eu"] != 25 || offs["orders.us"] != 5 || offs["audit"] != 1 {
		t.Fatalf("committed offsets %v", offs)
	}
	snap := tr.Snapshot()
	if snap.Status != status.Stopped || snap.Counters.Consumed != 31 || snap.Counters.Nacked != 0 || snap.Counters.Committed != 31 {
		t.Fatalf("snapshot %+v", snap)
	}
	// A new run of the same group resumes after the commit: nothing again.
	produce(t, b, "orders.eu", `{"eu":25}`)
	sink2 := &recSink{}
	r2 := run(t, Config{Topics: []definition.Topics{{Pattern: `^orders\..*`}}, Sink: sink2, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "the new record", func() bool { return sink2.okCount() >= 1 })
	time.Sleep(300 * time.Millisecond)
	r2.stop(t)
	if got := fmt.Sprint(values(sink2.ok, "orders.eu")); got != `[{"eu":25}]` || sink2.okCount() != 1 {
		t.Fatalf("resumed run got %v", values(sink2.ok, "orders.eu"))
	}
}

func TestFailedConsumeRedeliversAndCommitsOnlyAfterSuccess(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "events", jsonValues("n", 8)...)
	const group = "pico-connectors-redeliver"
	var offsetsDuringFailure []map[string]int64
	sink := &recSink{}
	sink.inside = func(call int) {
		if call <= 3 {
			offsetsDuringFailure = append(offsetsDuringFailure, committed(t, b, group))
		}
	}
	sink.fail = func(call int, _ []sdk.Record) error {
		if call <= 3 {
			return errors.New("destination unavailable")
		}
		return nil
	}
	tr := status.New("sink", "redeliver", nil)
	r := run(t, Config{Key: "redeliver", Topics: []definition.Topics{{Topic: definition.Route{Literal: "events"}, BatchLength: 100, PollInterval: "300ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, RetryDelay: 10 * time.Millisecond, ErrorAfter: 3})
	// The loop commits, then sets Running, after Consume returns: wait for
	// both, not only for the sink to have the records.
	testwait.For(t, time.Minute, "8 records consumed and the status back to Running", func() bool {
		return sink.okCount() == 8 && tr.Status() == status.Running
	})
	snap := tr.Snapshot()
	if snap.Status != status.Running || snap.Counters.Nacked != 3 || snap.Counters.Redelivered != 3 || !strings.Contains(snap.LastError, "destination unavailable") {
		t.Fatalf("snapshot %+v", snap)
	}
	r.stop(t)
	sink.mu.Lock()
	defer sink.mu.Unlock()
	// Every call saw the same 8 records, offsets 0..7.
	for i, c := range sink.calls {
		var offs []int64
		for _, rec := range c {
			offs = append(offs, rec.Offset)
		}
		if fmt.Sprint(offs) != "[0 1 2 3 4 5 6 7]" {
			t.Fatalf("call %d got offsets %v, want the same batch again", i+1, offs)
		}
	}
	if len(sink.calls) != 4 {
		t.Fatalf("%d Consume calls, want 4", len(sink.calls))
	}
	for i, o := range offsetsDuringFailure {
		if _, ok := o["events"]; ok {
			t.Fatalf("offset committed before a successful Consume (call %d): %v", i+1, o)
		}
	}
	if offs := committed(t, b, group); offs["events"] != 8 {
		t.Fatalf("committed %v", offs)
	}
}

// A panic in Consume runs in the loop's consume goroutine, out of the
// supervisor's reach: the loop must turn it into an error, commit nothing
// of the batch and close the sink, so a new instance gets every record.
func TestPanickingConsumeStopsTheLoop(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "events", jsonValues("n", 5)...)
	const group = "pico-connectors-panics"
	sink := &recSink{fail: func(int, []sdk.Record) error {
		var m map[string]int
		m["boom"]++ // a nil map: a sink's bug
		return nil
	}}
	tr := status.New("sink", "panics", nil)
	r := run(t, Config{Key: "panics", Topics: []definition.Topics{{Topic: definition.Route{Literal: "events"}, BatchLength: 100, PollInterval: "100ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr})
	var err error
	select {
	case err = <-r.done:
		close(r.done)
	case <-time.After(time.Minute):
		t.Fatal("the loop did not stop after Consume panicked")
	}
	if err == nil || !strings.Contains(err.Error(), "consume panicked: assignment to entry in nil map") {
		t.Fatalf("Run returned %v, want the panic", err)
	}
	if snap := tr.Snapshot(); snap.Status != status.Error || !strings.Contains(snap.LastError, "panicked") {
		t.Fatalf("snapshot %+v, want Error with the panic", snap)
	}
	sink.mu.Lock()
	closed, calls := sink.closed, len(sink.calls)
	sink.mu.Unlock()
	if !closed || calls != 1 {
		t.Fatalf("closed %v after %d Consume calls, want closed after 1", closed, calls)
	}
	if offs := committed(t, b, group); len(offs) != 0 {
		t.Fatalf("committed %v after a panic, want nothing", offs)
	}
	again := &recSink{}
	run(t, Config{Key: "panics", Topics: []definition.Topics{{Topic: definition.Route{Literal: "events"}, BatchLength: 100, PollInterval: "100ms"}},
		Sink: again, BootstrapServers: b.Addr(), Tracker: status.New("sink", "panics", nil)})
	testwait.For(t, time.Minute, "the next instance to get all 5 records", func() bool { return again.okCount() == 5 })
}

func TestErrorStatusAfterRepeatedFailuresClears(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "e", `{"a":1}`)
	var mu sync.Mutex
	failing := true
	sink := &recSink{fail: func(int, []sdk.Record) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("boom")
		}
		return nil
	}}
	tr := status.New("sink", "e", nil)
	r := run(t, Config{Key: "e", Topics: []definition.Topics{{Topic: definition.Route{Literal: "e"}, PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 10 * time.Millisecond, ErrorAfter: 2})
	testwait.For(t, time.Minute, "status Error", func() bool { return tr.Status() == status.Error })
	mu.Lock()
	failing = false
	mu.Unlock()
	testwait.For(t, time.Minute, "status Running", func() bool { return tr.Status() == status.Running })
	r.stop(t)
	if sink.okCount() != 1 {
		t.Fatalf("%d records", sink.okCount())
	}
}

func TestStopDeliversBatchInHandAndFlushes(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "slow", jsonValues("n", 3)...)
	sink := &recSink{}
	// A long poll interval: the batch is still collecting when the stop
	// comes, and is delivered then.
	r := run(t, Config{Topics: []definition.Topics{{Topic: definition.Route{Literal: "slow"}, PollInterval: "1h", BatchLength: 1000}},
		Sink: sink, BootstrapServers: b.Addr()})
	time.Sleep(2 * time.Second)
	if sink.okCount() != 0 {
		t.Fatal("batch delivered before it filled or the interval passed")
	}
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if sink.okCount() != 3 || !sink.closed || sink.closedAt != 3 {
		t.Fatalf("ok %d closed %v at %d", sink.okCount(), sink.closed, sink.closedAt)
	}
	if offs := committed(t, b, "pico-connectors-test_sink"); offs["slow"] != 3 {
		t.Fatalf("committed %v", offs)
	}
}

func TestInvalidJSONHandedOverAsRaw(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "j", `{"ok":1}`, `not json`)
	sink := &recSink{}
	r := run(t, Config{Topics: []definition.Topics{{Topic: definition.Route{Literal: "j"}, Schema: "json", PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "2 records", func() bool { return sink.okCount() == 2 })
	r.stop(t)
	if sink.ok[0].Schema != sdk.SchemaJSON || sink.ok[1].Schema != sdk.SchemaRaw {
		t.Fatalf("schemas %s %s", sink.ok[0].Schema, sink.ok[1].Schema)
	}
}

type failOpen struct{ recSink }

func (f *failOpen) Open(context.Context) error { return errors.New("bucket missing") }

func TestBadDefinitionAndOpenFailure(t *testing.T) {
	err := CheckTopics([]definition.Topics{
		{Pattern: "orders.(", Schema: "json"},
		{},
		{Topic: definition.Route{Strategy: "field", Path: "x", Template: "{value}"}},
		{Pattern: "a", PollInterval: "fast", Schema: "xml", Properties: map[string]string{"group.id": "g"}},
	}, "")
	for _, want := range []string{
		`topics[0].pattern: "orders.(" is not a valid regular expression`,
		"topics[1]: missing: set pattern",
		"topics[2].topic: a sink consumes a literal topic or a pattern",
		`topics[3].poll_interval "fast"`,
		`topics[3].schema`,
		`topics[3].properties."group.id"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	b := startBroker(t)
	tr := status.New("sink", "x", nil)
	err = Run(context.Background(), Config{Key: "x", Topics: []definition.Topics{{Pattern: "a"}}, Sink: &failOpen{}, BootstrapServers: b.Addr(), Tracker: tr})
	if err == nil || !strings.Contains(err.Error(), "bucket missing") || tr.Status() != status.Error {
		t.Fatalf("Run = %v, status %s", err, tr.Status())
	}
}

func TestPatternPicksUpTopicsCreatedLater(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "logs.a", `{"n":1}`)
	sink := &recSink{}
	r := run(t, Config{Topics: []definition.Topics{{Pattern: `logs\..+`, PollInterval: "20ms",
		Properties: map[string]string{"topic.metadata.refresh.interval.ms": "200"}}}, Sink: sink, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "logs.a", func() bool { return sink.okCount() == 1 })
	produce(t, b, "logs.b", `{"n":2}`)
	testwait.For(t, time.Minute, "logs.b, created after the subscription", func() bool { return sink.okCount() == 2 })
	r.stop(t)
}

func TestBrokerRestartResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("broker restart takes a few seconds")
	}
	dir := t.TempDir()
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addr()
	produce(t, b, "r", jsonValues("n", 10)...)
	sink := &recSink{}
	r := run(t, Config{Topics: []definition.Topics{{Topic: definition.Route{Literal: "r"}, PollInterval: "20ms"}}, Sink: sink, BootstrapServers: addr,
		Properties: map[string]string{"reconnect.backoff.max.ms": "200"}})
	testwait.For(t, time.Minute, "10 records", func() bool { return sink.okCount() == 10 })
	// The commit follows Consume: stop the broker only once it is in, or
	// the batch is (rightly) redelivered after the restart.
	testwait.For(t, time.Minute, "offset 10 committed", func() bool {
		offs, err := fetchCommitted(b, "pico-connectors-test_sink")
		return err == nil && offs["r"] == 10
	})
	b.Close()
	time.Sleep(500 * time.Millisecond)
	b2, err := broker.Start(broker.Config{Address: addr, AutoCreateTopics: true, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	more := jsonValues("m", 10)
	produce(t, b2, "r", more...)
	testwait.For(t, time.Minute, "20 records", func() bool { return sink.okCount() >= 20 })
	r.stop(t)
	got := values(sink.ok, "r")
	want := append(jsonValues("n", 10), more...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %v", got)
	}
}

// healthFlag is a sdk.Health condition set by the test, for a test sink
// to embed.
type healthFlag struct {
	hmu sync.Mutex
	err error
}

func (h *healthFlag) Health() error { h.hmu.Lock(); defer h.hmu.Unlock(); return h.err }

func (h *healthFlag) set(err error) { h.hmu.Lock(); h.err = err; h.hmu.Unlock() }

// healthSink is a recSink with a sdk.Health condition set by the test.
type healthSink struct {
	recSink
	healthFlag
}

// TestSinkHealthSetsErrorWhileIdle: a sink's own Health condition shows as
// status Error with its message although no record arrives, a good batch
// does not clear it, and Running returns once it clears.
func TestSinkHealthSetsErrorWhileIdle(t *testing.T) {
	b := startBroker(t)
	sink := &healthSink{}
	tr := status.New("sink", "health", nil)
	r := run(t, Config{Key: "health", Topics: []definition.Topics{{Topic: definition.Route{Literal: "hl"}, PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, CommitInterval: 20 * time.Millisecond})
	testwait.For(t, time.Minute, "Running", func() bool { return tr.Status() == status.Running })
	sink.set(errors.New("uploads failing: 500 Internal Server Error"))
	testwait.For(t, time.Minute, "Error with the sink's message", func() bool {
		s := tr.Snapshot()
		return s.Status == status.Error && strings.Contains(s.LastError, "500 Internal")
	})
	produce(t, b, "hl", jsonValues("n", 3)...)
	testwait.For(t, time.Minute, "3 records consumed", func() bool { return sink.okCount() == 3 })
	time.Sleep(100 * time.Millisecond)
	if st := tr.Status(); st != status.Error {
		t.Fatalf("status %s after a good batch, want Error while Health reports", st)
	}
	sink.set(nil)
	testwait.For(t, time.Minute, "Running again", func() bool { return tr.Status() == status.Running })
	r.stop(t)
}
