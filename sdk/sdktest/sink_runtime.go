package sdktest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// watched wraps a sink and records what its Consume calls returned.
type watched struct {
	sdk.Sink
	mu       sync.Mutex
	failures int
	okUpTo   int64 // highest offset of a successful Consume, -1 for none
}

func (w *watched) Consume(ctx context.Context, batch []sdk.Record) error {
	err := w.Sink.Consume(ctx, batch)
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.failures++
		return err
	}
	for _, r := range batch {
		w.okUpTo = max(w.okUpTo, r.Offset)
	}
	return nil
}

func (w *watched) state() (failures int, okUpTo int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.failures, w.okUpTo
}

// runtimeRedelivers runs the sink through the runtime's own sink loop
// (runtime/sinkloop) against the embedded broker: with the destination
// broken from the start, Consume fails and the loop redelivers; once it is
// restored every record reaches the destination.
func (h SinkHarness) runtimeRedelivers(t *testing.T) {
	h.needWritten(t)
	h.needBreak(t)
	h.needLong(t)
	s := h.newSink(t)
	sink := &watched{Sink: s, okUpTo: -1}

	const topic = "sinktest"
	b, sent := h.seeded(t, topic)
	n := len(sent)

	restore := h.Break(t)
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	tr := status.New(string(sdk.KindSink), "sinktest", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sinkloop.Run(ctx, h.loopConfig(t, b, sink, topic, "sinktest-redeliver", tr))
	}()
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(h.Timeout + 30*time.Second):
			t.Fatalf("the sink loop did not stop")
			return nil
		}
	}
	defer stop()

	wait := func(what string, cond func() bool) bool {
		deadline := time.Now().Add(h.Timeout)
		for time.Now().Before(deadline) {
			if cond() {
				return true
			}
			select {
			case err := <-done:
				stopped = true
				t.Fatalf("the sink loop stopped while waiting for %s: %v", what, err)
			case <-time.After(20 * time.Millisecond):
			}
		}
		return false
	}
	// Until a Consume fails (or a buffering sink has accepted everything).
	failed := wait("a failed Consume", func() bool {
		f, ok := sink.state()
		return f > 0 || ok >= int64(n-1)
	})
	if !failed {
		t.Fatalf("within %v of breaking the destination, no Consume failed and not every record was accepted", h.Timeout)
	}
	restore()
	restored = true
	more := Records(topic, int64(n), h.BatchSize)
	ProduceRecords(t, b, topic, more)
	sent = append(sent, more...)
	if !wait("every record", func() bool { _, ok := sink.state(); return ok >= int64(len(sent)-1) }) {
		_, ok := sink.state()
		t.Fatalf("after the destination was restored, Consume succeeded only up to offset %d of %d", ok, len(sent)-1)
	}
	if err := stop(); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("the sink loop: %v", err)
	}
	failures, _ := sink.state()
	if failures > 0 && tr.Snapshot().Counters.Redelivered == 0 {
		t.Errorf("%d Consume calls failed but the loop counts no redelivery", failures)
	}
	t.Logf("%d failed Consume calls, %d redeliveries", failures, tr.Snapshot().Counters.Redelivered)
	CheckWritten(t, sent, h.Written(t))
}

// loopConfig is the runtime's sink loop as the runtime cases run s: topic
// in batches of BatchSize, consumer group group from the start of the
// topic, short retry and commit intervals; tr nil means a new tracker.
func (h SinkHarness) loopConfig(t *testing.T, b *broker.Broker, s sdk.Sink, topic, group string, tr *status.Tracker) sinkloop.Config {
	if tr == nil {
		tr = status.New(string(sdk.KindSink), "sinktest", nil)
	}
	return sinkloop.Config{
		Key: "sinktest", GroupID: group,
		Topics: []definition.Topics{{Topic: definition.Route{Literal: topic}, Schema: "json",
			BatchLength: h.BatchSize, PollInterval: "50ms"}},
		Sink: s, BootstrapServers: b.Addr(), Logger: Env(t).Logger, Tracker: tr,
		RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond, CommitInterval: 50 * time.Millisecond,
		CloseTimeout: h.Timeout,
		Properties:   map[string]string{"auto.offset.reset": "earliest"},
	}
}

// seeded starts an embedded broker, stopped when the test ends, whose topic
// holds the h.BatchSize*h.Batches records of Records; it returns the broker
// and the records.
func (h SinkHarness) seeded(t *testing.T, topic string) (*broker.Broker, []sdk.Record) {
	b := Broker(t, topic)
	sent := Records(topic, 0, h.BatchSize*h.Batches)
	ProduceRecords(t, b, topic, sent)
	return b, sent
}

// runtimeCommits needs no hook: through the runtime's own sink loop
// against the embedded broker, the sink consumes every record of a topic,
// stops gracefully, and the loop's commit is then at the end of the topic.
func (h SinkHarness) runtimeCommits(t *testing.T) {
	h.needLong(t)
	s := h.newSink(t)
	sink := &watched{Sink: s, okUpTo: -1}
	const topic, group = "sinktest", "sinktest-commits"
	b, sent := h.seeded(t, topic)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- sinkloop.Run(ctx, h.loopConfig(t, b, sink, topic, group, nil))
	}()
	deadline := time.Now().Add(h.Timeout)
	for {
		if _, ok := sink.state(); ok >= int64(len(sent)-1) {
			break
		}
		if time.Now().After(deadline) {
			failures, ok := sink.state()
			t.Fatalf("within %v the sink accepted records up to offset %d of %d (%d Consume calls failed)", h.Timeout, ok, len(sent)-1, failures)
		}
		select {
		case err := <-done:
			t.Fatalf("the sink loop stopped before every record was consumed: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("the sink loop's graceful stop: %v", err)
		}
	case <-time.After(h.Timeout + 30*time.Second):
		t.Fatal("the sink loop did not stop")
	}
	if got := committedOffset(t, b.Addr(), group, topic); got != int64(len(sent)) {
		t.Fatalf("after a graceful stop the group's commit is at offset %d, want %d (the end of the topic)", got, len(sent))
	}
	if h.Written != nil {
		CheckWritten(t, sent, h.Written(t))
	}
}
