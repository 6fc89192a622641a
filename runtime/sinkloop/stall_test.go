package sinkloop

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

// countPrefix counts the messages logged through h that start with prefix.
func countPrefix(h *countingHandler, prefix string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for msg, c := range h.counts {
		if strings.HasPrefix(msg, prefix) {
			n += c
		}
	}
	return n
}

// TestStrandedWhilePausedResumes: a DeferredSink's partitions stranded by
// a long rebalance while the loop had them paused (a Consume running past
// pauseAfter with the next batch full) are fetched again once the group is
// steady. The broker holds the loop's JoinGroup for twice strandAfter, so
// the join state stays "wait-join" long enough to strand them. Before the
// fix the loop resumed only the partitions it held (none while stranded),
// librdkafka kept the stranded ones paused, and retake read them "again"
// without resuming them: their commits stayed where they were for good, as
// the fleet scenario's did (issue 15).
func TestStrandedWhilePausedResumes(t *testing.T) {
	if testing.Short() {
		t.Skip("a rebalance held for seconds")
	}
	b := startBroker(t)
	topics, produceAll := seedTopics(t, b, "stall", 4)
	produceAll(0, 20)
	store := newStore()
	sink := newDeferSink(store)
	// Armed, the next Consume blocks until the loop cancels it.
	var block atomic.Bool
	blocked := make(chan struct{}, 1)
	sink.consume = func(ctx context.Context, _ []sdk.Record) error {
		if !block.CompareAndSwap(true, false) {
			return nil
		}
		blocked <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	}
	logs := &countingHandler{Handler: testLogger().Handler(), counts: map[string]int{}}
	run(t, Config{Key: "stall", InstanceID: "rt-1", SessionTimeout: 6 * time.Second, Sink: sink, BootstrapServers: b.Addr(),
		CommitInterval: 30 * time.Millisecond, Logger: slog.New(logs),
		Topics: []definition.Topics{{Pattern: `stall\..*`, BatchLength: 7, PollInterval: "20ms",
			Properties: map[string]string{"topic.metadata.refresh.interval.ms": "500"}}}})
	durable := func(end int64, tps ...string) func() bool {
		return func() bool {
			for _, tp := range tps {
				if len(store.missing(tp, end)) > 0 {
					return false
				}
			}
			return true
		}
	}
	testwait.For(t, time.Minute, "the first 20 records of each topic durable", durable(20, topics...))

	// A Consume that blocks with the next batch full: after pauseAfter
	// (1 s) the loop pauses every partition it holds.
	block.Store(true)
	produceAll(1, 30)
	<-blocked
	time.Sleep(2 * time.Second)

	// A new topic that matches makes the loop rejoin; the broker holds
	// that JoinGroup for 4 s, twice strandAfter (a third of 6 s).
	var held atomic.Bool
	b.Cluster().ControlKey(int16(kmsg.JoinGroup), func(kmsg.Request) (kmsg.Response, error, bool) {
		if held.CompareAndSwap(false, true) {
			b.Cluster().SleepControl(func() { time.Sleep(4 * time.Second) })
			b.Cluster().DropControl()
		}
		return nil, nil, false
	})
	produce(t, b, "stall.x", jsonValues("x", 1)...)
	testwait.For(t, time.Minute, "the partitions stranded", func() bool {
		return countPrefix(logs, "the consumer group rebalance has not completed") > 0
	})
	testwait.For(t, time.Minute, "the group steady again", func() bool {
		return countPrefix(logs, "group steady again") > 0
	})
	produceAll(2, 10)
	testwait.For(t, time.Minute, "every record of the stranded partitions durable after the rebalance", durable(60, topics...))
	testwait.For(t, time.Minute, "the new topic's record durable", durable(1, "stall.x"))
	if d := store.duplicates(); d > 0 {
		t.Fatalf("%d records written twice", d)
	}
}
