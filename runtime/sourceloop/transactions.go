package sourceloop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// transactionalID is block b's producer's transactional.id.
func (l *loop) transactionalID(b *block) string {
	if b.idx == 0 {
		return l.cfg.TransactionalID
	}
	return l.cfg.TransactionalID + "." + strconv.Itoa(b.idx)
}

// txnError wraps ErrFenced around a fatal producer error (a fence, or any
// error after which librdkafka refuses the producer).
func (l *loop) txnError(err error) error {
	var ke kafka.Error
	if errors.As(err, &ke) && (ke.IsFatal() || ke.Code() == kafka.ErrFenced || ke.Code() == kafka.ErrProducerFenced) {
		return fmt.Errorf("%w: %w", ErrFenced, err)
	}
	return err
}

// begin starts a transaction on every block's producer.
func (l *loop) begin(stop, ctx context.Context) error {
	for _, b := range l.blocks {
		if err := b.producer.BeginTransaction(); err != nil {
			err = l.txnError(fmt.Errorf("topics[%d]: begin a transaction: %w", b.idx, err))
			_ = l.abort(stop, ctx)
			return err
		}
	}
	return nil
}

// txnTimeout bounds one commit or abort: DeliveryTimeout, or StopTimeout
// once stop has ended (a stop with the broker down stays quick).
func (l *loop) txnTimeout(stop context.Context) time.Duration {
	if stop.Err() != nil {
		return l.cfg.StopTimeout
	}
	return l.cfg.DeliveryTimeout
}

// commit commits every block's transaction, block 0 (the checkpoint) last.
// A retriable failure is retried; any other aborts what is still open.
func (l *loop) commit(stop, ctx context.Context) error {
	order := append(append([]*block(nil), l.blocks[1:]...), l.blocks[0])
	for _, b := range order {
		for attempt := 1; ; attempt++ {
			cctx, cancel := context.WithTimeout(ctx, l.txnTimeout(stop))
			err := b.producer.CommitTransaction(cctx)
			cancel()
			if err == nil {
				break
			}
			var ke kafka.Error
			if errors.As(err, &ke) && ke.IsRetriable() && attempt < 3 {
				continue
			}
			err = l.txnError(fmt.Errorf("topics[%d]: commit the batch's transaction: %w", b.idx, err))
			if aerr := l.abort(stop, ctx); errors.Is(aerr, ErrFenced) && !errors.Is(err, ErrFenced) {
				err = aerr
			}
			return err
		}
	}
	return nil
}

// abort aborts every block's open transaction; it returns an error
// wrapping ErrFenced when a producer is fenced, and ignores the others
// (a block without an open transaction refuses the abort).
func (l *loop) abort(stop, ctx context.Context) error {
	var fenced error
	for _, b := range l.blocks {
		actx, cancel := context.WithTimeout(ctx, l.txnTimeout(stop))
		err := b.producer.AbortTransaction(actx)
		cancel()
		if err == nil {
			continue
		}
		if err := l.txnError(err); errors.Is(err, ErrFenced) && fenced == nil {
			fenced = fmt.Errorf("topics[%d]: abort the batch's transaction: %w", b.idx, err)
		}
	}
	return fenced
}
