package s3sink

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// benchCount reads the number of records for an end-to-end benchmark from
// PICO_BENCH_RECORDS, or returns def.
func benchCount(def int) int {
	if v, err := strconv.Atoi(os.Getenv("PICO_BENCH_RECORDS")); err == nil && v > 0 {
		return v
	}
	return def
}

// produceBench writes n JSON records of size bytes to topic.
func produceBench(b *testing.B, addr, topic string, n, size int) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(5*time.Millisecond),
		kgo.ProducerBatchMaxBytes(1<<20), kgo.MaxBufferedRecords(100_000))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	pad := strings.Repeat("x", size)
	ctx := context.Background()
	errc := make(chan error, 1)
	for i := 0; i < n; i++ {
		v := fmt.Sprintf(`{"n":%d,"pad":"`, i)
		v += pad[:max(0, size-len(v)-2)] + `"}`
		cl.Produce(ctx, &kgo.Record{Topic: topic, Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				select {
				case errc <- err:
				default:
				}
			}
		})
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	select {
	case err := <-errc:
		b.Fatal(err)
	default:
	}
}

// bareConsume reads n records of topic with a plain confluent-kafka-go
// consumer in a fresh group, and returns the time it took.
func bareConsume(b *testing.B, addr, topic string, n int) time.Duration {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{
		"bootstrap.servers": addr, "group.id": fmt.Sprintf("bare-%d", time.Now().UnixNano()),
		"auto.offset.reset": "earliest", "enable.auto.commit": false, "enable.auto.offset.store": false,
	})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	if err := c.Subscribe(topic, nil); err != nil {
		b.Fatal(err)
	}
	// The clock starts at the first record, so the group join is not
	// counted (it is not counted for the sink either).
	var start time.Time
	got, bytes := 0, 0
	deadline := time.Now().Add(5 * time.Minute)
	for got < n && time.Now().Before(deadline) {
		if m, ok := c.Poll(100).(*kafka.Message); ok && m.TopicPartition.Error == nil {
			if got == 0 {
				start = time.Now()
			}
			got++
			bytes += len(m.Value)
		}
	}
	if got < n {
		b.Fatalf("bare consumer read %d of %d records", got, n)
	}
	return time.Since(start)
}

// sinkConsume runs the runtime's sink loop with the S3 sink over topic
// until n records are buffered, then stops it (Close uploads the rest),
// and returns the time it took and the bytes uploaded.
func sinkConsume(b *testing.B, srv *s3test.Server, addr, topic string, n int) (time.Duration, float64) {
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.Prefix = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	m := newTestMetrics()
	sink := &timedSink{Sink: newSink(o, sinkEnv("bench", m))}
	tr := status.New(string(sdk.KindSink), "bench", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sinkloopRun(ctx, addr, topic, sink, tr)
	}()
	deadline := time.Now().Add(5 * time.Minute)
	for m.get("s3_sink_records_buffered_total") < float64(n) {
		select {
		case err := <-done:
			cancel()
			b.Fatalf("sink loop stopped: %v", err)
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cancel()
			b.Fatalf("sink buffered %v of %d records", m.get("s3_sink_records_buffered_total"), n)
		}
	}
	cancel()
	if err := <-done; err != nil && err != context.Canceled {
		b.Fatal(err)
	}
	d := time.Since(sink.first) // from the first batch to the end of the flush
	b.Logf("%d files, upload time %.2fs of %.2fs", int(m.get("s3_sink_files_uploaded_total")), m.get("s3_sink_upload_duration_seconds_sum"), d.Seconds())
	if up := m.get("s3_sink_records_uploaded_total"); up < float64(n) {
		b.Fatalf("uploaded %v of %d records", up, n)
	}
	return d, m.get("s3_sink_bytes_uploaded_total")
}

// timedSink notes when the first batch arrived.
type timedSink struct {
	*Sink // a DeferredSink to the loop
	first time.Time
}

func (t *timedSink) Consume(ctx context.Context, batch []sdk.Record) error {
	if t.first.IsZero() {
		t.first = time.Now()
	}
	return t.Sink.Consume(ctx, batch)
}

func sinkloopRun(ctx context.Context, addr, topic string, sink sdk.Sink, tr *status.Tracker) error {
	return runSinkLoop(ctx, addr, []definition.Topics{{Topic: definition.Route{Literal: topic}, Schema: "json",
		BatchLength: 10000, PollInterval: "100ms"}}, sink, tr)
}

// BenchmarkEndToEnd measures the embedded broker -> sink loop -> S3 sink ->
// versitygw path against a bare confluent-kafka-go consumer reading the
// same topic in the same run, for 100-byte and 1 KiB records. Set
// PICO_BENCH_RECORDS to change the record count.
func BenchmarkEndToEnd(b *testing.B) {
	for _, c := range []struct {
		name string
		size int
		n    int
	}{{"100B", 100, benchCount(500_000)}, {"1KiB", 1024, benchCount(500_000) / 5}} {
		b.Run(c.name, func(b *testing.B) {
			srv := s3test.Start(b)
			br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", SeedTopics: []string{"bench"}})
			if err != nil {
				b.Fatal(err)
			}
			defer br.Close()
			produceBench(b, br.Addr(), "bench", c.n, c.size)
			b.ResetTimer()
			var bare, sink time.Duration
			var uploaded float64
			for i := 0; i < b.N; i++ {
				bare += bareConsume(b, br.Addr(), "bench", c.n)
				d, up := sinkConsume(b, srv, br.Addr(), "bench", c.n)
				sink += d
				uploaded += up
			}
			n := float64(c.n * b.N)
			b.ReportMetric(n/bare.Seconds(), "bare_rec/s")
			b.ReportMetric(n/sink.Seconds(), "sink_rec/s")
			b.ReportMetric(n*float64(c.size)/sink.Seconds()/1e6, "sink_payload_MB/s")
			b.ReportMetric(uploaded/sink.Seconds()/1e6, "sink_uploaded_MB/s")
			b.ReportMetric(100*bare.Seconds()/sink.Seconds(), "sink_%_of_bare")
		})
	}
}
