package sinkloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

// deadLetter is one record bound for its block's dead_letter_topic.
type deadLetter struct {
	topic string
	rec   sdk.Record
	stage deadletter.Stage
	err   error
}

// dlqProducer produces dead letters: idempotent, acks=all, and every
// produce waits for its delivery reports.
type dlqProducer struct {
	p       *kafka.Producer
	key     string
	timeout time.Duration
	// build makes a new producer, for one left unusable by a fatal error.
	build func() (*kafka.Producer, error)
}

func newDLQProducer(logCtx context.Context, cfg Config, log *slog.Logger) (*dlqProducer, error) {
	defaults := kafka.ConfigMap{
		"client.id":           "pico-connectors-" + cfg.Key + "-dlq",
		"linger.ms":           5,
		"message.timeout.ms":  int(cfg.DeliveryTimeout.Milliseconds()),
		"go.delivery.reports": true,
	}
	cm, err := clientconf.ConfigMap(cfg.BootstrapServers, defaults, definition.ReservedProducer, cfg.Properties)
	if err != nil {
		return nil, fmt.Errorf("dead-letter producer: %w", err)
	}
	// The promise of a dead-letter topic is that nothing is dropped.
	cm["acks"] = "all"
	cm["enable.idempotence"] = true
	build := func() (*kafka.Producer, error) {
		p, err := kafka.NewProducer(&cm)
		if err != nil {
			return nil, fmt.Errorf("dead-letter producer: %w", err)
		}
		clientconf.ForwardLogs(logCtx, p.Logs(), log)
		go func() {
			for e := range p.Events() {
				if err, ok := e.(kafka.Error); ok {
					log.Warn("dead-letter producer error", "err", err)
				}
			}
		}()
		return p, nil
	}
	p, err := build()
	if err != nil {
		return nil, err
	}
	return &dlqProducer{p: p, key: cfg.Key, timeout: cfg.DeliveryTimeout, build: build}, nil
}

// send produces every dead letter and waits for all delivery reports; it
// fails when one is not acknowledged. A producer that a fatal error left
// unusable (an idempotent producer out of sequence refuses every record
// from then on) is replaced by a new one, for the retry.
func (d *dlqProducer) send(dead []deadLetter) error {
	err := d.produce(dead)
	if err != nil && d.p.GetFatalError() != nil {
		if p, berr := d.build(); berr != nil {
			// The next retry tries to make one again.
			err = fmt.Errorf("%w (the dead-letter producer hit a fatal error, and a new one could not be made: %w)", err, berr)
		} else {
			old := d.p
			d.p = p
			go old.Close() // nothing of it is waited for
			err = fmt.Errorf("%w (the dead-letter producer hit a fatal error and was replaced)", err)
		}
	}
	return err
}

func (d *dlqProducer) produce(dead []deadLetter) error {
	reports := make(chan kafka.Event, len(dead))
	deadline := time.Now().Add(d.timeout + 5*time.Second)
	for _, dl := range dead {
		r := dl.rec
		hs := deadletter.Headers(r.Headers, deadletter.Origin{Connector: d.key, Stage: dl.stage,
			Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp}, dl.err)
		topic := dl.topic
		m := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
			Key: r.Key, Value: r.Payload, Timestamp: r.Timestamp, Headers: make([]kafka.Header, len(hs))}
		for i, h := range hs {
			m.Headers[i] = kafka.Header{Key: h.Key, Value: h.Value}
		}
		for {
			err := d.p.Produce(m, reports)
			if err == nil {
				break
			}
			var ke kafka.Error
			if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull && time.Now().Before(deadline) {
				time.Sleep(5 * time.Millisecond)
				continue
			}
			return fmt.Errorf("dead-letter produce to %q: %w", topic, err)
		}
	}
	var first error
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	for range dead {
		select {
		case e := <-reports:
			if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil && first == nil {
				first = fmt.Errorf("dead-letter produce to %q: %w", *m.TopicPartition.Topic, m.TopicPartition.Error)
			}
		case <-timer.C:
			// The reports still come; the channel is buffered for all.
			return fmt.Errorf("dead-letter produce: no delivery report within %s", d.timeout+5*time.Second)
		}
	}
	return first
}

func (d *dlqProducer) close() {
	d.p.Flush(int(d.timeout.Milliseconds()))
	d.p.Close()
}
