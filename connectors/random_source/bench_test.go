package randomsource

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	"github.com/picomq/pico-connectors/sdk"
)

// memStore is a state store in memory, so the benchmark measures the loop
// and not a disk.
type memStore struct{ blob []byte }

func (m *memStore) Load(context.Context, string) ([]byte, error) { return m.blob, nil }
func (m *memStore) Save(_ context.Context, _ string, b []byte) error {
	m.blob = append(m.blob[:0], b...)
	return nil
}

const benchRecords = 50000

// BenchmarkSourceLoopVsBareProducer sends the same benchRecords records of
// the random source (256-byte JSON, sequence keys, no pause between polls)
// to the same embedded broker twice per iteration: through a bare
// confluent-kafka-go producer (produce everything, wait for every delivery
// report), and through the source loop (polls of 1000, decode, route,
// produce, delivery reports, state save, ack). It reports both rates and
// loop/bare as a ratio.
func BenchmarkSourceLoopVsBareProducer(b *testing.B) {
	br := startBroker(b)
	opt := randomsourceconfig.Default()
	opt.RecordsPerBatch, opt.MaxRecords, opt.Interval = 1000, confkit.Ptr(benchRecords), 0
	// The bare producer sends records the source generated beforehand.
	gen := newSource(opt)
	var msgs []sdk.Message
	for int64(len(msgs)) < benchRecords {
		batch, _ := gen.Poll(context.Background())
		msgs = append(msgs, batch.Messages...)
		gen.OnBatchResult(context.Background(), sdk.Ack)
	}
	var bare, loop time.Duration
	for i := 0; b.Loop(); i++ {
		topic := fmt.Sprintf("bare-%d", i)
		if err := br.CreateTopic(topic); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if err := bareProduce(br.Addr(), topic, msgs); err != nil {
			b.Fatal(err)
		}
		bare += time.Since(start)

		src := newSource(opt)
		store := &memStore{}
		topics := []definition.Topics{{Topic: definition.Route{Literal: fmt.Sprintf("loop-%d", i)}, Schema: "json", CreateTopics: true, BatchLength: 1000, LingerTime: "5ms"}}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		start = time.Now()
		go func() {
			done <- sourceloop.Run(ctx, sourceloop.Config{Key: "bench", Topics: topics, Source: src, Store: store, BootstrapServers: br.Addr(), Logger: logger()})
		}()
		for src.Committed() < benchRecords {
			time.Sleep(100 * time.Microsecond)
		}
		loop += time.Since(start)
		cancel()
		if err := <-done; err != nil {
			b.Fatal(err)
		}
	}
	n := float64(b.N) * benchRecords
	bareRate, loopRate := n/bare.Seconds(), n/loop.Seconds()
	b.ReportMetric(bareRate, "bare_records/s")
	b.ReportMetric(loopRate, "loop_records/s")
	b.ReportMetric(loopRate/bareRate, "loop/bare")
}

// bareProduce sends msgs with the same producer settings the loop uses and
// waits for every delivery report.
func bareProduce(addr, topic string, msgs []sdk.Message) error {
	p, err := kafka.NewProducer(&kafka.ConfigMap{
		"bootstrap.servers":            addr,
		"enable.metrics.push":          false,
		"acks":                         "all",
		"enable.idempotence":           true,
		"go.delivery.report.fields":    "none",
		"batch.num.messages":           1000,
		"linger.ms":                    5,
		"queue.buffering.max.messages": 1000000,
		"go.logs.channel.enable":       true,
	})
	if err != nil {
		return err
	}
	defer p.Close()
	go func() {
		for range p.Logs() {
		}
	}()
	reports := make(chan kafka.Event, len(msgs))
	for i := range msgs {
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny}, Key: msgs[i].Key, Value: msgs[i].Payload, Timestamp: msgs[i].Timestamp}
		for {
			err := p.Produce(m, reports)
			if err == nil {
				break
			}
			if ke, ok := err.(kafka.Error); ok && ke.Code() == kafka.ErrQueueFull {
				p.Flush(100)
				continue
			}
			return err
		}
	}
	for range msgs {
		e := <-reports
		if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
			return m.TopicPartition.Error
		}
	}
	return nil
}
