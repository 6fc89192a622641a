package sinkloop

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// healthyDefer is a deferSink with a sdk.Health condition set by the test.
type healthyDefer struct {
	*deferSink
	healthFlag
}

// TestSinkHealthWhileBatchesFlow: a DeferredSink's Health is read every
// CommitInterval even while batches keep coming (each batch commits the
// Durable offsets and starts that interval again), so background work
// that fails behind successful batches (an Iceberg sink's table commits)
// shows as Error, and Running once it mends.
func TestSinkHealthWhileBatchesFlow(t *testing.T) {
	b := startBroker(t)
	sink := &healthyDefer{deferSink: newDeferSink(newStore())}
	tr := status.New("sink", "flowing", nil)
	r := run(t, Config{Key: "flowing", Topics: []definition.Topics{{Topic: definition.Route{Literal: "hf"}, PollInterval: "5ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, CommitInterval: 300 * time.Millisecond})
	testwait.For(t, time.Minute, "Running", func() bool { return tr.Status() == status.Running })
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	stop, done := make(chan struct{}), make(chan struct{})
	go func() { // a batch every 20 ms, well inside the interval
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			cl.Produce(context.Background(), &kgo.Record{Topic: "hf", Value: []byte(`{"n":1}`)}, nil)
		}
	}()
	halt := sync.OnceFunc(func() { close(stop); <-done })
	defer halt()
	// accepted is the next offset of hf the sink took: it grows while
	// batches flow. Durable calls are no measure of that: the loop makes
	// one per CommitInterval, whatever the batches.
	accepted := func() int64 {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return sink.next[sdk.TopicPartition{Topic: "hf"}]
	}
	testwait.For(t, time.Minute, "batches flowing before the condition", func() bool { return accepted() >= 5 })
	sink.set(errors.New("table commits failing: catalog unreachable"))
	testwait.For(t, time.Minute, "Error with the sink's message while batches flow", func() bool {
		s := tr.Snapshot()
		return s.Status == status.Error && strings.Contains(s.LastError, "catalog unreachable")
	})
	during := accepted()
	sink.set(nil)
	testwait.For(t, time.Minute, "Running again", func() bool { return tr.Status() == status.Running })
	// The batches never stopped: the condition showed and went while
	// they kept coming, not in a pause between them.
	testwait.For(t, time.Minute, "batches still flowing after the condition", func() bool { return accepted() > during+5 })
	halt()
	r.stop(t)
}
