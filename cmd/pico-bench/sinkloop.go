package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/plugin"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/status"
)

// noopSink accepts every batch and notes when the first one arrived, how
// big it was, and when the n-th record came.
type noopSink struct {
	n int

	mu         sync.Mutex
	got        int
	firstBatch int
	first      time.Time
	done       time.Time
	reached    chan struct{}
}

func (s *noopSink) Open(context.Context) error  { return nil }
func (s *noopSink) Close(context.Context) error { return nil }

func (s *noopSink) Consume(_ context.Context, batch []plugin.Record) error {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.got == 0 {
		s.first, s.firstBatch = now, len(batch)
	}
	s.got += len(batch)
	if s.got >= s.n && s.done.IsZero() {
		s.done = now
		close(s.reached)
	}
	return nil
}

// sinkLoopRun runs the sink loop with a no-op sink over topic until n
// records were consumed and returns how many records it timed and the time
// they took, counted from the first Consume (so the records of the first
// batch, polled before the clock starts, are left out).
func sinkLoopRun(addr, topic string, n, batch int) (int, time.Duration, error) {
	sink := &noopSink{n: n, reached: make(chan struct{})}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- sinkloop.Run(ctx, sinkloop.Config{Key: "bench", Topics: []definition.Topics{{Topic: definition.Route{Literal: topic}, Schema: "json", BatchLength: batch}}, Properties: consumerProps,
			Sink: sink, BootstrapServers: addr, GroupID: fmt.Sprintf("bench-loop-%d", time.Now().UnixNano()), Logger: quiet(),
			Tracker: status.New("sink", "bench", nil)})
	}()
	select {
	case <-sink.reached:
	case err := <-done:
		return 0, 0, fmt.Errorf("sink loop stopped early: %v", err)
	case <-time.After(3 * time.Minute):
		return 0, 0, fmt.Errorf("sink loop: %d of %d records after 3 minutes", sink.got, n)
	}
	cancel()
	if err := <-done; err != nil {
		return 0, 0, fmt.Errorf("sink loop: %w", err)
	}
	return n - sink.firstBatch, sink.done.Sub(sink.first), nil
}

// sinkLoopRows measures the sink loop's own overhead: a no-op sink through
// it against a bare confluent-kafka-go consumer on the same topic and
// broker, interleaved rounds.
func (b *bench) sinkLoopRows() []row {
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	const n, size, rounds, batch = 300_000, 100, 5, 1000
	topic := "loopbench"
	b.logf("sinkloop: writing %d records of %d B to %s", n, size, topic)
	b.must(fill(br.Addr(), []string{topic}, n, size))
	// Interleaved rounds, so machine noise hits both alike; rates over
	// the sums.
	var bareN, loopN int
	var bareT, loopT time.Duration
	for i := 0; i < rounds; i++ {
		t, err := bareConsume(br.Addr(), topic, n)
		b.must(err)
		ln, lt, err := sinkLoopRun(br.Addr(), topic, n, batch)
		b.must(err)
		b.logf("sinkloop: round %d: bare consumer %.0f rec/s, sink loop with a no-op sink %.0f rec/s", i+1, float64(n-1)/t.Seconds(), float64(ln)/lt.Seconds())
		bareN, bareT = bareN+n-1, bareT+t
		loopN, loopT = loopN+ln, loopT+lt
	}
	bare, loop := float64(bareN)/bareT.Seconds(), float64(loopN)/loopT.Seconds()
	return []row{{Name: "Sink loop, no-op sink (100 B JSON)", Value: loop, Unit: "rec/s",
		BaseName: "bare confluent-kafka-go consumer", BaseValue: bare, BaseUnit: "rec/s", Ratio: loop / bare,
		Note: fmt.Sprintf("same topic and embedded broker, %d interleaved rounds of %dk, batch_length %d, JSON checked, fetch.queue.backoff.ms=10 for both", rounds, n/1000, batch)}}
}
