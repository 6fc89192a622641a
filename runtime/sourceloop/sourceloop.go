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
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/backoff"
	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/route"
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
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Tracker == nil {
		cfg.Tracker = status.New(string(sdk.KindSource), cfg.Key, nil)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = sdk.DiscardMetrics
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 100 * time.Millisecond
	}
	if cfg.MaxRetryDelay <= 0 {
		cfg.MaxRetryDelay = 10 * time.Second
	}
	if cfg.MaxRetryDelay < cfg.RetryDelay {
		cfg.MaxRetryDelay = cfg.RetryDelay
	}
	if cfg.MaxConsecutiveNacks <= 0 {
		cfg.MaxConsecutiveNacks = 30
	}
	if cfg.MaxPollFailures <= 0 {
		cfg.MaxPollFailures = DefaultMaxPollFailures
	}
	if cfg.DeliveryTimeout <= 0 {
		cfg.DeliveryTimeout = 30 * time.Second
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = 5 * time.Second
	}
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

// DefaultMaxPollFailures is how many Poll errors in a row set status Error
// when Config.MaxPollFailures is zero: with the default back-off, about 40 s
// of failures, so a database restart of a few seconds does not flip the
// status while one that stays down does. An sdk.Permanent error sets Error at
// once.
const DefaultMaxPollFailures = 10

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

// sleep backs off before attempt n+1: RetryDelay doubled n-1 times, capped,
// with 20% jitter. It returns early when ctx ends.
func (l *loop) sleep(ctx context.Context, n int) {
	_ = backoff.Sleep(ctx, backoff.Exponential(l.cfg.RetryDelay, l.cfg.MaxRetryDelay)(n))
}

type outRecord struct {
	b   *block
	msg kafka.Message
}

// prepare decodes, transforms, routes and encodes every message once per
// block. A message that fails decode, transform or routing goes to the
// block's dead_letter_topic when it has one (dead counts those), and fails
// the batch otherwise.
func (l *loop) prepare(msgs []sdk.Message) (out []outRecord, dead int, err error) {
	if n := len(msgs) * len(l.blocks); cap(l.spare) >= n {
		out, l.spare = l.spare[:0], nil
	} else {
		out = make([]outRecord, 0, n)
	}
	var decodeT, transformT time.Duration
	for _, b := range l.blocks {
		fast := len(l.cfg.Transforms) == 0 && !b.router.NeedsValue()
		// topic points at the topic of the last record, shared by the
		// next records with the same one.
		var topic *string
		t0 := time.Now()
		for i := range msgs {
			m := &msgs[i]
			var (
				value   []byte
				key     = m.Key
				headers = m.Headers
				name    string
				stage   deadletter.Stage
				err     error
			)
			if fast {
				stage = deadletter.StageDecode
				value, err = b.codec.Wire(m.Payload)
				if err != nil {
					err = fmt.Errorf("schema %s: %w", b.codec.Schema(), err)
				} else {
					stage = deadletter.StageRoute
					name, err = b.router.Topic(route.Input{Key: key, Headers: headers})
				}
			} else {
				name, key, headers, value, stage, err = l.slowPath(b, m, &decodeT, &transformT)
			}
			if err != nil {
				err = fmt.Errorf("record %d of the batch, topics[%d]: %w", i, b.idx, err)
				if b.def.DeadLetterTopic == "" {
					return nil, 0, err
				}
				if name == "" {
					name = b.def.Topic.Literal
				}
				dl := b.def.DeadLetterTopic
				out = append(out, outRecord{b: b, msg: kafka.Message{
					TopicPartition: kafka.TopicPartition{Topic: &dl, Partition: kafka.PartitionAny},
					Key:            m.Key,
					Value:          m.Payload,
					Timestamp:      m.Timestamp,
					Headers:        kafkaHeaders(deadletter.Headers(m.Headers, deadletter.Origin{Connector: l.cfg.Key, Stage: stage, Topic: name, Offset: -1, Timestamp: m.Timestamp}, err)),
				}})
				l.log.Debug("record sent to the dead-letter topic", "dead_letter_topic", dl, "err", err)
				dead++
				continue
			}
			if topic == nil || *topic != name {
				topic = &name
			}
			out = append(out, outRecord{b: b, msg: kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: topic, Partition: kafka.PartitionAny},
				Key:            key,
				Value:          value,
				Timestamp:      m.Timestamp,
				Headers:        kafkaHeaders(headers),
			}})
		}
		if fast {
			decodeT += time.Since(t0)
		}
	}
	l.decodeH.Observe(decodeT.Seconds())
	if len(l.cfg.Transforms) > 0 {
		l.transformH.Observe(transformT.Seconds())
	}
	return out, dead, nil
}

// slowPath decodes m, runs the transforms, routes and encodes the result;
// on failure it says at which stage.
func (l *loop) slowPath(b *block, m *sdk.Message, decodeT, transformT *time.Duration) (topic string, key []byte, headers []sdk.Header, value []byte, stage deadletter.Stage, err error) {
	t0 := time.Now()
	v, err := b.codec.Decode(m.Payload)
	if err != nil {
		*decodeT += time.Since(t0)
		return "", nil, nil, nil, deadletter.StageDecode, fmt.Errorf("schema %s: %w", b.codec.Schema(), err)
	}
	t1 := time.Now()
	*decodeT += t1.Sub(t0)
	rec := &sdk.TransformRecord{Key: m.Key, Headers: append([]sdk.Header(nil), m.Headers...), Value: v}
	for ti, tr := range l.cfg.Transforms {
		if err := tr.Apply(rec); err != nil {
			*transformT += time.Since(t1)
			return "", nil, nil, nil, deadletter.StageTransform, fmt.Errorf("transform %d: %w", ti, err)
		}
	}
	t2 := time.Now()
	*transformT += t2.Sub(t1)
	defer func() { *decodeT += time.Since(t2) }()
	topic, err = b.router.Topic(route.Input{Key: rec.Key, Headers: rec.Headers, Value: rec.Value})
	if err != nil {
		return "", nil, nil, nil, deadletter.StageRoute, err
	}
	value, err = b.codec.Encode(rec.Value)
	if err != nil {
		// The value decoded, so a transform made it unencodable (or, with
		// none, the schema cannot carry it back).
		stage = deadletter.StageDecode
		if len(l.cfg.Transforms) > 0 {
			stage = deadletter.StageTransform
		}
		return topic, nil, nil, nil, stage, fmt.Errorf("schema %s: %w", b.codec.Schema(), err)
	}
	return topic, rec.Key, rec.Headers, value, "", nil
}

func kafkaHeaders(hs []sdk.Header) []kafka.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kafka.Header, len(hs))
	for j, h := range hs {
		out[j] = kafka.Header{Key: h.Key, Value: h.Value}
	}
	return out
}

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
			cctx, cancel := context.WithTimeout(ctx, timeout)
			res, err := n.b.admin.CreateTopics(cctx, []kafka.TopicSpecification{{Topic: n.topic, NumPartitions: 1, ReplicationFactor: 1}},
				kafka.SetAdminOperationTimeout(timeout))
			cancel()
			if err != nil {
				return fmt.Errorf("create topic %q: %w", n.topic, err)
			}
			for _, r := range res {
				if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
					return fmt.Errorf("create topic %q: %v", n.topic, r.Error)
				}
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

// checkHealth applies a sdk.Health source's condition before each Poll
// (status.Tracker.ReportHealth): Error while it reports one, Poll going on.
func (l *loop) checkHealth() {
	if h, ok := l.cfg.Source.(sdk.Health); ok {
		l.tr.ReportHealth(h.Health())
	}
}
