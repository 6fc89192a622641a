package sourceloop

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
	"github.com/picomq/pico-connectors/runtime/definition"
)

func (l *loop) open(ctx, logCtx context.Context) error {
	for _, b := range l.blocks {
		defaults := kafka.ConfigMap{
			"client.id":          "pico-connectors-" + l.cfg.Key + "-" + strconv.Itoa(b.idx),
			"acks":               "all",
			"enable.idempotence": true,
			// A block that may not create topics must not have the broker
			// create them on a metadata request either.
			"allow.auto.create.topics":     b.def.CreateTopics,
			"batch.num.messages":           b.batch,
			"linger.ms":                    b.linger,
			"message.timeout.ms":           int(l.cfg.DeliveryTimeout.Milliseconds()),
			"queue.buffering.max.messages": 1000000,
			"go.delivery.reports":          true,
			// The loop reads only the topic and error of a report: no copy
			// of each key and value back into Go.
			"go.delivery.report.fields": "none",
			// Events() then carries only client-level errors, logged below.
			"go.events.channel.size": 1000,
		}
		if l.txn != nil {
			defaults["transactional.id"] = l.transactionalID(b)
		}
		cm, err := clientconf.ConfigMap(l.cfg.BootstrapServers, defaults, definition.ReservedProducer, l.cfg.Properties, b.def.Properties)
		if err != nil {
			return fmt.Errorf("topics[%d]: %w", b.idx, err)
		}
		p, err := kafka.NewProducer(&cm)
		if err != nil {
			return fmt.Errorf("topics[%d]: producer: %w", b.idx, err)
		}
		b.producer = p
		clientconf.ForwardLogs(logCtx, p.Logs(), l.log)
		go l.drainEvents(logCtx, b)
		if l.txn != nil {
			ictx, cancel := context.WithTimeout(ctx, 30*time.Second)
			err := p.InitTransactions(ictx)
			cancel()
			if err != nil {
				return l.txnError(fmt.Errorf("topics[%d]: init transactions of %s: %w", b.idx, l.transactionalID(b), err))
			}
		}
		if b.def.CreateTopics {
			a, err := kafka.NewAdminClientFromProducer(p)
			if err != nil {
				return fmt.Errorf("topics[%d]: admin client: %w", b.idx, err)
			}
			b.admin = a
		}
	}
	return nil
}

// producerFatal returns an error wrapping ErrProducerFatal when a block's
// producer has hit a fatal error.
func (l *loop) producerFatal() error {
	for _, b := range l.blocks {
		if err := b.producer.GetFatalError(); err != nil {
			return fmt.Errorf("%w (block %d): %v; the batch was nacked", ErrProducerFatal, b.idx, err)
		}
	}
	return nil
}

// drainEvents logs client-level events (delivery reports go to per-batch
// channels).
func (l *loop) drainEvents(ctx context.Context, b *block) {
	for {
		select {
		case <-ctx.Done():
			return
		case e, ok := <-b.producer.Events():
			if !ok {
				return
			}
			if ke, isErr := e.(kafka.Error); isErr {
				l.log.Debug("producer error", "block", b.idx, "err", ke)
			}
		}
	}
}

func (l *loop) close() {
	l.flushes.Wait()
	for _, b := range l.blocks {
		if b.admin != nil {
			b.admin.Close()
		}
		if b.producer != nil {
			b.producer.Flush(int(l.cfg.DeliveryTimeout.Milliseconds()))
			b.producer.Close()
		}
	}
}
