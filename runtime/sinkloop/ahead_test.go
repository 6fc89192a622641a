package sinkloop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

// aheadSink is a DeferredSink that, like the S3 sink finding a file its
// destination already holds, reports records durable before it has been
// handed them: once it has seen offset 0 it reports 10.
type aheadSink struct {
	mu      sync.Mutex
	seen    int64         // next offset accepted
	gate    chan struct{} // Consume of offsets >= 1 waits for it
	durable int64
}

func (s *aheadSink) Open(context.Context) error { return nil }

func (s *aheadSink) Consume(ctx context.Context, batch []sdk.Record) error {
	for _, r := range batch {
		if r.Offset >= 1 {
			select {
			case <-s.gate:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		s.mu.Lock()
		if r.Offset == s.seen {
			s.seen++
		}
		if s.seen >= 1 && s.durable < 10 {
			s.durable = 10 // records 0-9 found already written
		}
		if s.seen > s.durable {
			s.durable = s.seen
		}
		s.mu.Unlock()
	}
	return nil
}

func (s *aheadSink) Durable() map[sdk.TopicPartition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.durable == 0 {
		return nil
	}
	return map[sdk.TopicPartition]int64{{Topic: "ahead", Partition: 0}: s.durable}
}

func (s *aheadSink) Release(context.Context, []sdk.TopicPartition) error { return nil }
func (s *aheadSink) Close(context.Context) error                         { return nil }

// TestDeferredSinkCommitsNoOffsetItDidNotReport: a Durable ahead of what
// was consumed is committed only once consumption reaches it, never as the
// lower of the two, which would be an offset inside what the sink skipped.
func TestDeferredSinkCommitsNoOffsetItDidNotReport(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "ahead", jsonValues("n", 20)...)
	const group = "pico-connectors-ahead"
	sink := &aheadSink{gate: make(chan struct{})}
	r := run(t, Config{Key: "ahead", Topics: []definition.Topics{{Topic: definition.Route{Literal: "ahead"}, BatchLength: 1, PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr(), CommitInterval: 20 * time.Millisecond})
	var open sync.Once
	openGate := func() { open.Do(func() { close(sink.gate) }) }
	t.Cleanup(openGate) // runs before run's own stop
	testwait.For(t, time.Minute, "offset 0 accepted", func() bool { sink.mu.Lock(); defer sink.mu.Unlock(); return sink.seen == 1 })
	// Consumption stands at 1 while Durable says 10: several commit
	// intervals pass; the commit must not be 1.
	deadline := time.Now().Add(500 * time.Millisecond)
	for time.Now().Before(deadline) {
		if o, err := fetchCommitted(b, group); err == nil && o["ahead"] > 0 {
			t.Fatalf("committed %d while consumption stood at 1 and Durable at 10: want no commit inside what the sink skipped", o["ahead"])
		}
		time.Sleep(20 * time.Millisecond)
	}
	openGate()
	testwait.For(t, time.Minute, "offset 20 committed", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["ahead"] == 20 })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
