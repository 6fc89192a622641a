package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/sdk"
)

// bareProduce sends msgs to topic through a bare confluent-kafka-go producer
// with the settings the source loop uses and waits for every delivery
// report. It returns the time from the first Produce to the last report.
func bareProduce(addr, topic string, msgs []sdk.Message) (time.Duration, error) {
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
		return 0, err
	}
	defer p.Close()
	go func() {
		for range p.Logs() {
		}
	}()
	reports := make(chan kafka.Event, len(msgs))
	start := time.Now()
	for i := range msgs {
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: msgs[i].Key, Value: msgs[i].Payload, Timestamp: msgs[i].Timestamp}
		for {
			err := p.Produce(m, reports)
			if err == nil {
				break
			}
			if ke, ok := err.(kafka.Error); ok && ke.Code() == kafka.ErrQueueFull {
				p.Flush(100)
				continue
			}
			return 0, err
		}
	}
	for range msgs {
		e := <-reports
		if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
			return 0, m.TopicPartition.Error
		}
	}
	return time.Since(start), nil
}

// payload returns a JSON object of exactly size bytes (size >= 24) whose
// "id" is i.
func payload(i, size int) []byte {
	head := `{"id":` + strconv.Itoa(i) + `,"pad":"`
	n := size - len(head) - 2
	b := make([]byte, 0, size)
	b = append(b, head...)
	for j := 0; j < n; j++ {
		b = append(b, byte('a'+(i+j)%26))
	}
	return append(b, '"', '}')
}

// fill writes n records of size bytes to each topic with franz-go, fast,
// and waits until every one is acknowledged.
func fill(addr string, topics []string, n, size int) error {
	// fleet logs in to the brokers a fleet runtime embeds (SASL), and
	// only to those.
	cl, err := fleet.NewClient(addr, kgo.AllowAutoTopicCreation(),
		kgo.ProducerBatchMaxBytes(4<<20), kgo.MaxBufferedRecords(200000), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	cb := func(_ *kgo.Record, err error) {
		if err != nil {
			select {
			case errc <- err:
			default:
			}
		}
	}
	now := time.Now()
	for i := 0; i < n; i++ {
		v := payload(i, size)
		for _, t := range topics {
			cl.Produce(ctx, &kgo.Record{Topic: t, Key: []byte(strconv.Itoa(i)), Value: v, Timestamp: now}, cb)
		}
	}
	if err := cl.Flush(ctx); err != nil {
		return err
	}
	select {
	case err := <-errc:
		return fmt.Errorf("produce: %w", err)
	default:
	}
	return nil
}

// consumerProps are librdkafka settings the benchmarks give the bare
// consumer and the sink loop alike. fetch.queue.backoff.ms: once its fetch
// queue holds queued.max.messages.kbytes (64 MiB), librdkafka waits this
// long before it fetches again, 1 s by default. A round of more than 64
// MiB that the consumer reads slower than the broker serves then stalls
// for up to a second: 0.4-0.7 s of the 1.4 s rounds of 1 KiB records, and
// the bare consumer's figure swung between 100k and 630k rec/s with it.
var consumerProps = map[string]string{"fetch.queue.backoff.ms": "10"}

// bareConsume reads n records from topic with a bare confluent-kafka-go
// consumer set up as the sink loop's, and returns the time from the first
// record to the n-th.
func bareConsume(addr, topic string, n int) (time.Duration, error) {
	cm := kafka.ConfigMap{
		"bootstrap.servers":        addr,
		"enable.metrics.push":      false,
		"go.logs.channel.enable":   true,
		"group.id":                 "bare-" + topic + "-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		"enable.auto.commit":       false,
		"enable.auto.offset.store": false,
		"auto.offset.reset":        "earliest",
	}
	for k, v := range consumerProps {
		cm[k] = v
	}
	c, err := kafka.NewConsumer(&cm)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	go func() {
		for range c.Logs() {
		}
	}()
	if err := c.SubscribeTopics([]string{topic}, nil); err != nil {
		return 0, err
	}
	var first time.Time
	got := 0
	deadline := time.Now().Add(2 * time.Minute)
	var bytes int
	for got < n {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bare consumer: %d of %d records after 2 minutes", got, n)
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				continue
			}
			if got == 0 {
				first = time.Now()
			}
			bytes += len(e.Value)
			got++
		}
	}
	_ = bytes
	return time.Since(first), nil
}
