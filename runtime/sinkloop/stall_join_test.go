package sinkloop

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// slowRelease is a deferSink whose first Release of partitions, once
// armed, takes delay.
type slowRelease struct {
	*deferSink
	armed atomic.Bool
	delay time.Duration
	done  chan struct{}
}

func (s *slowRelease) Release(ctx context.Context, parts []sdk.TopicPartition) error {
	if len(parts) > 0 && s.armed.CompareAndSwap(true, false) {
		time.Sleep(s.delay)
		defer close(s.done)
	}
	return s.deferSink.Release(ctx, parts)
}

// TestJoinWaitPastSessionAnswered: while one member of the group takes
// longer than the session timeout to give its partitions up (its revoke
// runs; librdkafka goes on heartbeating for it), another that has already
// rejoined waits in JoinGroup without heartbeats. Kafka keeps a member
// waiting for its JoinGroup answer in the group; the rebalance completes
// once the slow one rejoins, with both. kfake expired the waiting member
// instead and never answered its JoinGroup: librdkafka waits for that
// answer for max.poll.interval.ms + 3 s (303 s by default), holding no
// partition, so a fleet could consume nothing for minutes (issue 15).
func TestJoinWaitPastSessionAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("a rebalance held past the session timeout")
	}
	b := startBroker(t)
	_, produceAll := seedTopics(t, b, "join", 4)
	produceAll(0, 5)
	cfg := func(id string, s sdk.Sink, tr *status.Tracker) Config {
		return Config{Key: "join", InstanceID: id, SessionTimeout: 6 * time.Second, Sink: s, BootstrapServers: b.Addr(), Tracker: tr,
			CommitInterval: 30 * time.Millisecond,
			Topics: []definition.Topics{{Pattern: `join\..*`, BatchLength: 7, PollInterval: "20ms",
				// Eager: every member gives up all its partitions before it
				// rejoins, so the slow one holds the rebalance open.
				Properties: map[string]string{"topic.metadata.refresh.interval.ms": "500", "partition.assignment.strategy": "roundrobin"}}}}
	}
	store := newStore()
	fast := status.New("sink", "join", nil)
	slow := status.New("sink", "join", nil)
	sink := &slowRelease{deferSink: newDeferSink(store), delay: 12 * time.Second, done: make(chan struct{})}
	run(t, cfg("rt-slow", sink, slow))
	run(t, cfg("rt-fast", newDeferSink(store), fast))
	testwait.For(t, time.Minute, "the two members sharing the partitions", func() bool {
		return len(fast.Placement().Partitions) > 0 && len(slow.Placement().Partitions) > 0 &&
			len(fast.Placement().Partitions)+len(slow.Placement().Partitions) == 4
	})
	// A topic that matches: both rejoin; the slow member's revoke takes
	// twice the session timeout.
	sink.armed.Store(true)
	produce(t, b, "join.x", jsonValues("x", 1)...)
	select {
	case <-sink.done:
	case <-time.After(time.Minute):
		t.Fatal("no revoke on the slow member")
	}
	testwait.For(t, time.Minute, "both members holding partitions again after the slow revoke", func() bool {
		return len(fast.Placement().Partitions) > 0 && len(slow.Placement().Partitions) > 0
	})
	t.Logf("after the slow revoke: rt-fast %v, rt-slow %v", fast.Placement().Partitions, slow.Placement().Partitions)
}
