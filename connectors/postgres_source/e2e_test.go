package postgressource

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// End to end through the runtime's source loop into the embedded broker,
// routed by a column with the field strategy, then resumed from the state
// the loop saved.
func TestEndToEndBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the librdkafka producer")
	}
	db := newDB(t)
	db.exec(`CREATE TABLE orders (id int PRIMARY KEY, tenant text, amount numeric)`)
	opt := db.cdcOptions("orders")
	opt.IncludeMetadata = true
	b := sdktest.Broker(t)
	topics := []definition.Topics{{
		Topic:  definition.Route{Strategy: "field", Path: "tenant", Template: "orders.{value}"},
		Schema: "json", BatchLength: 1000, LingerTime: "5ms", CreateTopics: true,
	}}
	src := open(t, opt, nil)
	run := sdktest.RunSource(t, b, src, topics, nil)
	db.exec(`INSERT INTO orders SELECT i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END, i * 1.5 FROM generate_series(1, 100) i`)
	recs := sdktest.WaitTopic(t, b, "orders.a", 50)
	sdktest.WaitTopic(t, b, "orders.b", 50)
	if got := string(recs[0].Key); got != `{"id":2}` {
		t.Errorf("key %s", got)
	}
	v := decode(t, sdk.Message{Payload: recs[0].Value})
	if fmt.Sprintf("%v %v %v %v %v", v["id"], v["tenant"], v["amount"], v["__op"], v["__table"]) != "2 a 3.0 insert public.orders" {
		t.Errorf("value %s: %v", recs[0].Value, fmt.Sprintf("%v %v %v %v %v", v["id"], v["tenant"], v["amount"], v["__op"], v["__table"]))
	}
	sdktest.Eventually(t, 10*time.Second, func() error {
		if run.Store.Get(run.Key) == nil {
			return fmt.Errorf("no state saved yet")
		}
		return nil
	})
	if err := run.Stop(); err != nil && err != context.Canceled {
		t.Fatal(err)
	}
	st := run.Store.Get(run.Key)

	db.exec(`INSERT INTO orders VALUES (101, 'a', 1)`)
	src2 := open(t, opt, st)
	run2 := sdktest.RunSource(t, b, src2, topics, run.Store)
	recs = sdktest.WaitTopic(t, b, "orders.a", 51)
	if got := string(recs[len(recs)-1].Key); got != `{"id":101}` {
		t.Errorf("after resume, last key %s", got)
	}
	time.Sleep(300 * time.Millisecond)
	if n := b.HighWatermark("orders.a"); n != 51 {
		t.Errorf("orders.a has %d records after resume, want 51 (no re-delivery)", n)
	}
	run2.Stop()
}

// memSource replays fixed batches; it measures the runtime's producing
// limit for the same records the CDC source produced.
type memSource struct {
	batches []sdk.Batch
	i       int
}

func (m *memSource) Poll(ctx context.Context) (sdk.Batch, error) {
	if m.i >= len(m.batches) {
		<-ctx.Done()
		return sdk.Batch{}, ctx.Err()
	}
	return m.batches[m.i], nil
}

func (m *memSource) Open(context.Context, []byte) error { return nil }

func (m *memSource) OnBatchResult(_ context.Context, r sdk.Result) error {
	if r == sdk.Ack {
		m.i++
	}
	return nil
}

func (m *memSource) Close(context.Context) error { return nil }

// BenchmarkCDCEndToEnd measures, on the same WAL in the same run: the raw
// peek-and-parse rate, the CDC source into the embedded broker through the
// runtime's source loop, and the loop producing the same records from
// memory (the producer's limit).
func BenchmarkCDCEndToEnd(b *testing.B) {
	db, opt := benchTable(b)
	pristine := opt.ReplicationSlot
	topics := []definition.Topics{{Topic: definition.Route{Literal: "ev"}, Schema: "json", BatchLength: 10000, LingerTime: "5ms", CreateTopics: true}}
	var rawT, e2eT, streamT, prodT time.Duration
	var recorded []sdk.Batch
	for i := 0; i < b.N; i++ {
		// Raw peek-and-parse.
		slot := fmt.Sprintf("rawe_%s_%d", db.tag, i)
		copySlot(b, db, pristine, slot)
		rawT += rawPass(b, db, slot, opt)
		db.exec(`SELECT pg_drop_replication_slot('` + slot + `')`)

		// Source → broker, with each reader.
		for _, reader := range []string{readerPeek, readerStream} {
			o := opt
			o.CDCReader = postgressourceconfig.CDCReader(reader)
			o.ReplicationSlot = fmt.Sprintf("e2e_%s_%s_%d", reader, db.tag, i)
			o.CreateSlot = false
			copySlot(b, db, pristine, o.ReplicationSlot)
			s, err := newSource(o, testEnv())
			if err != nil {
				b.Fatal(err)
			}
			br := sdktest.Broker(b)
			var src sdk.Source = s
			if i == 0 && reader == readerPeek {
				src = &recordingSource{Source: s, out: &recorded}
			}
			t0 := time.Now()
			run := sdktest.RunSource(b, br, src, topics, nil)
			waitHW(b, br, "ev", benchRows)
			if reader == readerPeek {
				e2eT += time.Since(t0)
			} else {
				streamT += time.Since(t0)
			}
			run.Stop()
			db.exec(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '` + o.ReplicationSlot + `' AND active_pid IS NOT NULL`)
			sdktest.WaitFor(b, 15*time.Second, "the slot to be inactive", func() bool {
				return db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = '`+o.ReplicationSlot+`' AND active`) == "0"
			})
			db.exec(`SELECT pg_drop_replication_slot('` + o.ReplicationSlot + `')`)
			br.Close()
		}

		// The same records from memory.
		br2 := sdktest.Broker(b)
		t0 := time.Now()
		run2 := sdktest.RunSource(b, br2, &memSource{batches: recorded}, topics, nil)
		waitHW(b, br2, "ev", benchRows)
		prodT += time.Since(t0)
		run2.Stop()
		br2.Close()
	}
	n := float64(b.N * benchRows)
	raw, e2e, prod := n/rawT.Seconds(), n/e2eT.Seconds(), n/prodT.Seconds()
	b.ReportMetric(raw, "raw-rows/s")
	b.ReportMetric(e2e, "e2e-rows/s")
	b.ReportMetric(prod, "producer-rows/s")
	b.ReportMetric(e2e/min(raw, prod), "e2e/min(raw,producer)")
	b.ReportMetric(n/streamT.Seconds(), "e2e-stream-rows/s")
}

type recordingSource struct {
	*Source
	out *[]sdk.Batch
}

func (r *recordingSource) Poll(ctx context.Context) (sdk.Batch, error) {
	b, err := r.Source.Poll(ctx)
	if len(b.Messages) > 0 {
		*r.out = append(*r.out, b)
	}
	return b, err
}

func waitHW(b *testing.B, br interface{ HighWatermark(string) int64 }, topic string, n int64) {
	deadline := time.Now().Add(2 * time.Minute)
	for br.HighWatermark(topic) < n {
		if time.Now().After(deadline) {
			b.Fatalf("topic %s has %d of %d records", topic, br.HighWatermark(topic), n)
		}
		time.Sleep(2 * time.Millisecond)
	}
}
