package sinkloop

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
)

// TestCommitsAreSpaced consumes 300 small batches for about a second and
// checks the offset commits the broker receives: every record committed in
// the end, consecutive commits at least commitSpacing apart (a commit after
// every batch came 4 ms after the one before), and not much further apart.
func TestCommitsAreSpaced(t *testing.T) {
	b := startBroker(t)
	const topic, group, n = "spaced", "spaced-group", 3000
	produceMany(t, b, topic, n)

	var mu sync.Mutex
	var at []time.Time
	c := b.Cluster()
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		if req.(*kmsg.OffsetCommitRequest).Group == group {
			mu.Lock()
			at = append(at, time.Now())
			mu.Unlock()
		}
		return nil, nil, false
	})
	sink := &recSink{inside: func(int) { time.Sleep(3 * time.Millisecond) }}
	r := run(t, Config{Topics: []definition.Topics{{Topic: definition.Route{Literal: topic}, Schema: "json", BatchLength: 10, PollInterval: "1s"}},
		Sink: sink, BootstrapServers: b.Addr(), GroupID: group})
	testwait.For(t, time.Minute, "every record committed", func() bool {
		got, err := fetchCommitted(b, group)
		return err == nil && got[topic] == n
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(at) < 5 {
		// About a second of batches gives 10 commits 100 ms apart.
		t.Fatalf("%d commits for 300 batches of 3 ms each; want at least 5, one per commitSpacing (%v)", len(at), commitSpacing)
	}
	for i := 1; i < len(at); i++ {
		// The broker's clock: a commit's request arrives at least
		// commitSpacing after the one before it was answered.
		if gap := at[i].Sub(at[i-1]); gap < commitSpacing-5*time.Millisecond {
			t.Fatalf("commit %d came %v after the one before it (%d commits in all); want at least %v", i+1, gap, len(at), commitSpacing)
		}
	}
	t.Logf("%d commits for 300 batches, %v from the first to the last", len(at), at[len(at)-1].Sub(at[0]))
}

// TestFailedCommitIsRetried fails the broker's answers to the first three
// commits of the last offset, and no more records come: the
// committer must retry on its own (without the retry, nothing kicked it
// again until the next record, and the offsets stayed uncommitted).
func TestFailedCommitIsRetried(t *testing.T) {
	b := startBroker(t)
	const topic, group, n, fails = "retried", "retried-group", 50, 3
	produceMany(t, b, topic, n)

	var mu sync.Mutex
	var failed, passed int
	c := b.Cluster()
	c.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.OffsetCommitRequest)
		if r.Group != group {
			return nil, nil, false
		}
		// Only the commit of the last offset fails: no later batch comes
		// to carry it again, so only a retry of its own commits it.
		final := false
		for _, rt := range r.Topics {
			for _, rp := range rt.Partitions {
				final = final || rp.Offset == n
			}
		}
		if !final {
			return nil, nil, false
		}
		mu.Lock()
		defer mu.Unlock()
		if failed == fails {
			passed++
			return nil, nil, false
		}
		failed++
		// A per-partition error the client hands back as it is, without
		// a rejoin or a retry of its own.
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		resp.Version = r.Version
		for _, rt := range r.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = 12 // OFFSET_METADATA_TOO_LARGE
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	sink := &recSink{}
	r := run(t, Config{Topics: []definition.Topics{{Topic: definition.Route{Literal: topic}, Schema: "json", BatchLength: n, PollInterval: "100ms"}},
		Sink: sink, BootstrapServers: b.Addr(), GroupID: group})
	testwait.For(t, 30*time.Second, "every record committed after the failed commits", func() bool {
		got, err := fetchCommitted(b, group)
		return err == nil && got[topic] == n
	})
	mu.Lock()
	f, p := failed, passed
	mu.Unlock()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if f != fails || p == 0 {
		t.Fatalf("%d commits failed and %d passed; want %d failed, then one passed", f, p, fails)
	}
	if got := len(sink.ok); got != n {
		t.Fatalf("the sink took %d records, want %d", got, n)
	}
}

// produceMany writes n small JSON records to topic in one ProduceSync.
func produceMany(t *testing.T, b *broker.Broker, topic string, n int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, 0, n)
	for _, v := range jsonValues("n", n) {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte(v)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}
