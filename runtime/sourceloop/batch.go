package sourceloop

import (
	"context"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// pending is a polled batch: prepared (decoded, transformed, routed, its
// topics known to exist), then produced, then resolved.
type pending struct {
	batch   sdk.Batch
	n       int64 // messages polled
	dead    int64 // of the records sent, those for a dead-letter topic
	out     []outRecord
	reports chan kafka.Event // set once produced
	sent    int
	start   time.Time
	failure error // why the batch fails, before or while sending
	open    bool  // a transaction is open for the batch (transactional mode)
}

// prepareBatch decodes, transforms and routes a polled batch and makes
// sure its topics exist; a failure is kept in the pending batch.
func (l *loop) prepareBatch(ctx context.Context, batch sdk.Batch) *pending {
	p := &pending{batch: batch, n: int64(len(batch.Messages))}
	out, dead, err := l.prepare(batch.Messages)
	if err != nil {
		p.failure = err
		return p
	}
	p.out, p.dead = out, int64(dead)
	p.failure = l.ensureTopics(ctx, out)
	return p
}

// delivered reports whether every record p sent has its delivery report
// waiting (or p failed before sending).
func (p *pending) delivered() bool {
	return p.failure != nil || p.reports != nil && len(p.reports) >= p.sent
}

// send produces a prepared batch without waiting for the delivery
// reports; a failure is kept in p. In transactional mode it opens the
// batch's transactions and adds the checkpoint to block 0's.
func (l *loop) send(stop, ctx context.Context, p *pending) {
	p.start = time.Now()
	if p.failure != nil {
		return
	}
	if l.txn != nil {
		if err := l.begin(stop, ctx); err != nil {
			p.failure = err
			return
		}
		p.open = true
	}
	p.reports = make(chan kafka.Event, len(p.out))
	p.sent, p.failure = l.produce(p.out, p.reports)
	if l.txn != nil && p.failure == nil && p.batch.State != nil {
		// The checkpoint rides in block 0's transaction; its report is not
		// awaited: the commit fails when it could not be written.
		if err := l.blocks[0].producer.Produce(l.txn.Checkpoint(l.cfg.Key, p.batch.State), nil); err != nil {
			p.failure = fmt.Errorf("produce the checkpoint: %w", err)
		}
	}
	l.sendNow(p.out)
	// The producer copied the records: the next batch reuses the slice.
	l.spare, p.out = p.out, nil
	if l.txn != nil && p.failure != nil {
		p.failure = l.txnError(p.failure)
	}
}

// sendNow has each producer left holding part of a librdkafka batch (fewer
// than batch_length records) send it at once instead of waiting out
// linger_time: nothing more is produced before this batch is resolved, so
// the wait would only delay it. The Flush (librdkafka ignores linger.ms
// while one runs) runs aside, so a Pipelined source is polled meanwhile;
// it ends when every record is acknowledged, or after linger_time.
func (l *loop) sendNow(out []outRecord) {
	counts := make([]int, len(l.blocks))
	for i := range out {
		counts[out[i].b.idx]++
	}
	for i, b := range l.blocks {
		if counts[i]%b.batch == 0 {
			continue
		}
		l.flushes.Add(1)
		go func() {
			defer l.flushes.Done()
			// A millisecond more, or it returns before it flushes.
			b.producer.Flush(b.linger + 1)
		}()
	}
}

// await waits for p's delivery reports and, when all were delivered, saves
// its state and Acks it. It returns nil when the batch is acknowledged, or
// why it is not, with saveFailed set when the produce succeeded and the
// state save did not; the caller then Nacks.
func (l *loop) await(stop, ctx context.Context, p *pending) (failure error, saveFailed bool) {
	failure, saveFailed = l.wait(stop, p), false
	if l.txn != nil && p.open {
		p.open = false
		start := time.Now()
		if failure == nil {
			failure = l.commit(stop, ctx)
			if failure == nil && p.batch.State != nil {
				l.saveH.Observe(time.Since(start).Seconds())
				l.tr.Counters.StateSaves.Add(1)
			}
		} else if err := l.abort(stop, ctx); err != nil {
			failure = err
		}
	} else if failure == nil && p.batch.State != nil && l.txn == nil {
		start := time.Now()
		err := l.cfg.Store.Save(ctx, l.cfg.Key, p.batch.State)
		l.saveH.Observe(time.Since(start).Seconds())
		if err != nil {
			l.tr.Counters.StateFails.Add(1)
			failure, saveFailed = fmt.Errorf("state save failed after the batch was produced (it will be produced again): %w", err), true
		} else {
			l.tr.Counters.StateSaves.Add(1)
		}
	}
	if failure != nil {
		return failure, saveFailed
	}
	c := &l.tr.Counters
	c.Batches.Add(1)
	c.LastBatchAt.Store(time.Now().UnixNano())
	c.Acked.Add(1)
	c.ConsecNacks.Store(0)
	c.DeadLetters.Add(p.dead)
	l.ackedC.Add(float64(p.n))
	if err := l.cfg.Source.OnBatchResult(ctx, sdk.Ack); err != nil {
		l.log.Warn("OnBatchResult(ack) failed", "err", err)
	}
	if l.tr.Status() == status.Error && !l.tr.Unhealthy() {
		l.log.Info("batch acknowledged after failures; status back to Running")
		l.tr.Set(status.Running)
	}
	return nil, false
}

// wait waits for p's delivery reports and returns p's failure, if any.
func (l *loop) wait(stop context.Context, p *pending) error {
	if p.reports == nil {
		return p.failure
	}
	delivered, err := l.collect(stop, p.reports, p.sent)
	p.reports = nil
	l.produceH.Observe(time.Since(p.start).Seconds())
	l.tr.Counters.Produced.Add(int64(delivered))
	if p.failure == nil {
		p.failure = err
	}
	if p.failure != nil {
		// A topic may have gone; look again next time.
		clear(l.known)
	}
	return p.failure
}

// nack reports a failed batch; it returns an error wrapping
// ErrTooManyNacks when the poll task must stop, after backing off
// otherwise.
func (l *loop) nack(stop, ctx context.Context, p *pending, failure error, saveFailed bool) error {
	consec := l.nacked(ctx, p, failure)
	if saveFailed {
		l.tr.Fail(failure)
	} else {
		l.tr.RecordError(failure)
	}
	if consec >= int64(l.cfg.MaxConsecutiveNacks) {
		err := fmt.Errorf("%w: %d in a row, stopping the poll task; last: %v", ErrTooManyNacks, consec, failure)
		l.log.Error("source stopped", "err", err)
		l.tr.Fail(err)
		return err
	}
	l.sleep(stop, int(consec))
	return nil
}

// nacked counts and logs p as nacked and tells the source; it returns
// the nacks in a row.
func (l *loop) nacked(ctx context.Context, p *pending, failure error) int64 {
	c := &l.tr.Counters
	c.Batches.Add(1)
	c.LastBatchAt.Store(time.Now().UnixNano())
	c.Nacked.Add(1)
	consec := c.ConsecNacks.Add(1)
	l.nackedC.Add(float64(p.n))
	l.log.Warn("batch nacked", "records", p.n, "consecutive_nacks", consec, "err", failure)
	if err := l.cfg.Source.OnBatchResult(ctx, sdk.Nack); err != nil {
		l.log.Warn("OnBatchResult(nack) failed", "err", err)
	}
	return consec
}
