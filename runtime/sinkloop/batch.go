package sinkloop

import (
	"context"
	"fmt"
	"time"

	"github.com/picomq/pico-connectors/runtime/backoff"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// dispatch starts a Consume when a batch is due, and reports whether it
// did. While stopping, the batch in hand is due at once.
func (l *loop) dispatch() bool {
	var batch []sdk.Record
	switch {
	case l.retry != nil:
		if l.stopping {
			// Leave the failed batch uncommitted; it is redelivered on
			// the next start.
			return false
		}
		if time.Now().Before(l.retryAt) {
			return false
		}
		batch = l.retry
		l.tr.Counters.Redelivered.Add(1)
		if l.retryTaken {
			// Consume took the batch; only its dead letters are owed.
			f := &flight{batch: batch, taken: true, dead: l.retryDead, ctx: context.Background(), cancel: func() {}, start: time.Now()}
			l.inflight = f
			go func() { l.results <- l.consume(f) }()
			return true
		}
	case len(l.pending) == 0:
		return false
	case len(l.pending) >= l.plan.batch || l.stopping || !time.Now().Before(l.pendingSince.Add(l.plan.interval)):
		n := min(len(l.pending), l.plan.batch)
		batch = l.pending[:n:n]
		l.pending = l.pending[n:]
		if len(l.pending) == 0 {
			l.pending = nil
		} else {
			l.pendingSince = time.Now()
		}
	default:
		return false
	}
	ctx, cancel := context.WithCancel(context.Background())
	f := &flight{batch: batch, ctx: ctx, cancel: cancel, start: time.Now()}
	l.inflight = f
	go func() { l.results <- l.consume(f) }()
	return true
}

// consume prepares a batch, hands it to the sink and sends its dead
// letters; it runs in its own goroutine, so it recovers a panic of the
// sink or a transform into an outcome that stops the loop.
func (l *loop) consume(f *flight) (o outcome) {
	defer func() {
		if r := recover(); r != nil {
			o = outcome{err: fmt.Errorf("consume panicked: %v", r), panic: true}
		}
	}()
	if f.taken {
		return l.sendDead(f.dead)
	}
	recs, dead, err := l.prepare(f.batch)
	if err != nil {
		return outcome{err: err}
	}
	if len(recs) > 0 {
		start := time.Now()
		err = l.cfg.Sink.Consume(f.ctx, recs)
		l.consumeH.Observe(time.Since(start).Seconds())
		if err != nil {
			rej, held, rerr := l.rejected(err)
			if rerr != nil {
				return outcome{err: rerr, held: held}
			}
			dead = append(dead, rej...)
		}
	}
	return l.sendDead(dead)
}

// sendDead produces the dead letters of a batch the sink has taken. When
// that fails, the outcome keeps them: they are produced again, without
// handing the batch to the sink again (a DeferredSink would skip the
// records it rejected, and they would be lost).
func (l *loop) sendDead(dead []deadLetter) outcome {
	if len(dead) == 0 {
		return outcome{}
	}
	if err := l.dlq.send(dead); err != nil {
		return outcome{err: err, unsent: dead}
	}
	l.log.Warn("records sent to the dead-letter topic", "records", len(dead), "topic", dead[0].topic, "first_error", dead[0].err.Error())
	return outcome{dead: len(dead), sent: dead}
}

// finish accounts for a flight that came back: commit on success,
// redelivery after a back-off on failure.
func (l *loop) finish(r outcome) {
	f := l.inflight
	l.inflight = nil
	f.cancel()
	c := &l.tr.Counters
	c.Consumed.Add(int64(len(f.batch)))
	c.LastBatchAt.Store(time.Now().UnixNano())
	if r.err != nil {
		c.Nacked.Add(1)
		l.nackedC.Add(float64(len(f.batch)))
		if r.panic {
			// The sink's state is unknown: nothing more goes to it, and
			// the batch is redelivered to the next instance.
			l.panicked = fmt.Errorf("%w; the sink stops here, is started again, and the batch is redelivered", r.err)
			l.log.Error("sink panicked", "records", len(f.batch), "err", r.err)
			return
		}
		l.retry = l.owned(f.batch)
		l.retryTaken, l.retryDead = r.unsent != nil || f.taken, l.ownedDead(r.unsent)
		if f.revoked {
			// Cut short by a revoke: not the sink's failure.
			l.log.Info("consume ended by a partition revoke; its records of the remaining partitions are redelivered", "err", r.err)
			if len(l.retry) == 0 {
				l.retry = nil
			}
			l.retryAt = time.Now()
			return
		}
		l.failures++
		c.ConsecNacks.Store(int64(l.failures))
		if l.ledger.hold(r.held) {
			// A DeferredSink took the batch but for these records, and
			// skips them when redelivered: only the hold keeps them
			// from being committed. Redelivery will not help.
			l.tr.Fail(fmt.Errorf("consume: %w", r.err))
		}
		l.log.Warn("consume failed; the batch will be redelivered", "records", len(f.batch), "consecutive_failures", l.failures, "err", r.err)
		if l.failures >= l.cfg.ErrorAfter {
			l.tr.Fail(fmt.Errorf("consume failed %d times in a row: %w", l.failures, r.err))
		} else {
			l.tr.RecordError(fmt.Errorf("consume: %w", r.err))
		}
		if len(l.retry) == 0 {
			l.retry = nil
		}
		l.retryAt = time.Now().Add(l.backoff(l.failures))
		return
	}
	l.retry, l.retryTaken, l.retryDead = nil, false, nil
	c.Batches.Add(1)
	c.DeadLetters.Add(int64(r.dead))
	l.ackedC.Add(float64(len(f.batch)))
	l.ledger.consume(f.batch, r.sent, l.assigned)
	if l.deferred != nil {
		l.commitDurable()
	}
	l.ledger.commits.kick()
	// The sink is done with the batch (sdk.Sink: Consume keeps no
	// slice of it): its array takes the next records, without the
	// allocation and clearing of a new one (3.5% of the loop's CPU with
	// 100 B records, and GC work besides).
	l.spare = f.batch[:0]
	if l.tr.Status() == status.Error && !l.ledger.holding() && !l.tr.Unhealthy() {
		l.log.Info("batch consumed after failures; status back to Running")
		l.tr.Set(status.Running)
	}
	l.failures = 0
	c.ConsecNacks.Store(0)
}

// owned returns the records of recs whose partitions the loop still owns.
func (l *loop) owned(recs []sdk.Record) []sdk.Record {
	out := recs[:0:0]
	for _, r := range recs {
		if l.assigned[sdk.TopicPartition{Topic: r.Topic, Partition: r.Partition}] {
			out = append(out, r)
		}
	}
	return out
}

// ownedDead returns the dead letters whose partitions the loop still owns,
// or nil for none.
func (l *loop) ownedDead(dead []deadLetter) []deadLetter {
	var out []deadLetter
	for _, d := range dead {
		if l.assigned[sdk.TopicPartition{Topic: d.rec.Topic, Partition: d.rec.Partition}] {
			out = append(out, d)
		}
	}
	return out
}

// backoff is the wait before the n-th redelivery in a row.
func (l *loop) backoff(n int) time.Duration {
	return backoff.Exponential(l.cfg.RetryDelay, l.cfg.MaxRetryDelay)(n)
}

// commitDurable adds a DeferredSink's Durable offsets to the commits (the
// caller kicks or flushes them) and starts the CommitInterval again.
func (l *loop) commitDurable() {
	l.nextCommit = time.Now().Add(l.cfg.CommitInterval)
	l.ledger.durable()
}
