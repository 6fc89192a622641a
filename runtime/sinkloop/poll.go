package sinkloop

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// run consumes until ctx ends and the batch in hand is delivered.
func (l *loop) run(ctx context.Context) {
	l.nextCommit = time.Now().Add(l.cfg.CommitInterval)
	for {
		if l.panicked != nil {
			return
		}
		if l.fatal != nil {
			if l.inflight != nil {
				l.inflight.cancel()
				l.finish(<-l.results)
			}
			return
		}
		if ctx.Err() != nil && !l.stopping {
			l.stopping, l.stopAt = true, time.Now()
			l.setPaused(true)
		}
		if l.inflight == nil && !l.dispatch() && l.stopping {
			return
		}
		full := len(l.pending) >= l.plan.batch
		switch {
		case l.stopping:
		case !full:
			l.setPaused(false)
		case l.inflight == nil:
			// A failed batch waits out its back-off: hold the rest.
			l.setPaused(true)
		}
		if l.inflight != nil && (full || l.stopping) {
			// Nothing to poll for. Pausing costs librdkafka its prefetched
			// records, so first wait for Consume without polling, for a
			// while well inside max.poll.interval.ms; only a longer
			// Consume pauses the partitions, and then the loop polls now
			// and then to serve the group (heartbeats run in librdkafka's
			// thread; rebalances and max.poll.interval.ms need Poll).
			if !l.paused && !l.stopping {
				if wait := time.Until(l.inflight.start.Add(l.pauseAfter)); wait > 0 {
					t := time.NewTimer(wait)
					select {
					case r := <-l.results:
						t.Stop()
						l.finish(r)
						continue
					case <-t.C:
					}
				}
				l.setPaused(true)
			}
			t := time.NewTimer(100 * time.Millisecond)
			select {
			case r := <-l.results:
				t.Stop()
				l.finish(r)
			case <-t.C:
			}
			l.handle(l.c.Poll(0))
		} else {
			l.drain(l.c.Poll(l.pollWait()))
			if l.inflight != nil {
				select {
				case r := <-l.results:
					l.finish(r)
				default:
				}
			}
		}
		if !time.Now().Before(l.nextCommit) {
			l.tick()
		}
		if !time.Now().Before(l.nextHealth) {
			l.health()
		}
	}
}

// drain takes a polled event and then, while records come and the batch
// in hand has room, those already queued behind it (Poll(0), at most a
// batch_length of events): the loop's other work (the clock, the flight
// in progress, the commit timer) runs once per burst, not once per record.
func (l *loop) drain(ev kafka.Event) {
	for range l.plan.batch {
		if ev == nil {
			return
		}
		l.handle(ev)
		if _, ok := ev.(*kafka.Message); !ok || len(l.pending) >= l.plan.batch || l.stopping || l.fatal != nil {
			return
		}
		ev = l.c.Poll(0)
	}
	if ev != nil {
		l.handle(ev)
	}
}

// pollWait is how long the next Poll may block, in milliseconds.
func (l *loop) pollWait() int {
	if l.inflight != nil {
		return 5 // notice the end of Consume soon
	}
	wait := 100 * time.Millisecond // look at ctx at least this often
	switch {
	case l.retry != nil:
		wait = min(wait, time.Until(l.retryAt))
	case len(l.pending) > 0:
		wait = min(wait, time.Until(l.pendingSince.Add(l.plan.interval)))
	}
	return max(1, int(wait.Milliseconds()))
}

// handle takes one polled event.
func (l *loop) handle(ev kafka.Event) {
	switch e := ev.(type) {
	case *kafka.Message:
		if e.TopicPartition.Error != nil {
			l.log.Warn("consume error", "err", e.TopicPartition.Error)
			return
		}
		if l.stopping {
			// Polled after the stop began: left uncommitted, read again
			// on the next start.
			return
		}
		// Records come in runs of one partition: the partition's checks
		// and its topic's schema are looked up once per run.
		if t := *e.TopicPartition.Topic; !l.lastOK || t != l.lastTP.Topic || e.TopicPartition.Partition != l.lastTP.Partition {
			p := sdk.TopicPartition{Topic: t, Partition: e.TopicPartition.Partition}
			if !l.assigned[p] {
				return // polled after a revoke: the next owner reads it
			}
			l.lastTP, l.lastOK, l.lastSchema = p, true, l.topic(t).schema
			l.ledger.base(p, int64(e.TopicPartition.Offset))
		}
		if len(l.pending) == 0 {
			l.pendingSince = time.Now()
			if l.pending == nil {
				l.pending, l.spare = l.spare, nil
			}
			if l.pending == nil {
				// Grown by append up to the batch: a large batch_length
				// reserves nothing before its records arrive.
				l.pending = make([]sdk.Record, 0, min(l.plan.batch, 4096))
			}
		}
		l.pending = append(l.pending, record(e, l.lastTP.Topic, l.lastSchema))
	case *kafka.Stats:
		l.stats(e.String())
	case kafka.Error:
		if e.Code() == kafka.ErrFencedInstanceID {
			what := fmt.Sprintf("runtime.id %q", l.instance)
			fix := "give every runtime of a fleet its own runtime.id (or PICOMQ_CONNECTORS_ID)"
			if l.instance != l.cfg.InstanceID {
				what = fmt.Sprintf("properties.\"group.instance.id\" = %q", l.instance)
				fix = "give every runtime its own group.instance.id, or leave it unset: the runtime uses its runtime.id"
			}
			l.fatal = fmt.Errorf("%s: another runtime joined consumer group %q with the same id (group.instance.id) and fenced this one: %s; the sink stopped here (%w)",
				what, l.cfg.GroupID, fix, e)
			l.log.Error("sink fenced by a runtime with the same id", "group_instance_id", l.instance, "err", e)
			return
		}
		if e.IsFatal() {
			l.tr.RecordError(e)
			l.log.Error("consumer error", "err", e)
		} else if e.Code() == kafka.ErrMaxPollExceeded || e.Code() == kafka.ErrInvalidSessionTimeout {
			// The second: the broker refuses session.timeout.ms (PicoMQ
			// accepts 6000 to 300000); the consumer cannot join.
			l.tr.RecordError(fmt.Errorf("consumer group %q: %w", l.cfg.GroupID, e))
			l.log.Warn("consumer error", "err", e)
		} else {
			l.log.Debug("consumer error", "err", e)
		}
	}
}

// setPaused pauses or resumes every assigned partition.
func (l *loop) setPaused(on bool) {
	if l.paused == on {
		return
	}
	parts := l.assignment()
	var err error
	if on {
		err = l.c.Pause(parts)
	} else {
		err = l.c.Resume(parts)
	}
	if err != nil {
		l.log.Warn("pause/resume failed", "pause", on, "err", err)
		return
	}
	l.paused = on
}

func (l *loop) assignment() []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, 0, len(l.assigned))
	for p := range l.assigned {
		topic := p.Topic
		out = append(out, kafka.TopicPartition{Topic: &topic, Partition: p.Partition})
	}
	return out
}

// tick runs every CommitInterval without a batch: a DeferredSink's
// Durable offsets are committed (each batch commits them too, and starts
// the interval again).
func (l *loop) tick() {
	l.nextCommit = time.Now().Add(l.cfg.CommitInterval)
	if l.deferred != nil {
		l.commitDurable()
		l.ledger.commits.kick()
	}
}

// health runs every CommitInterval, batches or not: a sdk.Health sink's
// condition is applied to the status (a sink whose uploads fail while no
// record arrives still shows Error, and so does one whose background work
// fails while its batches succeed).
func (l *loop) health() {
	l.nextHealth = time.Now().Add(l.cfg.CommitInterval)
	h, ok := l.cfg.Sink.(sdk.Health)
	if !ok {
		return
	}
	err := h.Health()
	cleared := err == nil && l.tr.Unhealthy()
	if cleared && l.retry != nil {
		// The sink can take records again: redeliver now rather
		// than at the end of the back-off.
		l.retryAt = time.Now()
	}
	l.tr.ReportHealth(err)
	if cleared && l.retry == nil && !l.ledger.holding() && l.tr.Status() == status.Error {
		// The Error came from batches refused while the condition
		// lasted, and none is failing now.
		l.log.Info("sink healthy again; status back to Running")
		l.tr.Set(status.Running)
	}
}
