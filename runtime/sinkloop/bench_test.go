package sinkloop

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

type countSink struct {
	n    atomic.Int64
	done chan struct{}
	want int64
}

func (s *countSink) Open(context.Context) error  { return nil }
func (s *countSink) Close(context.Context) error { return nil }
func (s *countSink) Consume(_ context.Context, b []sdk.Record) error {
	if s.n.Add(int64(len(b))) >= s.want && s.done != nil {
		close(s.done)
		s.done = nil
	}
	return nil
}

const benchRecords = 200_000

// benchBroker starts a broker with benchRecords records of 100 B JSON on
// topic bench.
func benchBroker(b *testing.B) *broker.Broker {
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		b.Fatal(err)
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(br.Addr()), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		b.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	pad := `"0123456789012345678901234567890123456789012345678901234567890123456789"`
	for i := 0; i < benchRecords; i++ {
		cl.Produce(ctx, &kgo.Record{Topic: "bench", Value: []byte(`{"id":` + strconv.Itoa(i) + `,"pad":` + pad + `}`)}, nil)
	}
	if err := cl.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	return br
}

// BenchmarkLoopNoopSink runs the sink loop with a sink that does nothing
// over 200k records of 100 B JSON: the loop's own cost per record (go test
// -run XXX -bench LoopNoopSink -cpuprofile cpu.out ./runtime/sinkloop).
func BenchmarkLoopNoopSink(b *testing.B) {
	br := benchBroker(b)
	defer br.Close()
	const n = benchRecords
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		s := &countSink{done: make(chan struct{}), want: n}
		done := s.done
		lctx, cancel := context.WithCancel(ctx)
		errc := make(chan error, 1)
		go func() {
			errc <- Run(lctx, Config{Key: "bench", GroupID: "bench-" + strconv.Itoa(i), Topics: []definition.Topics{{Topic: definition.Route{Literal: "bench"}}},
				Sink: s, BootstrapServers: br.Addr(), Logger: testLogger()})
		}()
		<-done
		cancel()
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "rec/s")
}

// BenchmarkBareConsumer is the baseline of BenchmarkLoopNoopSink: a bare
// confluent-kafka-go consumer over the same records, with the loop's
// fetch.queue.backoff.ms.
func BenchmarkBareConsumer(b *testing.B) {
	br := benchBroker(b)
	defer br.Close()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": br.Addr(), "group.id": "bare-" + strconv.Itoa(i),
			"enable.auto.commit": false, "auto.offset.reset": "earliest", "enable.metrics.push": false, "fetch.queue.backoff.ms": 10})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.SubscribeTopics([]string{"bench"}, nil); err != nil {
			b.Fatal(err)
		}
		for got := 0; got < benchRecords; {
			if m, ok := c.Poll(100).(*kafka.Message); ok && m.TopicPartition.Error == nil {
				got++
			}
		}
		c.Close()
	}
	b.ReportMetric(float64(benchRecords*b.N)/b.Elapsed().Seconds(), "rec/s")
}
