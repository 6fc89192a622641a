// Package sinkloop runs one sink: a librdkafka consumer that subscribes to
// the sink's [[topics]] blocks, hands batches of decoded records to the
// plugin's Consume, and commits offsets only after Consume succeeds.
//
// The loop, per batch:
//
//  1. Polls until batch_length records are in hand or poll_interval has
//     passed since the batch started (an empty batch is never delivered).
//  2. Builds a plugin.Record per message with the Schema of the first
//     [[topics]] block that matches its topic. A json record whose payload
//     is not valid JSON is handed over as raw, with a warning, rather than
//     blocking the partition forever.
//  3. Calls Consume. On nil it commits, synchronously, the offset after the
//     last record of each partition in the batch. On an error it seeks every
//     partition back to the batch's first offset, backs off (exponential,
//     capped) and redelivers the same records.
//
// Stop (ctx cancelled): the batch in hand is delivered and committed, then
// the sink's Close flushes, then the consumer leaves the group.
package sinkloop

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
	"github.com/picomq/pico-connectors/runtime/codec"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/plugin"
	"github.com/picomq/pico-connectors/runtime/status"
)

// Defaults of a sink's [[topics]] block.
const (
	DefaultBatchLength  = 1000
	DefaultPollInterval = "100ms"
)

// Config is everything Run needs to run one sink.
type Config struct {
	// Key is the connector's key from its definition file. It names the
	// consumer group ("pico-connectors-" + Key unless GroupID is set) and
	// labels logs and metrics.
	Key string
	// Topics are the definition's [[topics]] blocks. Each block subscribes
	// by Pattern (a regular expression; a leading ^ is added for
	// librdkafka when missing) or by Topic.Literal (an exact name). The
	// first block's BatchLength and PollInterval size the batches; each
	// topic's records are decoded with the Schema of the first block that
	// matches it.
	Topics []definition.Topics
	// Sink is the plugin, already built by its registration's NewSink.
	// Run calls Open before consuming and Close (which flushes) on stop.
	Sink plugin.Sink
	// BootstrapServers is the comma-separated broker list.
	BootstrapServers string
	// Properties are librdkafka settings applied to the consumer (the
	// runtime's [broker.properties]); each block's own Properties are
	// applied on top of them, in block order.
	Properties map[string]string
	// GroupID overrides the consumer group; empty means
	// "pico-connectors-" + Key.
	GroupID string
	// Logger receives the loop's logs; nil means slog.Default().
	Logger *slog.Logger
	// Tracker receives the status and counters; nil means a private one.
	// Run sets Running once subscribed, Error after ErrorAfter failed
	// Consume calls in a row (back to Running on the next success), and
	// Stopped after a graceful stop.
	Tracker *status.Tracker
	// Metrics receives the consume-stage durations and record counters
	// (see package metrics); nil means plugin.DiscardMetrics.
	Metrics plugin.Metrics
	// RetryDelay is the first back-off after a failed Consume, doubled on
	// each consecutive failure up to MaxRetryDelay, with 20% jitter. Zero
	// means 100ms.
	RetryDelay time.Duration
	// MaxRetryDelay caps the back-off. Zero means 30s.
	MaxRetryDelay time.Duration
	// ErrorAfter is how many failed Consume calls in a row set status
	// Error. Zero means 3.
	ErrorAfter int
	// CloseTimeout bounds the sink's Close on stop. Zero means 30s.
	CloseTimeout time.Duration
}

// reservedConsumer are consumer settings the loop depends on.
var reservedConsumer = []string{"bootstrap.servers", "group.id", "enable.auto.commit", "enable.auto.offset.store", "go.logs.channel.enable", "go.application.rebalance.enable"}

type subscription struct {
	name   string         // what librdkafka subscribes to
	re     *regexp.Regexp // nil for a literal
	schema plugin.Schema
}

type plan struct {
	subs     []subscription
	batch    int
	interval time.Duration
}

// CheckTopics checks a sink's [[topics]] blocks the way Run will use them
// and returns every problem at once (errors.Join), each naming
// topics[i].KEY.
func CheckTopics(topics []definition.Topics) error {
	_, err := compile(topics)
	return err
}

func compile(topics []definition.Topics) (plan, error) {
	var p plan
	if len(topics) == 0 {
		return p, errors.New("a sink needs at least one [[topics]] block with a pattern or a topic")
	}
	var errs []error
	for i, t := range topics {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("topics[%d].%s", i, fmt.Sprintf(format, args...)))
		}
		schema := t.Schema
		if schema == "" {
			schema = string(plugin.SchemaJSON)
		}
		if _, err := codec.New(codec.Options{Schema: schema}); err != nil {
			bad("schema: %v", err)
		}
		sub := subscription{schema: plugin.Schema(schema)}
		switch {
		case t.Pattern != "" && (t.Topic.Literal != "" || t.Topic.IsRule()):
			bad("pattern: give pattern or topic, not both")
		case t.Pattern != "":
			pat := t.Pattern
			if !strings.HasPrefix(pat, "^") {
				pat = "^" + pat
			}
			re, err := regexp.Compile(pat)
			if err != nil {
				bad("pattern %q is not a valid regular expression: %v", t.Pattern, err)
			}
			sub.name, sub.re = pat, re
		case t.Topic.IsRule():
			bad("topic: a routing rule applies to sources; a sink names a topic or a pattern")
		case t.Topic.Literal != "":
			sub.name = t.Topic.Literal
		default:
			bad("pattern is missing: give pattern (a regular expression) or topic (a name)")
		}
		if t.BatchLength < 0 {
			bad("batch_length = %d: must be at least 1", t.BatchLength)
		}
		if t.PollInterval != "" {
			d, err := confkit.ParseDuration(t.PollInterval)
			if err != nil || d <= 0 {
				bad("poll_interval %q: want a duration above zero, such as \"100ms\"", t.PollInterval)
			}
		}
		if t.Partitions > 1 {
			bad("partitions = %d: only 1 is accepted", t.Partitions)
		}
		for _, k := range reservedConsumer {
			if _, ok := t.Properties[k]; ok {
				bad("properties.%q is set by the runtime and cannot be overridden", k)
			}
		}
		p.subs = append(p.subs, sub)
	}
	if len(errs) > 0 {
		return p, errors.Join(errs...)
	}
	p.batch = topics[0].BatchLength
	if p.batch == 0 {
		p.batch = DefaultBatchLength
	}
	iv := topics[0].PollInterval
	if iv == "" {
		iv = DefaultPollInterval
	}
	p.interval, _ = confkit.ParseDuration(iv)
	return p, nil
}

type loop struct {
	cfg     Config
	log     *slog.Logger
	tr      *status.Tracker
	plan    plan
	c       *kafka.Consumer
	schemas map[string]plugin.Schema

	consumeH        plugin.Histogram
	ackedC, nackedC plugin.Counter
}

// Run opens the sink and consumes until ctx is cancelled, then finishes the
// batch in hand, closes the sink (which flushes) and closes the consumer.
// It returns nil after a graceful stop, or the error that stopped the sink
// (a failed Open, a bad definition, an unusable consumer, a failed Close).
func Run(ctx context.Context, cfg Config) (err error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Tracker == nil {
		cfg.Tracker = status.New(string(plugin.KindSink), cfg.Key, nil)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = plugin.DiscardMetrics
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 100 * time.Millisecond
	}
	if cfg.MaxRetryDelay <= 0 {
		cfg.MaxRetryDelay = 30 * time.Second
	}
	if cfg.ErrorAfter <= 0 {
		cfg.ErrorAfter = 3
	}
	if cfg.CloseTimeout <= 0 {
		cfg.CloseTimeout = 30 * time.Second
	}
	if cfg.GroupID == "" {
		cfg.GroupID = "pico-connectors-" + cfg.Key
	}
	l := &loop{
		cfg: cfg, log: cfg.Logger, tr: cfg.Tracker, schemas: map[string]plugin.Schema{},
		consumeH: metrics.Stage(cfg.Metrics, metrics.StageConsume),
		ackedC:   cfg.Metrics.Counter(metrics.RecordsAcknowledged, "Records of acknowledged batches."),
		nackedC:  cfg.Metrics.Counter(metrics.RecordsNacked, "Records of nacked batches."),
	}
	fail := func(e error) error {
		l.tr.Fail(e)
		return e
	}
	if cfg.Sink == nil {
		return fail(errors.New("sinkloop: no sink"))
	}
	if l.plan, err = compile(cfg.Topics); err != nil {
		return fail(err)
	}
	if err := cfg.Sink.Open(ctx); err != nil {
		return fail(fmt.Errorf("open: %w", err))
	}
	closeSink := func() error {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.CloseTimeout)
		defer cancel()
		if err := cfg.Sink.Close(cctx); err != nil {
			l.log.Error("sink close failed", "err", err)
			return fmt.Errorf("close: %w", err)
		}
		return nil
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	defer stopLogs()
	if err := l.subscribe(logCtx); err != nil {
		closeSink()
		return fail(err)
	}
	l.tr.Set(status.Running)
	l.run(ctx)
	cerr := closeSink()
	if err := l.c.Close(); err != nil {
		l.log.Warn("consumer close failed", "err", err)
	}
	if cerr != nil {
		return fail(cerr)
	}
	l.tr.Set(status.Stopped)
	return nil
}

func (l *loop) subscribe(logCtx context.Context) error {
	defaults := kafka.ConfigMap{
		"group.id":                 l.cfg.GroupID,
		"client.id":                "pico-connectors-" + l.cfg.Key,
		"enable.auto.commit":       false,
		"enable.auto.offset.store": false,
		"auto.offset.reset":        "earliest",
		// Discover topics that start matching a pattern within seconds.
		"topic.metadata.refresh.interval.ms": 5000,
	}
	layers := []map[string]string{l.cfg.Properties}
	for _, t := range l.cfg.Topics {
		layers = append(layers, t.Properties)
	}
	cm, err := clientconf.ConfigMap(l.cfg.BootstrapServers, defaults, reservedConsumer, layers...)
	if err != nil {
		return err
	}
	c, err := kafka.NewConsumer(&cm)
	if err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	clientconf.ForwardLogs(logCtx, c.Logs(), l.log)
	names := make([]string, 0, len(l.plan.subs))
	for _, s := range l.plan.subs {
		names = append(names, s.name)
	}
	if err := c.SubscribeTopics(names, nil); err != nil {
		c.Close()
		return fmt.Errorf("subscribe to %v: %w", names, err)
	}
	l.c = c
	return nil
}

func (l *loop) schemaOf(topic string) plugin.Schema {
	if s, ok := l.schemas[topic]; ok {
		return s
	}
	s := plugin.SchemaRaw
	for _, sub := range l.plan.subs {
		if sub.re == nil && sub.name == topic || sub.re != nil && sub.re.MatchString(topic) {
			s = sub.schema
			break
		}
	}
	l.schemas[topic] = s
	return s
}

// run consumes until ctx ends.
func (l *loop) run(ctx context.Context) {
	failures := 0
	for {
		batch := l.collect(ctx)
		if len(batch) == 0 {
			if ctx.Err() != nil {
				return
			}
			continue
		}
		err := l.deliver(ctx, batch)
		if err == nil {
			if failures >= l.cfg.ErrorAfter && l.tr.Status() == status.Error {
				l.log.Info("batch consumed after failures; status back to Running")
				l.tr.Set(status.Running)
			}
			failures = 0
			l.tr.Counters.ConsecNacks.Store(0)
			continue
		}
		failures++
		l.tr.Counters.ConsecNacks.Store(int64(failures))
		l.log.Warn("consume failed; the batch will be redelivered", "records", len(batch), "consecutive_failures", failures, "err", err)
		if failures >= l.cfg.ErrorAfter {
			l.tr.Fail(fmt.Errorf("consume failed %d times in a row: %w", failures, err))
		} else {
			l.tr.RecordError(fmt.Errorf("consume: %w", err))
		}
		if ctx.Err() != nil {
			// Stopping: leave the batch uncommitted; it is redelivered on
			// the next start.
			return
		}
		l.seekBack(batch)
		l.sleep(ctx, failures)
		if ctx.Err() != nil {
			return
		}
		l.tr.Counters.Redelivered.Add(1)
	}
}

// collect polls one batch: up to the batch length, for up to the poll
// interval. It returns early with what it has when ctx ends.
func (l *loop) collect(ctx context.Context) []plugin.Record {
	var batch []plugin.Record
	deadline := time.Now().Add(l.plan.interval)
	for len(batch) < l.plan.batch && ctx.Err() == nil {
		wait := time.Until(deadline)
		if wait <= 0 {
			break
		}
		ms := int(wait.Milliseconds())
		if ms > 100 {
			ms = 100 // look at ctx at least this often
		}
		if ms < 1 {
			ms = 1
		}
		switch e := l.c.Poll(ms).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				l.log.Warn("consume error", "err", e.TopicPartition.Error)
				continue
			}
			batch = append(batch, l.record(e))
		case kafka.Error:
			if e.IsFatal() {
				l.tr.RecordError(e)
				l.log.Error("consumer error", "err", e)
			} else {
				l.log.Debug("consumer error", "err", e)
			}
		}
	}
	return batch
}

func (l *loop) record(m *kafka.Message) plugin.Record {
	topic := *m.TopicPartition.Topic
	r := plugin.Record{
		Topic:     topic,
		Partition: m.TopicPartition.Partition,
		Offset:    int64(m.TopicPartition.Offset),
		Timestamp: m.Timestamp,
		Key:       m.Key,
		Payload:   m.Value,
		Schema:    l.schemaOf(topic),
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]plugin.Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = plugin.Header{Key: h.Key, Value: h.Value}
		}
	}
	if !codec.ValidSinkPayload(r.Schema, r.Payload) {
		l.log.Warn("payload does not match the topic's schema; handing it over as raw", "topic", topic, "offset", r.Offset, "schema", r.Schema)
		r.Schema = plugin.SchemaRaw
	}
	return r
}

// deliver hands one batch to Consume and commits it on success.
func (l *loop) deliver(ctx context.Context, batch []plugin.Record) error {
	c := &l.tr.Counters
	c.Consumed.Add(int64(len(batch)))
	start := time.Now()
	// A batch in hand is finished even when ctx ends meanwhile.
	err := l.cfg.Sink.Consume(context.WithoutCancel(ctx), batch)
	l.consumeH.Observe(time.Since(start).Seconds())
	c.LastBatchAt.Store(time.Now().UnixNano())
	if err != nil {
		c.Nacked.Add(1)
		l.nackedC.Add(float64(len(batch)))
		return err
	}
	c.Batches.Add(1)
	l.ackedC.Add(float64(len(batch)))
	offsets := nextOffsets(batch)
	if _, err := l.c.CommitOffsets(offsets); err != nil {
		// The records were consumed; a later commit covers them, and a
		// restart before that redelivers them.
		l.log.Warn("offset commit failed", "err", err)
		l.tr.RecordError(fmt.Errorf("commit offsets: %w", err))
	}
	return nil
}

type tp struct {
	topic     string
	partition int32
}

// nextOffsets returns, per partition, the offset after the batch's last
// record of that partition.
func nextOffsets(batch []plugin.Record) []kafka.TopicPartition {
	last := map[tp]int64{}
	for _, r := range batch {
		k := tp{r.Topic, r.Partition}
		if o, ok := last[k]; !ok || r.Offset > o {
			last[k] = r.Offset
		}
	}
	return toPartitions(last, 1)
}

func firstOffsets(batch []plugin.Record) []kafka.TopicPartition {
	first := map[tp]int64{}
	for _, r := range batch {
		k := tp{r.Topic, r.Partition}
		if o, ok := first[k]; !ok || r.Offset < o {
			first[k] = r.Offset
		}
	}
	return toPartitions(first, 0)
}

func toPartitions(m map[tp]int64, add int64) []kafka.TopicPartition {
	out := make([]kafka.TopicPartition, 0, len(m))
	for k, o := range m {
		topic := k.topic
		out = append(out, kafka.TopicPartition{Topic: &topic, Partition: k.partition, Offset: kafka.Offset(o + add)})
	}
	sort.Slice(out, func(i, j int) bool {
		if *out[i].Topic != *out[j].Topic {
			return *out[i].Topic < *out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// seekBack rewinds every partition of the batch to its first record, so
// the next polls return the same records again.
func (l *loop) seekBack(batch []plugin.Record) {
	parts := firstOffsets(batch)
	res, err := l.c.SeekPartitions(parts)
	if err != nil {
		l.log.Warn("seek back failed", "err", err)
	}
	for _, p := range res {
		if p.Error != nil {
			l.log.Warn("seek back failed", "topic", *p.Topic, "partition", p.Partition, "err", p.Error)
		}
	}
}

func (l *loop) sleep(ctx context.Context, n int) {
	d := l.cfg.RetryDelay
	for i := 1; i < n && d < l.cfg.MaxRetryDelay; i++ {
		d *= 2
	}
	if d > l.cfg.MaxRetryDelay {
		d = l.cfg.MaxRetryDelay
	}
	d = time.Duration(float64(d) * (0.8 + 0.4*rand.Float64()))
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
