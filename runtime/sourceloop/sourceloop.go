// Package sourceloop runs one source as sources.md describes: poll, decode,
// transform, route, produce through one producer per [[topics]] block, wait
// for every delivery report, then save the state and Ack, or Nack and save
// nothing.
//
// Several [[topics]] blocks fan out: every message of a batch goes through
// every block, each with its own schema, route and producer settings, and
// the batch is acknowledged only when every copy is delivered.
//
// Every producer runs with acks=all and enable.idempotence=true; properties
// that would weaken either are refused (definition.WeakensProducer). A block
// without create_topics never creates a topic, not even through a broker
// that creates topics on a metadata request (allow.auto.create.topics=false).
//
// What happens when things go wrong (sources.md, "When things go wrong"):
//
//	Poll returns an error         logged, kept as last error, Poll again after a short back-off;
//	                              MaxPollFailures in a row (or one sdk.IsPermanent)  set status Error, a successful Poll Running
//	record cannot be decoded,     with the block's dead_letter_topic: produced there with the
//	  transformed or routed         deadletter headers as part of the batch; without: Nack, back off
//	topic missing, create fails,  Nack, back off (exponential, capped); a failed dead-letter
//	  or a delivery report fails    produce fails the batch like any other
//	MaxConsecutiveNacks in a row  Run returns ErrTooManyNacks, status Error
//	a producer's fatal error      Nack; Run returns ErrProducerFatal at once, status Error (such as
//	                              an idempotent producer out of sequence: it can never send again)
//	state save fails after a      Nack, status Error
//	  successful produce
//	a batch succeeds              consecutive Nacks reset; Error cleared to Running
//	empty batch                   Ack without touching the store; any state it carries is ignored
//
// Batches are produced one at a time: a batch is produced only after the
// one before it is resolved (every record delivered and the state saved,
// or nacked), so a crash repeats one batch at most. A source that
// implements sdk.Pipelined is polled and prepared ahead (up to
// PollAhead batches in all) while the batch before is being delivered,
// and its next batch is produced the moment that one is saved.
//
// With Config.TransactionalID (distributed mode), every batch is one
// transaction of each block's producer: its records, its dead letters and
// its checkpoint record (the Store must be a state.InBroker) commit together
// or not at all, and OnBatchResult(Ack) comes only after the commit. The
// producers' InitTransactions fences every earlier producer with the same
// transactional id (a stale owner: its next commit fails), and Run loads
// the state only after it, so it sees every batch the earlier owner
// committed. A fenced producer ends Run with an error wrapping ErrFenced.
// Transactions are one at a time: a Pipelined source is not polled ahead.
// With several [[topics]] blocks, each block's producer has its own
// transaction (id TransactionalID.i for block i > 0), committed before
// block 0's, which carries the checkpoint: a failure between the commits
// repeats those blocks' records after a restart (at least once) but never
// saves a checkpoint ahead of its records.
package sourceloop

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/internal/defaults"
	"github.com/picomq/pico-connectors/runtime/backoff"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/state"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// Config is everything Run needs to run one source.
type Config struct {
	// Key is the connector's key; it names the state blob in Store and
	// labels logs and metrics.
	Key string
	// Topics are the definition's [[topics]] blocks. Each block is one
	// producer with its own route, schema, batch_length (batch.num.messages),
	// linger_time (linger.ms) and properties. Every message of a batch is
	// sent through every block (fan-out): a source with two blocks writes
	// each record twice, once per block's route.
	Topics []definition.Topics
	// BaseDir resolves a relative avro_schema_path; normally the folder of
	// the definition file. Empty means the working directory.
	BaseDir string
	// Source is the plugin, already built by its registration's NewSource.
	// Run opens it with State and calls Close when it returns.
	Source sdk.Source
	// State is the last committed state blob loaded from Store, nil when
	// there is none; Run hands it to Source.Open. With TransactionalID,
	// Run loads the state itself, after fencing, and State is not used.
	State []byte
	// TransactionalID, when set, runs every batch as a transaction of
	// producers with this transactional.id (see the package doc); the
	// Store must then be a state.InBroker.
	TransactionalID string
	// Store saves the candidate state of each acknowledged batch under Key.
	Store state.Store
	// Transforms run in order on each decoded record, before routing.
	Transforms []sdk.Transform
	// BootstrapServers is the comma-separated broker list.
	BootstrapServers string
	// Properties are librdkafka settings applied to every producer and to
	// the admin client (the runtime's [broker.properties]); each block's
	// own Properties are applied on top of them.
	Properties map[string]string
	// Logger receives the loop's logs; nil means slog.Default().
	Logger *slog.Logger
	// Tracker receives the status and counters; nil means a private one.
	// Run sets Running once its producers exist, Stopped after a graceful
	// stop, and Error as the table above says.
	Tracker *status.Tracker
	// Metrics receives the loop's stage durations and record counters
	// (see package metrics); nil means sdk.DiscardMetrics.
	Metrics sdk.Metrics
	// RetryDelay is the first back-off after a Nack, doubled on each
	// consecutive Nack up to MaxRetryDelay, with 20% jitter. Zero means
	// 100ms.
	RetryDelay time.Duration
	// MaxRetryDelay caps the back-off. Zero means 10s.
	MaxRetryDelay time.Duration
	// MaxConsecutiveNacks stops the poll task with status Error after this
	// many Nacks in a row. Zero means 30.
	MaxConsecutiveNacks int
	// MaxPollFailures sets status Error, with the last error, after this
	// many Poll errors in a row; Poll is still called again after each
	// (with back-off), and the first successful Poll after them sets
	// Running again. Zero means DefaultMaxPollFailures.
	MaxPollFailures int
	// DeliveryTimeout bounds the delivery of one record (librdkafka
	// message.timeout.ms); a batch fails when a record is not delivered in
	// time. Zero means 30s.
	DeliveryTimeout time.Duration
	// StopTimeout bounds how long a stop waits for the delivery reports of
	// the batch in flight; after it the undelivered records are purged and
	// the batch is nacked, so a stop with the broker down stays quick.
	// Zero means 5s.
	StopTimeout time.Duration
}

// ErrTooManyNacks is returned by Run when MaxConsecutiveNacks batches in a
// row failed; the tracker is then in status Error.
var ErrTooManyNacks = errors.New("too many consecutive nacks")

// ErrProducerFatal is wrapped by the error Run returns when a producer
// (not transactional) hit a fatal error, after which it refuses every
// record: the batch in flight is nacked and the tracker is in status
// Error. The supervisor starts the source again with new producers.
var ErrProducerFatal = errors.New("the producer hit a fatal error and cannot send again")

// ErrFenced is wrapped by the error Run returns when a transactional
// producer was fenced by a newer one with the same transactional id (another
// runtime took the source over) or hit another fatal error: nothing of the
// batch in flight is committed. Run leaves the tracker's status to the
// caller.
var ErrFenced = errors.New("producer fenced: another runtime owns this source now")

type block struct {
	blockSpec
	producer *kafka.Producer
	admin    *kafka.AdminClient
}

type loop struct {
	cfg    Config
	log    *slog.Logger
	tr     *status.Tracker
	blocks []*block
	// known holds topics seen to exist (or created).
	known map[string]bool
	// spare is the records slice of the last batch sent, for the next.
	spare []outRecord
	// flushes are the Flush calls that send a batch's last records at
	// once (see sendNow); close waits for them.
	flushes sync.WaitGroup

	decodeH, transformH, produceH, saveH sdk.Histogram
	ackedC, nackedC                      sdk.Counter

	// txn is the checkpoint store in transactional mode, nil otherwise.
	txn state.InBroker
}

// Run polls the source until ctx is cancelled or the poll task gives up,
// then closes the producers and the source. It returns nil after a graceful
// stop, an error wrapping ErrTooManyNacks (and the last failure) after
// MaxConsecutiveNacks Nacks in a row, or the error of an unusable
// definition or client.
//
// A batch that Poll returned is always resolved, even when ctx is cancelled
// meanwhile: its delivery reports are awaited (up to DeliveryTimeout) and
// its state is saved before Run returns.
func Run(ctx context.Context, cfg Config) (err error) {
	l, err := newLoop(cfg)
	if err != nil {
		l.tr.Fail(err)
		if cfg.Source != nil {
			_ = cfg.Source.Close(context.WithoutCancel(ctx))
		}
		return err
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	defer stopLogs()
	defer func() {
		l.close()
		if cerr := cfg.Source.Close(context.WithoutCancel(ctx)); cerr != nil {
			l.log.Warn("source close failed", "err", cerr)
			if err == nil {
				err = fmt.Errorf("close source: %w", cerr)
			}
		}
		if l.tr.Status() != status.Error {
			l.tr.Set(status.Stopped)
		}
	}()
	if l.txn != nil {
		// Fence earlier owners first, then load what they committed.
		if err := l.open(ctx, logCtx); err != nil {
			return l.failOpen(ctx, err)
		}
		blob, err := l.cfg.Store.Load(ctx, l.cfg.Key)
		if err != nil {
			return l.failOpen(ctx, fmt.Errorf("load state: %w", err))
		}
		cfg.State = blob
	}
	if err := cfg.Source.Open(ctx, cfg.State); err != nil {
		err = fmt.Errorf("open source: %w", err)
		l.tr.Fail(err)
		return err
	}
	if l.txn == nil {
		if err := l.open(ctx, logCtx); err != nil {
			l.tr.Fail(err)
			return err
		}
	}
	if sn, ok := cfg.Source.(sdk.Snapshotter); ok {
		// Snapshots on demand reach the source while it is open.
		l.tr.SetSnapshotter(sn)
		defer l.tr.SetSnapshotter(nil)
	}
	l.tr.Set(status.Running)
	return l.run(ctx)
}

// failOpen reports a failure to open in transactional mode: a fence, or a
// stop meanwhile, is the caller's to report.
func (l *loop) failOpen(ctx context.Context, err error) error {
	if !errors.Is(err, ErrFenced) && ctx.Err() == nil {
		l.tr.Fail(err)
	}
	return err
}

func newLoop(cfg Config) (*loop, error) {
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	cfg.Tracker = cmp.Or(cfg.Tracker, status.New(string(sdk.KindSource), cfg.Key, nil))
	cfg.Metrics = cmp.Or(cfg.Metrics, sdk.DiscardMetrics)
	cfg.RetryDelay = defaults.Positive(cfg.RetryDelay, 100*time.Millisecond)
	cfg.MaxRetryDelay = defaults.Positive(cfg.MaxRetryDelay, 10*time.Second)
	if cfg.MaxRetryDelay < cfg.RetryDelay {
		cfg.MaxRetryDelay = cfg.RetryDelay
	}
	cfg.MaxConsecutiveNacks = defaults.Positive(cfg.MaxConsecutiveNacks, 30)
	cfg.MaxPollFailures = defaults.Positive(cfg.MaxPollFailures, DefaultMaxPollFailures)
	cfg.DeliveryTimeout = defaults.Positive(cfg.DeliveryTimeout, 30*time.Second)
	cfg.StopTimeout = defaults.Positive(cfg.StopTimeout, 5*time.Second)
	l := &loop{
		cfg:        cfg,
		log:        cfg.Logger,
		tr:         cfg.Tracker,
		known:      map[string]bool{},
		decodeH:    metrics.Stage(cfg.Metrics, metrics.StageDecode),
		transformH: metrics.Stage(cfg.Metrics, metrics.StageTransform),
		produceH:   metrics.Stage(cfg.Metrics, metrics.StageProduce),
		saveH:      metrics.Stage(cfg.Metrics, metrics.StageStateSave),
		ackedC:     cfg.Metrics.Counter(metrics.RecordsAcknowledged, "Records of acknowledged batches."),
		nackedC:    cfg.Metrics.Counter(metrics.RecordsNacked, "Records of nacked batches."),
	}
	if cfg.Source == nil {
		return l, errors.New("sourceloop: no source")
	}
	if cfg.Store == nil {
		return l, errors.New("sourceloop: no state store")
	}
	specs, err := compileBlocks(cfg.Topics, cfg.BaseDir)
	if err != nil {
		return l, err
	}
	if err := checkProperties("broker.properties", cfg.Properties); err != nil {
		return l, err
	}
	if cfg.TransactionalID != "" {
		ib, ok := cfg.Store.(state.InBroker)
		if !ok {
			return l, errors.New("sourceloop: a transactional source needs a state store in the broker (state.storage = \"broker\")")
		}
		l.txn = ib
	}
	for _, s := range specs {
		l.blocks = append(l.blocks, &block{blockSpec: s})
	}
	return l, nil
}

// DefaultMaxPollFailures is how many Poll errors in a row set status Error
// when Config.MaxPollFailures is zero: with the default back-off, about 40 s
// of failures, so a database restart of a few seconds does not flip the
// status while one that stays down does. An sdk.Permanent error sets Error at
// once.
const DefaultMaxPollFailures = 10

// run is the poll task; the package doc says how batches are pipelined.
func (l *loop) run(ctx context.Context) error {
	depth := 1
	if p, ok := l.cfg.Source.(sdk.Pipelined); ok && l.txn == nil {
		depth = max(1, p.PollAhead())
	}
	// The batches are resolved even if ctx was cancelled meanwhile.
	bctx := context.WithoutCancel(ctx)
	// queue holds the batches polled and not yet resolved, oldest first;
	// only queue[0] is ever produced.
	var queue []*pending
	// resolveOldest resolves queue[0] and produces the next batch. When it
	// fails, the later batches, never produced, are dropped without a
	// result: the Nack drops their candidates. It returns an error
	// wrapping ErrTooManyNacks when the poll task stops.
	resolveOldest := func() error {
		p := queue[0]
		queue = queue[1:]
		failure, saveFailed := l.await(ctx, bctx, p)
		if failure == nil {
			if len(queue) > 0 {
				l.send(ctx, bctx, queue[0])
			}
			return nil
		}
		queue = nil
		if errors.Is(failure, ErrFenced) {
			// Another runtime owns the source: no retry here.
			l.log.Warn("producer fenced; this runtime stops the source", "err", failure)
			if err := l.cfg.Source.OnBatchResult(bctx, sdk.Nack); err != nil {
				l.log.Warn("OnBatchResult(nack) failed", "err", err)
			}
			return failure
		}
		if fatal := l.producerFatal(); fatal != nil {
			// Every later produce would fail too: no retry here.
			l.nacked(bctx, p, failure)
			l.tr.Fail(fatal)
			l.log.Error("source stopped", "err", fatal)
			return fatal
		}
		return l.nack(ctx, bctx, p, failure, saveFailed)
	}
	resolveAll := func() error {
		for len(queue) > 0 {
			if err := resolveOldest(); err != nil {
				return err
			}
		}
		return nil
	}
	c := &l.tr.Counters
	pollFails := 0
	for ctx.Err() == nil {
		l.checkHealth() // sdk.Health, see below
		if len(queue) >= depth || len(queue) > 1 && queue[0].delivered() {
			if err := resolveOldest(); err != nil {
				return err
			}
			continue
		}
		batch, err := l.cfg.Source.Poll(ctx)
		if err != nil || len(batch.Messages) == 0 {
			if rerr := resolveAll(); rerr != nil {
				return rerr
			}
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			pollFails++
			l.log.Warn("poll failed; polling again", "err", err, "attempt", pollFails)
			err = fmt.Errorf("poll: %w", err)
			if sdk.IsPermanent(err) && pollFails < l.cfg.MaxPollFailures {
				// Polling again will not help (a dropped table, an
				// invalidated slot): say so at once.
				pollFails = l.cfg.MaxPollFailures
			}
			if pollFails >= l.cfg.MaxPollFailures {
				if pollFails == l.cfg.MaxPollFailures {
					l.log.Error("poll keeps failing; status Error until a poll succeeds", "failures_in_a_row", pollFails, "err", err)
				}
				l.tr.Fail(fmt.Errorf("%d polls in a row failed; last: %w", pollFails, err))
			} else {
				l.tr.RecordError(err)
			}
			l.sleep(ctx, pollFails)
			continue
		}
		if pollFails >= l.cfg.MaxPollFailures && l.tr.Status() == status.Error && !l.tr.Unhealthy() {
			l.log.Info("poll succeeded after failures; status back to Running")
			l.tr.Set(status.Running)
		}
		pollFails = 0
		if len(batch.Messages) == 0 {
			if batch.State != nil {
				l.log.Warn("source returned an empty batch with state; the state is ignored")
			}
			if err := l.cfg.Source.OnBatchResult(bctx, sdk.Ack); err != nil {
				l.log.Warn("OnBatchResult(ack) of an empty batch failed", "err", err)
			}
			continue
		}
		c.Polled.Add(int64(len(batch.Messages)))
		p := l.prepareBatch(ctx, batch)
		queue = append(queue, p)
		if len(queue) == 1 {
			l.send(ctx, bctx, p)
		}
		if p.failure != nil {
			// No use polling ahead of a batch that already failed.
			if err := resolveAll(); err != nil {
				return err
			}
		}
	}
	return resolveAll()
}

// sleep backs off before attempt n+1: RetryDelay doubled n-1 times, capped,
// with 20% jitter. It returns early when ctx ends.
func (l *loop) sleep(ctx context.Context, n int) {
	_ = backoff.Sleep(ctx, backoff.Exponential(l.cfg.RetryDelay, l.cfg.MaxRetryDelay)(n))
}

// checkHealth applies a sdk.Health source's condition before each Poll
// (status.Tracker.ReportHealth): Error while it reports one, Poll going on.
func (l *loop) checkHealth() {
	if h, ok := l.cfg.Source.(sdk.Health); ok {
		l.tr.ReportHealth(h.Health())
	}
}
