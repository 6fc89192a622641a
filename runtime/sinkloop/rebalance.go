package sinkloop

import (
	"context"
	"fmt"
	"sort"
	"strconv"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// rebalance is the consumer's rebalance callback; librdkafka calls it from
// Poll, on the loop's goroutine.
func (l *loop) rebalance(c *kafka.Consumer, ev kafka.Event) error {
	if l.closing {
		return nil // the consumer's Close: the default handling unassigns
	}
	l.cooperative = c.GetRebalanceProtocol() == "COOPERATIVE"
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		var err error
		if l.cooperative {
			err = c.IncrementalAssign(e.Partitions)
		} else {
			err = c.Assign(e.Partitions)
		}
		if err != nil {
			l.log.Error("assign failed", "err", err)
			l.tr.RecordError(fmt.Errorf("assign partitions: %w", err))
			return err
		}
		for _, tp := range e.Partitions {
			p := sdk.TopicPartition{Topic: *tp.Topic, Partition: tp.Partition}
			l.assigned[p] = true
			delete(l.stranded, p)
		}
		if l.paused || l.stopping {
			if err := c.Pause(e.Partitions); err != nil {
				l.log.Warn("pause failed", "err", err)
			}
		}
		l.place()
		l.log.Info("partitions assigned", "partitions", len(e.Partitions), "owned", len(l.assigned))
	case kafka.RevokedPartitions:
		l.revoke(c, e.Partitions)
	}
	return nil
}

// revoke gives partitions up: the Consume in progress finishes, a
// DeferredSink releases them, the commits are made, and the loop forgets
// their records.
func (l *loop) revoke(c *kafka.Consumer, parts []kafka.TopicPartition) {
	lost := c.AssignmentLost()
	revoked := make([]sdk.TopicPartition, 0, len(parts))
	for _, tp := range parts {
		p := sdk.TopicPartition{Topic: *tp.Topic, Partition: tp.Partition}
		revoked = append(revoked, p)
		delete(l.stranded, p)
	}
	l.giveUp(revoked, lost)
	var err error
	if l.cooperative {
		err = c.IncrementalUnassign(parts)
	} else {
		err = c.Unassign()
	}
	if err != nil {
		l.log.Warn("unassign failed", "err", err)
	}
	if len(l.assigned) == 0 {
		l.paused = false // a new assignment starts unpaused
	}
	l.place()
	l.log.Info("partitions revoked", "partitions", len(parts), "lost", lost, "owned", len(l.assigned))
}

// giveUp forgets partitions: the Consume in progress finishes, a
// DeferredSink releases them, the commits are made unless lost, and the
// loop drops their records.
func (l *loop) giveUp(revoked []sdk.TopicPartition, lost bool) {
	gone := map[sdk.TopicPartition]bool{}
	for _, p := range revoked {
		gone[p] = true
	}
	if f := l.inflight; f != nil {
		// Wait for the Consume in progress, so that Release and the
		// commit see what it accepted; cut it short when it holds
		// records of the revoked partitions (it may be waiting for
		// room), and always for a DeferredSink, which skips what it
		// accepted when the rest is redelivered: the whole group waits
		// for this member's revoke before it can rebalance.
		cut := l.deferred != nil
		for _, r := range f.batch {
			if cut || gone[sdk.TopicPartition{Topic: r.Topic, Partition: r.Partition}] {
				cut = true
				break
			}
		}
		if cut {
			f.revoked = true
			f.cancel()
		}
		l.finish(<-l.results)
	}
	if l.deferred != nil {
		l.release(revoked)
		if !lost {
			l.commitDurable()
		}
	}
	if !lost {
		l.ledger.commits.flush()
	}
	l.ledger.forget(revoked)
	for _, p := range revoked {
		delete(l.assigned, p)
	}
	l.lastOK = false
	l.pending = l.owned(l.pending)
	if len(l.pending) == 0 {
		l.pending = nil
	}
	if l.retry != nil {
		if l.retry = l.owned(l.retry); len(l.retry) == 0 {
			l.retry = nil
		}
		l.retryDead = l.ownedDead(l.retryDead)
	}
}

// release calls a DeferredSink's Release with parts, bounded by
// CloseTimeout; a plain sink holds nothing to release.
func (l *loop) release(parts []sdk.TopicPartition) {
	if l.deferred == nil || len(parts) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), l.cfg.CloseTimeout)
	defer cancel()
	if err := l.deferred.Release(ctx, parts); err != nil {
		l.log.Warn("sink release failed", "err", err)
		l.tr.RecordError(fmt.Errorf("release revoked partitions: %w", err))
	}
}

// held returns the partitions the loop holds.
func (l *loop) held() []sdk.TopicPartition {
	out := make([]sdk.TopicPartition, 0, len(l.assigned))
	for p := range l.assigned {
		out = append(out, p)
	}
	return out
}

// place records the partitions held and one more rebalance event on the
// tracker.
func (l *loop) place() {
	l.generation++
	parts := make([]string, 0, len(l.assigned))
	for p := range l.assigned {
		parts = append(parts, p.Topic+"/"+strconv.Itoa(int(p.Partition)))
	}
	sort.Strings(parts)
	l.tr.SetPlacement(status.Placement{Partitions: parts, Generation: l.generation})
}
