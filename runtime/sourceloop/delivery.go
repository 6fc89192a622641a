package sourceloop

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
)

// ensureTopics makes sure every destination exists: created through the
// admin API when the block has create_topics, otherwise looked up.
func (l *loop) ensureTopics(ctx context.Context, out []outRecord) error {
	type need struct {
		b     *block
		topic string
	}
	var missing []need
	seen := map[string]bool{}
	var last *string // records in a row share their topic's pointer
	for i := range out {
		r := &out[i]
		if r.msg.TopicPartition.Topic == last {
			continue
		}
		last = r.msg.TopicPartition.Topic
		t := *last
		if l.known[t] || seen[t] {
			continue
		}
		seen[t] = true
		missing = append(missing, need{r.b, t})
	}
	timeout := 10 * time.Second
	for _, n := range missing {
		if n.b.admin != nil {
			spec := kafka.TopicSpecification{Topic: n.topic, NumPartitions: 1, ReplicationFactor: 1}
			if err := clientconf.CreateTopic(ctx, n.b.admin, spec, timeout); err != nil {
				return fmt.Errorf("create topic %q: %w", n.topic, err)
			}
			l.known[n.topic] = true
			continue
		}
		t := n.topic
		md, err := n.b.producer.GetMetadata(&t, false, int(timeout.Milliseconds()))
		if err != nil {
			return fmt.Errorf("look up topic %q: %w", n.topic, err)
		}
		tm, ok := md.Topics[n.topic]
		if !ok || tm.Error.Code() == kafka.ErrUnknownTopicOrPart || tm.Error.Code() == kafka.ErrUnknownTopic {
			return fmt.Errorf("topic %q does not exist and topics[%d].create_topics is off", n.topic, n.b.idx)
		}
		if tm.Error.Code() != kafka.ErrNoError {
			return fmt.Errorf("look up topic %q: %v", n.topic, tm.Error)
		}
		l.known[n.topic] = true
	}
	return nil
}

// produce sends every record with reports as the delivery channel. It
// returns how many were sent and, when one could not be, why.
func (l *loop) produce(out []outRecord, reports chan kafka.Event) (int, error) {
	sent := 0
	for i := range out {
		r := &out[i]
		for {
			err := r.b.producer.Produce(&r.msg, reports)
			if err == nil {
				sent++
				break
			}
			var ke kafka.Error
			if errors.As(err, &ke) && ke.Code() == kafka.ErrQueueFull {
				r.b.producer.Flush(100)
				continue
			}
			return sent, fmt.Errorf("produce to %q: %w", *r.msg.TopicPartition.Topic, err)
		}
	}
	return sent, nil
}

// collect waits for the delivery reports of sent records. It returns how
// many were delivered and the first failure. When stop ends, it waits
// StopTimeout more, then purges what is undelivered.
func (l *loop) collect(stop context.Context, reports chan kafka.Event, sent int) (int, error) {
	var firstErr error
	delivered := 0
	// take counts a delivery report; it returns false for another event.
	take := func(e kafka.Event) bool {
		m, ok := e.(*kafka.Message)
		if !ok {
			return false
		}
		if m.TopicPartition.Error == nil {
			delivered++
		} else if firstErr == nil {
			firstErr = fmt.Errorf("delivery to %q failed: %w", *m.TopicPartition.Topic, m.TopicPartition.Error)
		}
		return true
	}
	deadline := time.NewTimer(l.cfg.DeliveryTimeout + 10*time.Second)
	defer deadline.Stop()
	stopping := stop.Done()
	var purge <-chan time.Time
	for got := 0; got < sent; {
		// Reports come in bursts, one per record of a produce request:
		// those already waiting are taken without the full select.
		select {
		case e := <-reports:
			if take(e) {
				got++
			}
			continue
		default:
		}
		select {
		case <-stopping:
			stopping = nil
			t := time.NewTimer(l.cfg.StopTimeout)
			defer t.Stop()
			purge = t.C
		case <-purge:
			purge = nil
			l.log.Warn("stopping: purging undelivered records; the batch is nacked", "undelivered", sent-got)
			for _, b := range l.blocks {
				_ = b.producer.Purge(kafka.PurgeQueue | kafka.PurgeInFlight | kafka.PurgeNonBlocking)
			}
		case e := <-reports:
			if take(e) {
				got++
			}
		case <-deadline.C:
			if firstErr == nil {
				firstErr = fmt.Errorf("%d of %d delivery reports missing after %s", sent-got, sent, l.cfg.DeliveryTimeout+10*time.Second)
			}
			return delivered, firstErr
		}
	}
	return delivered, firstErr
}
