package sinkloop

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
)

// fleetCfg is one runtime's sink over the fl.* topics: static membership
// with id, and a short session so that a member stopped for good hands its
// partitions over within seconds.
func fleetCfg(addr, id string, s *deferSink) Config {
	return Config{Key: "fleet", InstanceID: id, SessionTimeout: 6 * time.Second, Sink: s, BootstrapServers: addr, CommitInterval: 30 * time.Millisecond,
		Topics: []definition.Topics{{Pattern: `fl\..*`, BatchLength: 7, PollInterval: "20ms",
			Properties: map[string]string{"topic.metadata.refresh.interval.ms": "500"}}}}
}

// seedTopics returns the topics prefix.0 to prefix.n-1 and a function that
// produces count JSON records of one round to each of them.
func seedTopics(t *testing.T, b *broker.Broker, prefix string, n int) ([]string, func(round, count int)) {
	topics := make([]string, n)
	for i := range topics {
		topics[i] = fmt.Sprintf("%s.%d", prefix, i)
	}
	return topics, func(round, count int) {
		for _, tp := range topics {
			produce(t, b, tp, jsonValues(fmt.Sprintf("%s-%d", tp, round), count)...)
		}
	}
}

// TestFleetSharesPartitions: two loops with the same key and different
// InstanceIDs split the partitions of 8 topics, each one's placement shows
// its share, and together they hold all; once one stops, the other holds
// everything and every record ends up durable exactly once.
func TestFleetSharesPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("group rebalances and a session timeout take seconds")
	}
	b := startBroker(t)
	topics, produceAll := seedTopics(t, b, "fl", 8)
	produceAll(0, 20)
	store := newStore()
	tr1 := status.New("sink", "fleet", nil)
	tr2 := status.New("sink", "fleet", nil)
	c1 := fleetCfg(b.Addr(), "rt-1", newDeferSink(store))
	c1.Tracker = tr1
	c2 := fleetCfg(b.Addr(), "rt-2", newDeferSink(store))
	c2.Tracker = tr2
	r1 := run(t, c1)
	testwait.For(t, time.Minute, "the first loop holding all 8 partitions", func() bool { return len(tr1.Placement().Partitions) == 8 })
	run(t, c2)
	var p1, p2 status.Placement
	testwait.For(t, time.Minute, "the two loops splitting the partitions", func() bool {
		p1, p2 = tr1.Placement(), tr2.Placement()
		return len(p1.Partitions) > 0 && len(p2.Partitions) > 0 && len(p1.Partitions)+len(p2.Partitions) == 8
	})
	all := append(append([]string(nil), p1.Partitions...), p2.Partitions...)
	sort.Strings(all)
	var want []string
	for _, tp := range topics {
		want = append(want, tp+"/0")
	}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Fatalf("placements %v and %v: together %v, want each of %v once", p1.Partitions, p2.Partitions, all, want)
	}
	if !sort.StringsAreSorted(p1.Partitions) || !sort.StringsAreSorted(p2.Partitions) {
		t.Fatalf("placement partitions not sorted: %v, %v", p1.Partitions, p2.Partitions)
	}
	if p1.Generation < 2 || p2.Generation < 1 {
		t.Fatalf("generations %d and %d: the first loop saw at least its assignment and the revoke", p1.Generation, p2.Generation)
	}
	t.Logf("split: rt-1 %v (generation %d), rt-2 %v (generation %d)", p1.Partitions, p1.Generation, p2.Partitions, p2.Generation)
	produceAll(1, 20)
	allDurable := func(end int64) func() bool {
		return func() bool {
			for _, tp := range topics {
				if len(store.missing(tp, end)) > 0 {
					return false
				}
			}
			return true
		}
	}
	testwait.For(t, time.Minute, "every record durable with two members", allDurable(40))
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	// A static member does not leave: its partitions move once its session
	// (6 s here) times out.
	stopped := time.Now()
	testwait.For(t, time.Minute, "the second loop holding all 8 partitions", func() bool { return len(tr2.Placement().Partitions) == 8 })
	t.Logf("the second loop held everything %s after the first stopped (session.timeout.ms 6000)", time.Since(stopped).Round(10*time.Millisecond))
	produceAll(2, 20)
	testwait.For(t, time.Minute, "every record durable after the first stopped", allDurable(60))
	testwait.For(t, time.Minute, "every topic committed to its end", func() bool {
		offs, err := fetchCommitted(b, "pico-connectors-fleet")
		if err != nil {
			return false
		}
		for _, tp := range topics {
			if offs[tp] != 60 {
				return false
			}
		}
		return true
	})
	if d := store.duplicates(); d > 0 {
		t.Fatalf("%d records written twice", d)
	}
}

// TestFleetSameInstanceIDFenced: a second loop given the same InstanceID
// fences the first, which stops with an Error naming runtime.id and, as
// its sink's Close fails too, that failure (ErrClose).
func TestFleetSameInstanceIDFenced(t *testing.T) {
	if testing.Short() {
		t.Skip("group joins take seconds")
	}
	b := startBroker(t)
	produce(t, b, "fl.0", jsonValues("a", 5)...)
	tr1 := status.New("sink", "fleet", nil)
	s1 := newDeferSink(newStore())
	s1.closeErr = errors.New("2 files not uploaded")
	c1 := fleetCfg(b.Addr(), "twin", s1)
	c1.Tracker = tr1
	r1 := run(t, c1)
	testwait.For(t, time.Minute, "the first loop holding fl.0", func() bool { return len(tr1.Placement().Partitions) == 1 })
	c2 := fleetCfg(b.Addr(), "twin", newDeferSink(newStore()))
	run(t, c2)
	var err error
	select {
	case err = <-r1.done:
		close(r1.done)
	case <-time.After(60 * time.Second):
		t.Fatal("the fenced loop did not stop")
	}
	if err == nil || !strings.Contains(err.Error(), `runtime.id "twin"`) || !strings.Contains(err.Error(), "PICOMQ_CONNECTORS_ID") {
		t.Fatalf("fenced loop returned %v, want an error naming runtime.id \"twin\"", err)
	}
	if !errors.Is(err, ErrClose) || !strings.Contains(err.Error(), "2 files not uploaded") {
		t.Fatalf("fenced loop returned %v, want it to report the failed Close (ErrClose) too", err)
	}
	if tr1.Status() != status.Error {
		t.Fatalf("fenced loop status %s, want Error", tr1.Status())
	}
	t.Log(err)
}
