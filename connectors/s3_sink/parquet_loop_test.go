package s3sink

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// dlqSetup starts the S3 server and a broker with the topics orders and
// orders.dlq, and a client of it.
func dlqSetup(t *testing.T) (*s3test.Server, *broker.Broker, *kgo.Client) {
	t.Helper()
	srv := s3test.Start(t)
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true, SeedTopics: []string{"orders", "orders.dlq"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return srv, b, cl
}

// deadLetters reads n records of the dead-letter topic, each as show
// makes it of its headers and value, sorted.
func deadLetters(t *testing.T, addr, topic string, n int, show func(h map[string]string, v []byte) string) []string {
	t.Helper()
	dlq, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	defer dlq.Close()
	var dead []string
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for len(dead) < n && ctx.Err() == nil {
		dlq.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			h := map[string]string{}
			for _, x := range r.Headers {
				h[x.Key] = string(x.Value)
			}
			dead = append(dead, show(h, r.Value))
		})
	}
	sort.Strings(dead)
	return dead
}

// TestParquetDeadLetters runs the sink loop over records two of which do
// not fit the columns. Without a dead_letter_topic the batch fails with the
// offset, column and field named and nothing is committed past the bad
// record, even though the sink uploads the good ones on stop; a second run
// with a dead_letter_topic finds that upload in the bucket, rejects the two
// records again and the loop sends them to the dead-letter topic: every
// record is in the bucket or the dead-letter topic, none in both.
func TestParquetDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs librdkafka through the sink loop; skipped with -short")
	}
	srv, b, cl := dlqSetup(t)
	bad := map[int64]bool{3: true, 11: true}
	var recs []*kgo.Record
	for i := int64(0); i < 20; i++ {
		v := fmt.Sprintf(`{"id": %d, "name": "n%d"}`, i, i)
		if bad[i] {
			v = fmt.Sprintf(`{"name": "n%d"}`, i)
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Value: []byte(v)})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	newParquetSink := func() *Sink {
		o := defaultOptions()
		o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
		o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.IncludeMetadata = false
		parquetOpts([]columnSpec{{Name: "id", Type: "int64"}, {Name: "name", Type: "string"}}, "zstd")(&o)
		return newSink(o, sdk.Env{Key: "orders_s3", Logger: sdktest.Env(t).Logger, Metrics: sdk.DiscardMetrics})
	}
	block := definition.Topics{Pattern: `^orders$`, Schema: "json", BatchLength: 50, PollInterval: "20ms"}

	// 1. No dead-letter topic.
	tr := status.New(string(sdk.KindSink), "orders_s3", nil)
	stop := runLoop(t, b, []definition.Topics{block}, newParquetSink(), tr)
	sdktest.WaitFor(t, time.Minute, "the batch to fail", func() bool { return strings.Contains(tr.Snapshot().LastError, "no dead_letter_topic") })
	msg := tr.Snapshot().LastError
	for _, want := range []string{"orders/0@3", "column id (int64)", "payload field id is missing"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not name %q: %s", want, msg)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if c := tr.Snapshot().Counters; c.Committed > 3 {
		t.Fatalf("%d records committed past the rejected offset 3", c.Committed)
	}

	// 2. With a dead-letter topic.
	block.DeadLetterTopic = "orders.dlq"
	tr = status.New(string(sdk.KindSink), "orders_s3", nil)
	stop = runLoop(t, b, []definition.Topics{block}, newParquetSink(), tr)
	sdktest.WaitFor(t, time.Minute, "two dead letters", func() bool { return tr.Snapshot().Counters.DeadLetters >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	dead := deadLetters(t, b.Addr(), "orders.dlq", 2, func(h map[string]string, v []byte) string {
		return h[deadletter.HeaderOffset] + " " + h[deadletter.HeaderStage] + " " + h[deadletter.HeaderError] + " " + string(v)
	})
	want := []string{
		`11 consume column id (int64): payload field id is missing and the column is not optional {"name": "n11"}`,
		`3 consume column id (int64): payload field id is missing and the column is not optional {"name": "n3"}`,
	}
	if strings.Join(dead, "\n") != strings.Join(want, "\n") {
		t.Fatalf("dead letters:\n%s\nwant\n%s", strings.Join(dead, "\n"), strings.Join(want, "\n"))
	}
	tabs := parquetObjects(t, srv, "")
	var ids []string
	for _, tb := range tabs {
		for _, r := range tb.rows {
			ids = append(ids, r[0])
		}
	}
	if got := strings.Join(ids, ","); got != "0,1,2,4,5,6,7,8,9,10,12,13,14,15,16,17,18,19" {
		t.Fatalf("ids in the bucket: %s (objects %d)", got, len(tabs))
	}
}
