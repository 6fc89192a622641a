package sinkloop

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/runtime/transform"
	"github.com/picomq/pico-connectors/sdk"
)

// rejectEvery returns a fail func that rejects every record whose offset
// is a multiple of n.
func rejectEvery(n int64) func(int, []sdk.Record) error {
	return func(_ int, batch []sdk.Record) error {
		var rej sdk.Rejected
		for _, r := range batch {
			if r.Offset%n == 0 {
				rej.Records = append(rej.Records, sdk.Rejection{Record: r, Err: fmt.Errorf("offset %d is unwritable", r.Offset)})
			}
		}
		if len(rej.Records) > 0 {
			return &rej
		}
		return nil
	}
}

func readTopic(t *testing.T, b *broker.Broker, topic string) []broker.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

// TestRejectedRecordsGoToTheDeadLetterTopic: a sink rejecting every 10th
// record, a block with dead_letter_topic, and a json topic with invalid
// payloads: the rejected and the invalid records land in the dead-letter
// topic with their key, payload and headers plus the deadletter ones; the
// batches commit; the sink sees every other record once.
func TestRejectedRecordsGoToTheDeadLetterTopic(t *testing.T) {
	b := startBroker(t)
	vals := jsonValues("n", 30)
	vals[7] = `{"broken":`
	produce(t, b, "in", vals...)
	sink := &recSink{fail: rejectEvery(10)}
	tr := status.New("sink", "dlq", nil)
	r := run(t, Config{Key: "dlq", Topics: []definition.Topics{{Topic: definition.Route{Literal: "in"}, BatchLength: 10, PollInterval: "20ms", DeadLetterTopic: "in.dead"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr})
	testwait.For(t, time.Minute, "offset 30 committed", func() bool { o, err := fetchCommitted(b, "pico-connectors-dlq"); return err == nil && o["in"] == 30 })
	r.stop(t)
	dead := readTopic(t, b, "in.dead")
	var got []string
	for _, d := range dead {
		got = append(got, d.Headers[deadletter.HeaderOffset]+":"+d.Headers[deadletter.HeaderStage])
		if d.Headers["h"] != "x" || string(d.Key) != "k" || d.Headers[deadletter.HeaderConnector] != "dlq" || d.Headers[deadletter.HeaderTopic] != "in" ||
			d.Headers[deadletter.HeaderPartition] != "0" || d.Headers[deadletter.HeaderTimestamp] == "" || d.Headers[deadletter.HeaderError] == "" {
			t.Fatalf("dead letter %+v lacks its own or the deadletter headers", d)
		}
	}
	// The decode failure is found before Consume, the rejections after:
	// each batch's dead letters go out together, decode ones first.
	if fmt.Sprint(got) != "[7:decode 0:consume 10:consume 20:consume]" {
		t.Fatalf("dead letters %v", got)
	}
	if string(dead[0].Value) != `{"broken":` || !strings.Contains(dead[1].Headers[deadletter.HeaderError], "offset 0 is unwritable") {
		t.Fatalf("dead letters %+v", dead)
	}
	if n := tr.Snapshot().Counters.DeadLetters; n != 4 {
		t.Fatalf("DeadLetters counter %d, want 4", n)
	}
	var seen []int64
	for _, c := range sink.calls {
		for _, rec := range c {
			seen = append(seen, rec.Offset)
		}
	}
	want := []int64{}
	for o := int64(0); o < 30; o++ {
		if o != 7 {
			want = append(want, o)
		}
	}
	if fmt.Sprint(seen) != fmt.Sprint(want) {
		t.Fatalf("the sink saw offsets %v, want each but the invalid 7 once", seen)
	}
}

// TestRejectedWithoutDeadLetterTopicFails: without the key, a Rejected is
// a plain error and the batch is redelivered.
func TestRejectedWithoutDeadLetterTopicFails(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "in", jsonValues("n", 3)...)
	calls := 0
	sink := &recSink{fail: func(call int, batch []sdk.Record) error {
		calls = call
		if call <= 2 {
			return rejectEvery(1)(call, batch)
		}
		return nil
	}}
	tr := status.New("sink", "nodlq", nil)
	r := run(t, Config{Key: "nodlq", Topics: []definition.Topics{{Topic: definition.Route{Literal: "in"}, PollInterval: "20ms"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, RetryDelay: 10 * time.Millisecond})
	testwait.For(t, time.Minute, "offset 3 committed", func() bool { o, err := fetchCommitted(b, "pico-connectors-nodlq"); return err == nil && o["in"] == 3 })
	r.stop(t)
	snap := tr.Snapshot()
	if calls != 3 || snap.Counters.Nacked != 2 || snap.Counters.DeadLetters != 0 || !strings.Contains(snap.LastError, "has no dead_letter_topic") {
		t.Fatalf("calls %d, snapshot %+v", calls, snap)
	}
	if b.HighWatermark("in.dead") > 0 {
		t.Fatal("a dead-letter topic was written without the key")
	}
}

// TestFailedDeadLetterProduceFailsTheBatch: while the dead-letter topic
// cannot be written (it does not exist on a broker that does not create
// topics), the batch fails and nothing is committed; once it exists, the
// redelivered batch goes through.
func TestFailedDeadLetterProduceFailsTheBatch(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", SeedTopics: []string{"in"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	produce(t, b, "in", jsonValues("n", 5)...)
	sink := &recSink{fail: rejectEvery(2)}
	tr := status.New("sink", "dlqfail", nil)
	const group = "pico-connectors-dlqfail"
	r := run(t, Config{Key: "dlqfail", Topics: []definition.Topics{{Topic: definition.Route{Literal: "in"}, PollInterval: "20ms", DeadLetterTopic: "in.dead"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond,
		DeliveryTimeout: 500 * time.Millisecond})
	testwait.For(t, time.Minute, "two failed batches", func() bool { return tr.Snapshot().Counters.Nacked >= 2 })
	if o, _ := fetchCommitted(b, group); o["in"] > 0 {
		t.Fatalf("committed %v while the dead letters were not written", o)
	}
	if err := b.CreateTopic("in.dead"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "offset 5 committed", func() bool { o, err := fetchCommitted(b, group); return err == nil && o["in"] == 5 })
	r.stop(t)
	if got := len(readTopic(t, b, "in.dead")); got != 3 {
		t.Fatalf("%d dead letters, want 3 (offsets 0, 2, 4)", got)
	}
	// Only the dead letters were owed: the sink got the batch once (a
	// DeferredSink would skip its rejected records on a redelivery).
	if len(sink.calls) != 1 {
		t.Fatalf("%d Consume calls, want 1", len(sink.calls))
	}
	if !strings.Contains(tr.Snapshot().LastError, "dead-letter") {
		t.Fatalf("last error %q does not name the dead-letter produce", tr.Snapshot().LastError)
	}
}

// TestTransformsRunInSinks: [[transforms]] rewrite each record before the
// plugin sees it; a record a transform fails on goes to the dead-letter
// topic with stage transform.
func TestTransformsRunInSinks(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "tx", `{"a":1,"secret":"s"}`, `[1,2]`, `{"a":3}`)
	sink := &recSink{}
	tr := status.New("sink", "tx", nil)
	r := run(t, Config{Key: "tx", Topics: []definition.Topics{{Topic: definition.Route{Literal: "tx"}, PollInterval: "20ms", DeadLetterTopic: "tx.dead"}},
		Transforms: []sdk.Transform{transform.DeleteFields([]string{"secret"}), transform.AddFields(map[string]any{"via": "sink"}, true)},
		Sink:       sink, BootstrapServers: b.Addr(), Tracker: tr})
	testwait.For(t, time.Minute, "offset 3 committed", func() bool { o, err := fetchCommitted(b, "pico-connectors-tx"); return err == nil && o["tx"] == 3 })
	r.stop(t)
	if got := fmt.Sprint(values(sink.ok, "tx")); got != `[{"a":1,"via":"sink"} {"a":3,"via":"sink"}]` {
		t.Fatalf("the sink got %s", got)
	}
	dead := readTopic(t, b, "tx.dead")
	if len(dead) != 1 || string(dead[0].Value) != `[1,2]` || dead[0].Headers[deadletter.HeaderStage] != "transform" ||
		!strings.Contains(dead[0].Headers[deadletter.HeaderError], "transforms[0]: delete_fields") {
		t.Fatalf("dead letters %+v", dead)
	}
}

// TestTransformErrorWithoutDeadLetterTopicFails: without the key, a
// transform error fails the batch, which is not committed.
func TestTransformErrorWithoutDeadLetterTopicFails(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "tx", `"not an object"`)
	sink := &recSink{}
	tr := status.New("sink", "txfail", nil)
	r := run(t, Config{Key: "txfail", Topics: []definition.Topics{{Topic: definition.Route{Literal: "tx"}, PollInterval: "20ms"}},
		Transforms: []sdk.Transform{transform.AddFields(map[string]any{"x": 1}, true)},
		Sink:       sink, BootstrapServers: b.Addr(), Tracker: tr, RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 10 * time.Millisecond, ErrorAfter: 2})
	testwait.For(t, time.Minute, "status Error", func() bool { return tr.Status() == status.Error })
	r.stop(t)
	if sink.okCount() != 0 || len(sink.calls) != 0 || !strings.Contains(tr.Snapshot().LastError, "add_fields") {
		t.Fatalf("ok %d calls %d last error %q", sink.okCount(), len(sink.calls), tr.Snapshot().LastError)
	}
	if o, _ := fetchCommitted(b, "pico-connectors-txfail"); o["tx"] > 0 {
		t.Fatalf("committed %v", o)
	}
}

func TestCheckTopicsAcrossBlocks(t *testing.T) {
	err := CheckTopics([]definition.Topics{
		{Pattern: `orders\..*`, BatchLength: 100, DeadLetterTopic: "orders.dead"},
		{Topic: definition.Route{Literal: "audit"}, BatchLength: 500, PollInterval: "1s", DeadLetterTopic: "orders.audit.dead"},
		{Topic: definition.Route{Literal: "x"}, BatchLength: 100, DeadLetterTopic: "x"},
	}, "")
	for _, want := range []string{
		"topics[1].batch_length = 500 differs from topics[0].batch_length = 100",
		"give every block the same batch_length, or run one sink per block",
		"topics[1].poll_interval = 1s differs from topics[0].poll_interval = 100ms (the default)",
		`topics[1].dead_letter_topic "orders.audit.dead" is consumed by this sink (topics[0] matches it)`,
		`topics[0].dead_letter_topic "orders.dead" is consumed by this sink (topics[0] matches it)`,
		`topics[2].dead_letter_topic "x" is consumed by this sink (topics[2] matches it)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if err := CheckTopics([]definition.Topics{{Pattern: "a.*", BatchLength: 1000}, {Topic: definition.Route{Literal: "b"}, PollInterval: "100ms"}}, ""); err != nil {
		t.Fatalf("blocks equal after defaults refused: %v", err)
	}
}

// TestDeferredSinkCommitsPastDeadLetteredTail: a DeferredSink never sees a
// record dead-lettered before Consume; when it is the last of its
// partition, the commit still moves past it (else a restart would
// dead-letter it again).
func TestDeferredSinkCommitsPastDeadLetteredTail(t *testing.T) {
	b := startBroker(t)
	produce(t, b, "j", `{"a":1}`, `{"a":2}`, `{"broken`, `also broken`)
	store := newStore()
	sink := newDeferSink(store)
	tr := status.New("sink", "tail", nil)
	r := run(t, Config{Key: "tail", Topics: []definition.Topics{{Topic: definition.Route{Literal: "j"}, PollInterval: "20ms", DeadLetterTopic: "j.dead"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, CommitInterval: 20 * time.Millisecond})
	testwait.For(t, time.Minute, "offset 4 committed", func() bool { o, err := fetchCommitted(b, "pico-connectors-tail"); return err == nil && o["j"] == 4 })
	r.stop(t)
	if m := store.missing("j", 2); len(m) > 0 || len(readTopic(t, b, "j.dead")) != 2 {
		t.Fatalf("missing %v, dead letters %d", m, len(readTopic(t, b, "j.dead")))
	}
}

// TestFatalDeadLetterProducerIsReplaced: the broker answers the first
// dead-letter produce with OUT_OF_ORDER_SEQUENCE_NUMBER, which leaves the
// idempotent producer refusing every record from then on. The batch fails
// once; the loop replaces the producer and the redelivered dead letters
// land, each once (before, every retry failed with "Local: Fatal error"
// and the sink never committed again).
func TestFatalDeadLetterProducerIsReplaced(t *testing.T) {
	b := startBroker(t)
	var fired atomic.Bool
	c := b.Cluster()
	c.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.ProduceRequest)
		if len(r.Topics) != 1 || r.Topics[0].Topic != "in.dead" || fired.Swap(true) {
			return nil, nil, false
		}
		resp := r.ResponseKind().(*kmsg.ProduceResponse)
		resp.Version = r.Version
		st := kmsg.NewProduceResponseTopic()
		st.Topic = r.Topics[0].Topic
		for _, rp := range r.Topics[0].Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.ErrorCode = 45 // OUT_OF_ORDER_SEQUENCE_NUMBER
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
		return resp, nil, true
	})
	produce(t, b, "in", jsonValues("n", 30)...)
	sink := &recSink{fail: rejectEvery(10)}
	tr := status.New("sink", "dlqfatal", nil)
	r := run(t, Config{Key: "dlqfatal", Topics: []definition.Topics{{Topic: definition.Route{Literal: "in"}, BatchLength: 10, PollInterval: "20ms", DeadLetterTopic: "in.dead"}},
		Sink: sink, BootstrapServers: b.Addr(), Tracker: tr, RetryDelay: 10 * time.Millisecond})
	testwait.For(t, time.Minute, "offset 30 committed", func() bool {
		o, err := fetchCommitted(b, "pico-connectors-dlqfatal")
		return err == nil && o["in"] == 30
	})
	r.stop(t)
	if !fired.Load() {
		t.Fatal("no dead-letter produce was failed")
	}
	var got []string
	for _, d := range readTopic(t, b, "in.dead") {
		got = append(got, d.Headers[deadletter.HeaderOffset])
	}
	if fmt.Sprint(got) != "[0 10 20]" {
		t.Fatalf("dead letters at offsets %v, want [0 10 20], each once", got)
	}
	if n := tr.Snapshot().Counters.Nacked; n < 1 {
		t.Fatalf("%d nacks; the failed dead-letter produce should fail its batch once", n)
	}
}
