package sdktest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/sdk"
)

// newDeferred builds the sink for a DeferredSink subtest, or skips the
// subtest when the sink is a plain sdk.Sink.
func (h SinkHarness) newDeferred(t *testing.T) sdk.DeferredSink {
	t.Helper()
	s := h.newSink(t)
	d, ok := s.(sdk.DeferredSink)
	if !ok {
		_ = s.Close(context.Background())
		h.notRun.skip(t, "the sink is not a sdk.DeferredSink: its commits follow Consume, which the other cases check")
	}
	return d
}

// deferredSkips hands a DeferredSink a batch that repeats records it has
// accepted, as the runtime does after a failure or a rebalance: the
// destination must hold every record exactly once.
func (h SinkHarness) deferredSkips(t *testing.T) {
	h.needWritten(t)
	s := h.newDeferred(t)
	d := &SinkDriver{T: t, Sink: s, Timeout: h.Timeout}
	t.Cleanup(d.Close)
	if err := d.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	n := h.BatchSize
	sent := Records("sinktest", 0, 3*n)
	steps := [][]sdk.Record{sent[:2*n], sent[n : 3*n], sent[:n]}
	for i, b := range steps {
		if err := d.Consume(b); err != nil {
			t.Fatalf("Consume(step %d, offsets %d-%d): %v", i, b[0].Offset, b[len(b)-1].Offset, err)
		}
	}
	d.Close()
	written := h.Written(t)
	CheckWritten(t, sent, written)
	if dup := duplicates(sent, written); len(dup) > 0 {
		t.Fatalf("a DeferredSink must skip records below the next offset it expects; written more than once: %q", dup)
	}
	if got := s.Durable()[sdk.TopicPartition{Topic: "sinktest"}]; got != int64(3*n) {
		t.Fatalf("after Close, Durable() reports offset %d for sinktest/0, want %d (every record is in the destination)", got, 3*n)
	}
}

func duplicates(sent []sdk.Record, written [][]byte) []string {
	count := map[string]int{}
	for _, w := range written {
		count[string(w)]++
	}
	var out []string
	for _, r := range sent {
		if count[string(r.Payload)] > 1 {
			out = append(out, string(r.Payload))
		}
	}
	return out
}

// killable stands for a process that can die: after kill, its sink gets no
// more calls through it (Consume fails, Close and Release do nothing), and
// Durable keeps answering what it answered at the kill.
type killable struct {
	sdk.DeferredSink
	mu     sync.Mutex
	killed bool
	frozen map[sdk.TopicPartition]int64
	// accepted is one past the highest offset of a successful Consume (0
	// for none): the loop's goroutine raises it, the test reads it meanwhile.
	accepted atomic.Int64
}

var errKilled = errors.New("sinktest: the process was killed")

func (k *killable) Consume(ctx context.Context, batch []sdk.Record) error {
	if k.dead() {
		return errKilled
	}
	if err := k.DeferredSink.Consume(ctx, batch); err != nil {
		return err
	}
	hi := k.accepted.Load()
	for _, r := range batch {
		hi = max(hi, r.Offset+1)
	}
	k.accepted.Store(hi) // the loop calls Consume from one goroutine
	return nil
}

func (k *killable) Durable() map[sdk.TopicPartition]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.killed {
		return k.frozen
	}
	return k.DeferredSink.Durable()
}

func (k *killable) Release(ctx context.Context, parts []sdk.TopicPartition) error {
	if k.dead() {
		return nil
	}
	return k.DeferredSink.Release(ctx, parts)
}

func (k *killable) Close(ctx context.Context) error {
	if k.dead() {
		return nil
	}
	return k.DeferredSink.Close(ctx)
}

// kill freezes Durable and returns what it reported last.
func (k *killable) kill() map[sdk.TopicPartition]int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.frozen = k.DeferredSink.Durable()
	k.killed = true
	return k.frozen
}

// dead reports whether kill was called.
func (k *killable) dead() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.killed
}

// killLosesNothing runs a DeferredSink through the runtime's sink loop,
// kills it (no Close, no final commit beyond what Durable reported) once it
// has accepted a first half of the records, and starts a fresh sink on the
// same destination and consumer group. Every record the loop committed
// before the kill must be in the destination at the kill; after the
// restart and a graceful stop, every record must be there.
func (h SinkHarness) killLosesNothing(t *testing.T) {
	h.needWritten(t)
	h.needLong(t)
	first := &killable{DeferredSink: h.newDeferred(t)}
	const topic, group = "sinktest", "sinktest-kill"
	b, sent := h.seeded(t, topic)
	n := len(sent)

	start := func(s sdk.Sink) (stop func() error, done chan error) {
		ctx, cancel := context.WithCancel(context.Background())
		done = make(chan error, 1)
		go func() {
			done <- sinkloop.Run(ctx, h.loopConfig(t, b, s, topic, group, nil))
		}()
		stopped := false
		var result error
		return func() error {
			if !stopped {
				stopped = true
				cancel()
				select {
				case result = <-done:
				case <-time.After(h.Timeout + 30*time.Second):
					t.Fatalf("the sink loop did not stop")
				}
			}
			return result
		}, done
	}
	wait := func(what string, done chan error, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(h.Timeout)
		for !cond() {
			if time.Now().After(deadline) {
				t.Fatalf("timed out after %v waiting for %s", h.Timeout, what)
			}
			select {
			case err := <-done:
				t.Fatalf("the sink loop stopped while waiting for %s: %v", what, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
	}

	stop1, done1 := start(first)
	wait("the first sink to accept every record", done1, func() bool { return first.accepted.Load() >= int64(n) })
	durable := first.kill()
	atKill := h.Written(t)
	if err := stop1(); err != nil && !errors.Is(err, context.Canceled) {
		t.Logf("the killed loop: %v", err)
	}
	// The killed sink's goroutines may still run, as a dying process's
	// would not: close it once the test is over.
	t.Cleanup(func() { _ = first.DeferredSink.Close(context.Background()) })

	committedAtKill := committedOffset(t, b.Addr(), group, topic)
	if d := durable[sdk.TopicPartition{Topic: topic}]; committedAtKill > d {
		t.Fatalf("the loop committed offset %d but the sink reported only %d durable", committedAtKill, d)
	}
	if lost := missing(sent[:committedAtKill], atKill); len(lost) > 0 {
		t.Fatalf("the sink reported offsets below %d durable and they were committed, but the destination lacks %d of them at the kill: %q",
			committedAtKill, len(lost), lost)
	}
	t.Logf("killed after accepting %d records; %d were durable and committed", n, committedAtKill)

	more := Records(topic, int64(n), h.BatchSize)
	ProduceRecords(t, b, topic, more)
	sent = append(sent, more...)
	s2, err := h.New(t)
	if err != nil {
		t.Fatalf("New after the kill: %v", err)
	}
	d2, ok := s2.(sdk.DeferredSink)
	if !ok {
		t.Fatalf("New returned a %T after a DeferredSink", s2)
	}
	second := &killable{DeferredSink: d2}
	stop2, done2 := start(second)
	wait("the restarted sink to accept every record", done2, func() bool { return second.accepted.Load() >= int64(len(sent)) })
	if err := stop2(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the restarted sink loop: %v", err)
	}
	if c := committedOffset(t, b.Addr(), group, topic); c != int64(len(sent)) {
		t.Fatalf("after the graceful stop the committed offset is %d, want %d: Close must make everything durable", c, len(sent))
	}
	CheckWritten(t, sent, h.Written(t))
}

func missing(sent []sdk.Record, written [][]byte) []string {
	have := map[string]bool{}
	for _, w := range written {
		have[string(w)] = true
	}
	var out []string
	for _, r := range sent {
		if !have[string(r.Payload)] {
			out = append(out, string(r.Payload))
		}
	}
	return out
}

// committedOffset returns the group's committed offset of topic's
// partition 0, or 0 when there is none.
func committedOffset(t *testing.T, addr, group, topic string) int64 {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatalf("admin client: %v", err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return 0 // the group does not exist yet
	}
	if o, ok := res.Lookup(topic, 0); ok && o.Err == nil {
		return o.At
	}
	return 0
}
