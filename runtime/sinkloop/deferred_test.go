package sinkloop

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// durableStore is a destination shared by sinks: what each made durable.
type durableStore struct {
	mu  sync.Mutex
	got map[sdk.TopicPartition]map[int64]int // offset -> times written
}

func newStore() *durableStore {
	return &durableStore{got: map[sdk.TopicPartition]map[int64]int{}}
}

func (s *durableStore) write(recs []sdk.Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range recs {
		p := sdk.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if s.got[p] == nil {
			s.got[p] = map[int64]int{}
		}
		s.got[p][r.Offset]++
	}
}

// missing returns the offsets below end of topic that are not written.
func (s *durableStore) missing(topic string, end int64) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int64
	for o := int64(0); o < end; o++ {
		if s.got[sdk.TopicPartition{Topic: topic}][o] == 0 {
			out = append(out, o)
		}
	}
	return out
}

func (s *durableStore) duplicates() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, m := range s.got {
		for _, c := range m {
			n += c - 1
		}
	}
	return n
}

// deferSink is a DeferredSink: Consume buffers, Durable writes the buffer
// to the store (up to limit per partition, when set) and reports it.
// Records below the next expected offset are skipped, as the contract asks.
type deferSink struct {
	store *durableStore

	mu       sync.Mutex
	next     map[sdk.TopicPartition]int64
	buf      map[sdk.TopicPartition][]sdk.Record
	durable  map[sdk.TopicPartition]int64
	limit    int64 // when >= 0, nothing at or above this offset becomes durable
	calls    int   // Durable calls
	releases [][]sdk.TopicPartition
	closed   bool
	closeErr error // what Close returns
	// consume, when set, runs at the start of Consume (outside the lock).
	consume func(ctx context.Context, batch []sdk.Record) error
}

func newDeferSink(store *durableStore) *deferSink {
	return &deferSink{store: store, next: map[sdk.TopicPartition]int64{}, buf: map[sdk.TopicPartition][]sdk.Record{},
		durable: map[sdk.TopicPartition]int64{}, limit: -1}
}

func (s *deferSink) Open(context.Context) error { return nil }

func (s *deferSink) Consume(ctx context.Context, batch []sdk.Record) error {
	if s.consume != nil {
		if err := s.consume(ctx, batch); err != nil {
			return err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		p := sdk.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if n, ok := s.next[p]; ok && r.Offset < n {
			continue // a redelivery of what was accepted
		}
		s.buf[p] = append(s.buf[p], r)
		s.next[p] = r.Offset + 1
	}
	return nil
}

func (s *deferSink) Durable() map[sdk.TopicPartition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	for p, recs := range s.buf {
		i := 0
		for i < len(recs) && (s.limit < 0 || recs[i].Offset < s.limit) {
			i++
		}
		s.store.write(recs[:i])
		s.buf[p] = recs[i:]
		if i > 0 {
			s.durable[p] = recs[i-1].Offset + 1
		}
	}
	out := make(map[sdk.TopicPartition]int64, len(s.durable))
	for p, o := range s.durable {
		out[p] = o
	}
	return out
}

func (s *deferSink) Release(_ context.Context, parts []sdk.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.releases = append(s.releases, parts)
	for _, p := range parts {
		// Drop what is not durable: the next owner replays it.
		delete(s.buf, p)
		delete(s.next, p)
		delete(s.durable, p)
	}
	return nil
}

func (s *deferSink) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return s.closeErr
}

func (s *deferSink) state() (accepted int64, calls int, releases int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.next[sdk.TopicPartition{Topic: "d"}], s.calls, len(s.releases)
}

func (s *deferSink) setLimit(n int64) { s.mu.Lock(); s.limit = n; s.mu.Unlock() }

// TestDeferredSinkCommitsOnlyDurable: the loop keeps consuming while
// nothing is durable, commits exactly what Durable reports as it grows,
// and counts the committed records.
func TestDeferredSinkCommitsOnlyDurable(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "d", jsonValues("n", 20)...)
	const group = "pico-connectors-deferred"
	store := newStore()
	sink := newDeferSink(store)
	sink.setLimit(0) // nothing durable yet
	tr := status.New("sink", "deferred", nil)
	r := run(t, Config{Key: "deferred", Topics: []definition.Topics{{Topic: definition.Route{Literal: "d"}, BatchLength: 5, PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, CommitInterval: 20 * time.Millisecond})
	testwait.For(t, time.Minute, "all 20 records accepted while none is durable", func() bool { n, _, _ := sink.state(); return n == 20 })
	_, calls0, _ := sink.state()
	testwait.For(t, time.Minute, "five more Durable calls", func() bool { _, c, _ := sink.state(); return c >= calls0+5 })
	if offs := committed(t, b, group); offs["d"] > 0 {
		t.Fatalf("committed %v with nothing durable", offs)
	}
	sink.setLimit(12)
	testwait.For(t, time.Minute, "offset 12 committed", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["d"] == 12 })
	_, calls1, _ := sink.state()
	testwait.For(t, time.Minute, "five more Durable calls", func() bool { _, c, _ := sink.state(); return c >= calls1+5 })
	if offs := committed(t, b, group); offs["d"] != 12 {
		t.Fatalf("committed %v, want 12: no further than durable", offs)
	}
	if got := tr.Snapshot().Counters.Committed; got != 12 {
		t.Fatalf("Committed counter %d, want 12", got)
	}
	sink.setLimit(-1)
	testwait.For(t, time.Minute, "offset 20 committed", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["d"] == 20 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if m := store.missing("d", 20); len(m) > 0 || store.duplicates() > 0 {
		t.Fatalf("missing %v, %d duplicates", m, store.duplicates())
	}
	if got := tr.Snapshot().Counters.Committed; got != 20 {
		t.Fatalf("Committed counter %d, want 20", got)
	}
}

// TestDeferredSinkStopCommitsAfterClose: what becomes durable in Close is
// committed before the consumer leaves; a restart resumes there.
func TestDeferredSinkStopCommitsAfterClose(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "d", jsonValues("n", 7)...)
	const group = "pico-connectors-stopcommit"
	store := newStore()
	sink := newDeferSink(store)
	sink.setLimit(0)
	r := run(t, Config{Key: "stopcommit", Topics: []definition.Topics{{Topic: definition.Route{Literal: "d"}, PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "7 records accepted", func() bool { n, _, _ := sink.state(); return n == 7 })
	// Close makes everything durable, as a flushing sink does.
	sink.mu.Lock()
	sink.limit = -1
	sink.mu.Unlock()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if offs := committed(t, b, group); offs["d"] != 7 {
		t.Fatalf("committed %v after the stop, want 7", offs)
	}
	produce(t, b, "d", `{"n":7}`)
	sink2 := newDeferSink(store)
	r2 := run(t, Config{Key: "stopcommit", Topics: []definition.Topics{{Topic: definition.Route{Literal: "d"}, PollInterval: "20ms"}},
		Sink: sink2, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "offset 8 committed", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["d"] == 8 })
	r2.stop(t)
	if m := store.missing("d", 8); len(m) > 0 || store.duplicates() > 0 {
		t.Fatalf("missing %v, %d duplicates", m, store.duplicates())
	}
}

// TestConsumeBlockingPastMaxPollInterval: a Consume that blocks longer than
// max.poll.interval.ms (a sink at its memory bound) costs the consumer
// neither its group membership nor its commits: Durable keeps being
// committed while Consume blocks, and no rebalance revokes anything.
func TestConsumeBlockingPastMaxPollInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("blocks for longer than the broker's minimum session timeout (6s)")
	}
	b := startBroker(t)
	produce(t, b, "d", jsonValues("n", 10)...)
	const group = "pico-connectors-blocking"
	store := newStore()
	sink := newDeferSink(store)
	unblock := make(chan struct{})
	blocked := make(chan struct{}, 1)
	var once sync.Once
	sink.consume = func(ctx context.Context, batch []sdk.Record) error {
		if batch[0].Offset < 5 {
			return nil
		}
		once.Do(func() { blocked <- struct{}{} })
		select {
		case <-unblock:
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	}
	logs := &countingHandler{Handler: testLogger().Handler(), counts: map[string]int{}}
	r := run(t, Config{Key: "blocking", Logger: slog.New(logs), Topics: []definition.Topics{{Topic: definition.Route{Literal: "d"}, BatchLength: 5, PollInterval: "20ms",
		Properties: map[string]string{"max.poll.interval.ms": "6000", "session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}}},
		Sink: sink, BootstrapServers: b.Addr(), CommitInterval: 50 * time.Millisecond})
	<-blocked
	// The first batch was accepted; it becomes durable on the timer and
	// is committed while Consume blocks on the second.
	testwait.For(t, time.Minute, "offset 5 committed during the blocked Consume", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["d"] == 5 })
	time.Sleep(9 * time.Second) // past max.poll.interval.ms and the session timeout
	close(unblock)
	testwait.For(t, time.Minute, "offset 10 committed", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["d"] == 10 })
	r.stop(t)
	if _, _, rel := sink.state(); rel != 0 || logs.count("partitions assigned") != 1 {
		t.Fatalf("%d releases, %d assignments: the consumer lost its partitions while Consume blocked", rel, logs.count("partitions assigned"))
	}
	if m := store.missing("d", 10); len(m) > 0 || store.duplicates() > 0 {
		t.Fatalf("missing %v, %d duplicates", m, store.duplicates())
	}
}

// TestRebalanceTwoLoopsOneGroup: two loops share a group over several
// topics while records keep coming. Partitions move between them (the
// second joins, then leaves); every record ends up durable, and at no
// point is an offset committed that is not durable.
func TestRebalanceTwoLoopsOneGroup(t *testing.T) {
	if testing.Short() {
		t.Skip("group rebalances take seconds")
	}
	t.Run("eager", func(t *testing.T) { testRebalance(t, "range") })
	t.Run("cooperative", func(t *testing.T) { testRebalance(t, "cooperative-sticky") })
}

func testRebalance(t *testing.T, strategy string) {
	b := startBroker(t)
	topics := []string{"rb.a", "rb.b", "rb.c", "rb.d"}
	const perRound = 30
	produceAll := func(round int) {
		for _, tp := range topics {
			produce(t, b, tp, jsonValues(fmt.Sprintf("%s-%d", tp, round), perRound)...)
		}
	}
	produceAll(0)
	const group = "pico-connectors-rebalance"
	store := newStore()
	cfg := func(s sdk.Sink) Config {
		return Config{Key: "rebalance", Topics: []definition.Topics{{Pattern: `rb\..*`, BatchLength: 7, PollInterval: "20ms",
			Properties: map[string]string{"topic.metadata.refresh.interval.ms": "500", "partition.assignment.strategy": strategy}}},
			Sink: s, BootstrapServers: b.Addr(), CommitInterval: 30 * time.Millisecond}
	}
	// The invariant, checked all along: every committed offset is durable.
	stopCheck := make(chan struct{})
	checkErr := make(chan error, 1)
	go func() {
		defer close(checkErr)
		for {
			select {
			case <-stopCheck:
				return
			case <-time.After(20 * time.Millisecond):
			}
			offs, err := fetchCommitted(b, group)
			if err != nil {
				continue
			}
			for tp, o := range offs {
				if m := store.missing(tp, o); len(m) > 0 {
					checkErr <- fmt.Errorf("%s committed at %d but offsets %v are not durable", tp, o, m)
					return
				}
			}
		}
	}()
	s1 := newDeferSink(store)
	r1 := run(t, cfg(s1))
	testwait.For(t, time.Minute, "the first loop consuming", func() bool { return len(store.missing("rb.a", 1)) == 0 })
	s2 := newDeferSink(store)
	r2 := run(t, cfg(s2))
	produceAll(1)
	testwait.For(t, time.Minute, "a revoke in the first loop", func() bool { _, _, rel := s1.state(); return rel > 0 })
	produceAll(2)
	end := int64(3 * perRound)
	allDurable := func() bool {
		for _, tp := range topics {
			if len(store.missing(tp, end)) > 0 {
				return false
			}
		}
		return true
	}
	testwait.For(t, time.Minute, "every record durable with two members", allDurable)
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	produceAll(3)
	end = 4 * perRound
	testwait.For(t, time.Minute, "every record durable after the second left", allDurable)
	testwait.For(t, time.Minute, "every topic committed to its end", func() bool {
		offs, err := fetchCommitted(b, group)
		if err != nil {
			return false
		}
		for _, tp := range topics {
			if offs[tp] != end {
				return false
			}
		}
		return true
	})
	r1.stop(t)
	close(stopCheck)
	if err := <-checkErr; err != nil {
		t.Fatal(err)
	}
	_, _, rel1 := s1.state()
	_, _, rel2 := s2.state()
	t.Logf("releases: first loop %d, second %d", rel1, rel2)
	if d := store.duplicates(); d > 0 {
		t.Fatalf("%d records written twice: a revoke committed less than was durable", d)
	}
	var owned []string
	for p := range store.got {
		owned = append(owned, p.Topic)
	}
	sort.Strings(owned)
	if fmt.Sprint(owned) != fmt.Sprint(topics) {
		t.Fatalf("topics written %v", owned)
	}
}

// countingHandler counts log messages by text.
type countingHandler struct {
	slog.Handler
	mu     sync.Mutex
	counts map[string]int
}

func (h *countingHandler) Handle(ctx context.Context, r slog.Record) error {
	h.mu.Lock()
	h.counts[r.Message]++
	h.mu.Unlock()
	return h.Handler.Handle(ctx, r)
}

func (h *countingHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *countingHandler) count(msg string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.counts[msg]
}

// rejectOnce is a DeferredSink that accepts every record but reports offset
// reject as *sdk.Rejected the first time it sees it, and counts it as
// handled (its Durable passes over it), as the contract allows.
type rejectOnce struct {
	*deferSink
	reject   int64
	rejected bool
}

func (s *rejectOnce) Consume(ctx context.Context, batch []sdk.Record) error {
	if err := s.deferSink.Consume(ctx, batch); err != nil {
		return err
	}
	for _, r := range batch {
		if r.Offset == s.reject && !s.rejected {
			s.rejected = true
			return &sdk.Rejected{Records: []sdk.Rejection{{Record: r, Err: fmt.Errorf("unwritable")}}}
		}
	}
	return nil
}

// TestDeferredSinkRejectedWithoutDeadLetterTopicHoldsCommits: with no
// dead_letter_topic, a record a DeferredSink rejected is never committed
// past, although the sink skips it when the batch is redelivered and
// reports everything durable; the status says why.
func TestDeferredSinkRejectedWithoutDeadLetterTopicHoldsCommits(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "d", jsonValues("n", 20)...)
	const group = "pico-connectors-hold"
	sink := &rejectOnce{deferSink: newDeferSink(newStore()), reject: 7}
	tr := status.New("sink", "hold", nil)
	r := run(t, Config{Key: "hold", Topics: []definition.Topics{{Topic: definition.Route{Literal: "d"}, BatchLength: 5, PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, CommitInterval: 20 * time.Millisecond, RetryDelay: 10 * time.Millisecond})
	testwait.For(t, time.Minute, "all 20 records accepted", func() bool { n, _, _ := sink.state(); return n == 20 })
	testwait.For(t, time.Minute, "offset 7 committed", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["d"] == 7 })
	_, calls, _ := sink.state()
	testwait.For(t, time.Minute, "five more Durable calls", func() bool { _, c, _ := sink.state(); return c >= calls+5 })
	if offs := committed(t, b, group); offs["d"] != 7 {
		t.Fatalf("committed %v, want 7: never past the rejected record", offs)
	}
	snap := tr.Snapshot()
	if snap.Status != status.Error || !strings.Contains(snap.LastError, "no dead_letter_topic") {
		t.Fatalf("status %s, last error %q: want Error naming dead_letter_topic", snap.Status, snap.LastError)
	}
	r.stop(t)
	if offs := committed(t, b, group); offs["d"] != 7 {
		t.Fatalf("committed %v after stop, want 7", offs)
	}
}
