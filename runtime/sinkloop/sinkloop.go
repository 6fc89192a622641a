// Package sinkloop runs one sink: a librdkafka consumer that subscribes to
// the sink's [[topics]] blocks, hands batches of records to the plugin's
// Consume, and commits offsets only for what the sink has written.
//
// The loop:
//
//  1. Polls records into the batch in hand until batch_length records are
//     in it or poll_interval has passed since its first record (an empty
//     batch is never delivered). All blocks share one batch_length and
//     poll_interval; CheckTopics refuses blocks that differ.
//  2. Hands the batch to Consume in a goroutine and goes on polling the
//     next batch meanwhile. When that one is full too, it pauses every
//     assigned partition and keeps calling Poll (so the consumer stays in
//     its group however long Consume takes, max.poll.interval.ms
//     notwithstanding) until Consume returns; then resumes.
//  3. Before Consume, off the poll loop, checks each payload once against
//     its block's schema (json must parse, text must be UTF-8) and runs the
//     [[transforms]] (decode per the schema, apply in order, re-encode).
//     A payload that does not match goes to the block's dead_letter_topic
//     (stage "decode"), or without one is handed over as raw, untransformed,
//     with a warning. A transform error sends the record to the
//     dead_letter_topic (stage "transform"), or without one fails the batch.
//  4. When Consume returns *sdk.Rejected and every rejected record's block
//     has a dead_letter_topic, the loop produces them there (stage
//     "consume"). Dead letters carry their own key, payload and headers
//     plus those of package deadletter, go through one idempotent acks=all
//     producer created only when a block has the key, and are waited for
//     before the batch counts as consumed. A failed dead-letter produce
//     fails the batch.
//  5. On success, commits. A plain sdk.Sink: the offset after the
//     batch's last record of each partition. A sdk.DeferredSink: per
//     partition, its Durable() offset once the loop has consumed up to it,
//     after each Consume and every CommitInterval, so commits trail
//     durability while consumption goes on, and every commit is an offset
//     the sink reported. Commits run off the poll loop, at most every 100
//     ms, each with the latest offsets; a failed one is retried on its own,
//     backing off up to 5 s. Counters.Committed counts the committed
//     records.
//  6. On failure (an error from Consume, a failed transform or dead-letter
//     produce), backs off (exponential, capped) and redelivers the same
//     batch; a DeferredSink skips what it already accepted.
//
// Rebalance (several runtimes in one group, or a pattern that stops
// matching): partitions are spread with the cooperative-sticky strategy
// (each topic has one partition, so a fleet spreads whole topics; a
// rebalance moves only those that change hands). On revoke the loop lets the Consume in progress finish (its
// context is cancelled so a Consume waiting for room returns), calls a
// DeferredSink's Release with the revoked partitions, commits (Durable once
// more for a DeferredSink), drops the records of the revoked partitions it
// holds, and only then gives the partitions up. Their next owner resumes
// from that commit. Lost partitions (the group moved on without this member)
// are released but not committed. Each assign and revoke updates the
// tracker's Placement: the partitions held ("topic/partition", sorted) and
// the count of rebalance events seen.
//
// Stranded partitions: a DeferredSink's partitions are given up like lost
// ones (released, not committed, their records ignored) when a rebalance
// has not completed for a third of the session timeout (librdkafka's
// statistics every 500 ms show the join state): a broker built on upstream
// kfake expires a member that waits in JoinGroup past its session, without
// answering it, and hands its partitions to another member while
// librdkafka goes on fetching them here. The embedded broker is patched
// (third_party/kfake) and Kafka keeps such a member; the safeguard stays
// for an external broker that does not, and costs a correct one no more
// than a re-read after a rebalance slower than a third of the session.
// Two writers of one partition would each upload a file from the same
// offset, and a stop's upload cut short is not the other's. Once the group
// is steady again, those still assigned are read again from their last
// commit.
//
// Pattern subscriptions: librdkafka reads the topic list again every
// topic.metadata.refresh.interval.ms (5000 unless [broker.properties] or the
// block's properties say otherwise); a new topic that matches is assigned
// at the rebalance that follows, so within about that interval plus a
// rebalance.
//
// Static membership: with Config.InstanceID set (the runtime passes its
// runtime.id), the consumer joins with group.instance.id = InstanceID. A
// runtime restarted after a crash takes its old place in the group and its
// old partitions at once, without a rebalance and without waiting for the
// session of its dead self to time out (session.timeout.ms:
// Config.SessionTimeout, librdkafka's 45 s without it). The price: a static
// member does not leave the group when it stops, so the partitions of a
// runtime stopped for good move to the others only once its session times
// out. A second runtime with the same id fences
// the first: the first stops with an Error naming runtime.id.
//
// Stop (ctx cancelled): the Consume in progress finishes, the batch in hand
// is delivered (unless a failed one awaits redelivery), the sink's Close
// flushes, the loop commits (Durable once more for a DeferredSink), and
// then the consumer leaves the group (a static member stays in it until its
// session times out, see above).
package sinkloop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/picomq/pico-connectors/internal/defaults"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// ErrClose is wrapped by the error Run returns when the sink's Close
// failed, such as an S3 sink that could not upload its open files.
var ErrClose = errors.New("close")

// Run opens the sink and consumes until ctx is cancelled, then finishes the
// batch in hand, closes the sink (which flushes), commits and closes the
// consumer. It returns nil after a graceful stop, or the error that stopped
// the sink (a failed Open, a bad definition, an unusable consumer, a failed
// Close).
func Run(ctx context.Context, cfg Config) (err error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Tracker = cmp.Or(cfg.Tracker, status.New(string(sdk.KindSink), cfg.Key, nil))
	cfg.Metrics = cmp.Or(cfg.Metrics, sdk.DiscardMetrics)
	cfg.RetryDelay = defaults.Positive(cfg.RetryDelay, 100*time.Millisecond)
	cfg.MaxRetryDelay = defaults.Positive(cfg.MaxRetryDelay, 30*time.Second)
	cfg.ErrorAfter = defaults.Positive(cfg.ErrorAfter, 3)
	cfg.CloseTimeout = defaults.Positive(cfg.CloseTimeout, 30*time.Second)
	cfg.CommitInterval = defaults.Positive(cfg.CommitInterval, time.Second)
	cfg.DeliveryTimeout = defaults.Positive(cfg.DeliveryTimeout, 30*time.Second)
	cfg.GroupID = cmp.Or(cfg.GroupID, "pico-connectors-"+cfg.Key)
	l := &loop{
		cfg: cfg, log: cfg.Logger, tr: cfg.Tracker,
		results:    make(chan outcome, 1),
		assigned:   map[sdk.TopicPartition]bool{},
		stranded:   map[sdk.TopicPartition]bool{},
		consumeH:   metrics.Stage(cfg.Metrics, metrics.StageConsume),
		transformH: metrics.Stage(cfg.Metrics, metrics.StageTransform),
		ackedC:     cfg.Metrics.Counter(metrics.RecordsAcknowledged, "Records of acknowledged batches."),
		nackedC:    cfg.Metrics.Counter(metrics.RecordsNacked, "Records of nacked batches."),
	}
	fail := func(e error) error {
		l.tr.Fail(e)
		return e
	}
	if cfg.Sink == nil {
		return fail(errors.New("sinkloop: no sink"))
	}
	l.deferred, _ = cfg.Sink.(sdk.DeferredSink)
	if l.plan, err = compile(cfg.Topics, cfg.BaseDir); err != nil {
		return fail(err)
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	defer stopLogs()
	if l.plan.dlq {
		if l.dlq, err = newDLQProducer(logCtx, cfg, l.log); err != nil {
			return fail(err)
		}
		defer l.dlq.close()
	}
	if ts, ok := cfg.Sink.(sdk.TopicSchemas); ok {
		if err := ts.SetTopics(l.plan.schemas()); err != nil {
			return fail(fmt.Errorf("topics: %w", err))
		}
	}
	if err := cfg.Sink.Open(ctx); err != nil {
		return fail(fmt.Errorf("open: %w", err))
	}
	closeSink := func() error {
		start := l.stopAt
		if start.IsZero() {
			start = time.Now()
		}
		cctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), start.Add(cfg.CloseTimeout))
		defer cancel()
		if err := cfg.Sink.Close(cctx); err != nil {
			l.log.Error("sink close failed", "err", err)
			return fmt.Errorf("%w: %w", ErrClose, err)
		}
		return nil
	}
	if err := l.subscribe(logCtx); err != nil {
		return fail(errors.Join(err, closeSink()))
	}
	l.tr.Set(status.Running)
	l.run(ctx)
	if l.fatal != nil {
		// The partitions belong to another member now: release them
		// without committing (the consumer could not commit anyway).
		l.release(l.held())
	}
	cerr := closeSink()
	if l.deferred != nil && l.fatal == nil {
		l.commitDurable()
	}
	l.closing = true
	// The last commit and the consumer's close wait for the group
	// coordinator, which a stuck rebalance can hold for minutes: they get
	// what is left of CloseTimeout (at least 2s), so a graceful stop ends
	// in time; what they could not commit is read again by the next owner.
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		l.ledger.commits.close()
		if l.fatal != nil {
			// confluent-kafka-go 2.11's Close waits forever for a
			// consumer with a fatal error (confluent-kafka-go#1588):
			// leave the handle to the process's end.
			return
		}
		if err := l.c.Close(); err != nil {
			l.log.Warn("consumer close failed", "err", err)
		}
	}()
	start := l.stopAt
	if start.IsZero() {
		start = time.Now()
	}
	wait := max(2*time.Second, time.Until(start.Add(cfg.CloseTimeout)))
	select {
	case <-closed:
	case <-time.After(wait):
		err := fmt.Errorf("consumer group %q: the last offset commit and the consumer's close did not finish within the close timeout (%s): the group coordinator did not answer (a rebalance may hold it); the records after the last commit are read again by the partitions' next owner",
			cfg.GroupID, cfg.CloseTimeout)
		l.log.Error("sink stop incomplete", "err", err)
		if l.fatal != nil {
			err = l.fatal
		}
		if l.panicked != nil {
			err = errors.Join(l.panicked, err)
		}
		// A failed Close is reported too (ErrClose: files not uploaded).
		return fail(errors.Join(err, cerr))
	}
	if l.fatal != nil {
		return fail(errors.Join(l.fatal, cerr))
	}
	if l.panicked != nil {
		return fail(errors.Join(l.panicked, cerr))
	}
	if cerr != nil {
		return fail(cerr)
	}
	l.tr.Set(status.Stopped)
	return nil
}
