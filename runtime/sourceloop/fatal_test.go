package sourceloop

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
)

// TestFatalProducerStopsTheLoop: the broker answers the fourth produce with
// OUT_OF_ORDER_SEQUENCE_NUMBER, which leaves the idempotent producer in a
// fatal state where it refuses every record. The loop nacks the batch and
// returns ErrProducerFatal at once (before, it nacked with back-off for
// minutes, status Running, until ErrTooManyNacks); a new run, with new
// producers, goes on from the saved state, and the topic holds every
// record in order, with at most the nacked batch repeated.
func TestFatalProducerStopsTheLoop(t *testing.T) {
	b := startBroker(t, broker.Config{})
	var produces atomic.Int64
	b.Cluster().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		if produces.Add(1) != 4 {
			return nil, nil, false
		}
		r := req.(*kmsg.ProduceRequest)
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		resp.Version = r.Version
		for _, rt := range r.Topics {
			st := kmsg.NewProduceResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewProduceResponseTopicPartition()
				sp.Partition = rp.Partition
				sp.ErrorCode = 45 // OUT_OF_ORDER_SEQUENCE_NUMBER
				st.Partitions = append(st.Partitions, sp)
			}
			resp.Topics = append(resp.Topics, st)
		}
		return resp, nil, true
	})
	const limit = 1000
	src := &seqSource{batch: 50, limit: limit}
	store := &memStore{}
	cfg := Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: store, BootstrapServers: b.Addr()}
	r := start(t, cfg)
	var err error
	select {
	case err = <-r.done:
		close(r.done)
	case <-time.After(30 * time.Second):
		t.Fatalf("the loop still runs 30 s after it started, its fourth produce failed: status %s, %d produce requests, %d acks, %d nacks, last error %q",
			r.tr.Status(), produces.Load(), r.tr.Counters.Acked.Load(), r.tr.Counters.Nacked.Load(), r.tr.Snapshot().LastError)
	}
	if !errors.Is(err, ErrProducerFatal) {
		t.Fatalf("Run = %v, want ErrProducerFatal", err)
	}
	if r.tr.Status() != status.Error || r.tr.Counters.Nacked.Load() != 1 || r.tr.Counters.ConsecNacks.Load() != 1 || r.tr.Counters.LastBatchAt.Load() == 0 {
		t.Fatalf("status %s with %d nacks; want Error after one", r.tr.Status(), r.tr.Counters.Nacked.Load())
	}

	cfg.Tracker = nil
	r2 := start(t, cfg)
	testwait.For(t, time.Minute, "every record saved by the new run", func() bool { return store.get("seq") == "1000" })
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	// The nacked batch may have been delivered in part (its records can
	// span produce requests): those are written again, and nothing else.
	got := seqs(t, readTopic(t, b, "seq"))
	next, again := 0, 0
	for i, n := range got {
		switch {
		case n == next:
			next++
		case n < next && n >= next-src.batch:
			again++
		default:
			t.Fatalf("record %d has seq %d, want %d (or a repeat of the batch before it)", i, n, next)
		}
	}
	if next != limit || again > src.batch {
		t.Fatalf("topic has seqs 0 to %d and %d repeats; want 0 to %d and at most one batch (%d) repeated", next-1, again, limit-1, src.batch)
	}
}
