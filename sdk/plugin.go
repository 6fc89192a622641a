package sdk

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Kind says whether a connector reads from PicoMQ (a sink), writes into it
// (a source), or rewrites records between the two (a transform).
type Kind string

// The kinds of sdk.
const (
	KindSink      Kind = "sink"
	KindSource    Kind = "source"
	KindTransform Kind = "transform"
)

// Schema is the encoding of a topic's payloads, as named by a [[topics]]
// block's schema key.
type Schema string

// The topic schemas of the specs.
const (
	SchemaJSON       Schema = "json"
	SchemaRaw        Schema = "raw"
	SchemaText       Schema = "text"
	SchemaProto      Schema = "proto"
	SchemaFlatBuffer Schema = "flatbuffer"
	SchemaAvro       Schema = "avro"
)

// Header is one record header. Values are bytes; they need not be UTF-8.
type Header struct {
	Key   string
	Value []byte
}

// Record is one message a sink receives from a topic.
type Record struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Key       []byte // nil when the record has no key
	Headers   []Header
	// Payload holds the record's bytes as they are on the wire.
	Payload []byte
	// Schema is the topic's schema from the definition's [[topics]] block.
	// For SchemaJSON the runtime has checked that Payload is valid JSON;
	// for SchemaAvro, Payload is the Avro binary as produced.
	Schema Schema
}

// Message is one record a source returns from Poll. The runtime decodes
// Payload according to the destination's schema, runs the transforms,
// routes the message to a topic and produces it.
type Message struct {
	Key     []byte
	Payload []byte
	Headers []Header
	// Timestamp is the record time; the zero value means "now".
	Timestamp time.Time
	// Topic, when not empty, is the topic of this message, chosen by the
	// source (such as a transaction metadata topic its configuration
	// names) over the [[topics]] blocks' routes: the message is produced
	// once, as is, through the first block's producer (created like the
	// block's other topics), with no schema check, transform or route,
	// and is part of the batch like any other.
	Topic string
}

// Batch is what one Poll returns: records, and the state the source would
// like remembered once every one of them is acknowledged by the broker.
//
// State is the candidate state. The runtime stores it only after the whole
// batch is produced, and hands it back unchanged to the source's Open on the
// next start. A batch with no records must carry no state.
type Batch struct {
	Messages []Message
	State    []byte
}

// Result is the outcome of a batch, reported to the source through
// OnBatchResult.
type Result int

// Batch outcomes.
const (
	// Ack: every record was produced and State was saved. The source
	// promotes its candidate state to committed.
	Ack Result = iota + 1
	// Nack: the batch failed and nothing was saved. The source drops the
	// candidate, and the next Poll reads the same data again.
	Nack
)

// String returns "ack" or "nack".
func (r Result) String() string {
	switch r {
	case Ack:
		return "ack"
	case Nack:
		return "nack"
	}
	return "unknown"
}

// Sink receives batches of records consumed from PicoMQ topics.
//
// The runtime commits a batch's offsets as soon as Consume returns nil, and
// redelivers the batch when it returns an error. Close must flush anything
// the sink buffered.
type Sink interface {
	// Open checks the configuration and the destination; an error stops
	// the sink before any record is consumed.
	Open(ctx context.Context) error
	// Consume hands over one batch of records, in offset order per
	// partition. The batch slice is the runtime's again once Consume
	// returns (it takes the next records): keep copies of the Records, not
	// the slice. Their Key, Headers and Payload stay valid and may be kept.
	Consume(ctx context.Context, batch []Record) error
	// Close flushes and releases everything the sink holds.
	Close(ctx context.Context) error
}

// TopicPartition names one partition of a topic.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// DeferredSink is a Sink whose Consume returns before its records are
// durable: it buffers them in memory, or uploads them in the background.
// For such a sink, Consume returning nil means only "accepted"; the runtime
// commits, per partition, only an offset Durable reported, once it has
// consumed up to it (a Durable ahead of consumption, a sink skipping what it
// finds already written, waits). Kafka Connect's SinkTask.preCommit is the model.
//
// The runtime may hand a DeferredSink records it has already accepted (after
// a failed Consume, a rebalance, or a failed dead-letter produce): the sink
// skips every record below the next offset it expects for that partition, so
// a redelivery never writes a record twice.
type DeferredSink interface {
	Sink
	// Durable returns, for each partition the sink has accepted records of,
	// the offset of the first record that is not yet durable: every record
	// below it is in the destination (or was rejected, see Rejected). The
	// runtime calls it after each Consume and on a timer, and commits what
	// it returns. A partition left out keeps its last commit.
	Durable() map[TopicPartition]int64
	// Release tells the sink that the runtime no longer owns these
	// partitions (a rebalance revoked them). The sink drops their records
	// that are not yet durable, or makes them durable before it returns;
	// the runtime then commits Durable once more and gives the partitions
	// up, and their next owner resumes from that commit.
	Release(ctx context.Context, partitions []TopicPartition) error
}

// Rejection is one record a sink can never write, and why.
type Rejection struct {
	Record Record
	Err    error
}

// Rejected is the error Consume returns when some records of the batch can
// never be written (a payload the destination refuses, say) while the sink
// accepted all the others. With a dead_letter_topic on the records' [[topics]]
// block the runtime produces the rejected records there and treats the
// batch as consumed; without one, the batch fails like any other error and
// is redelivered. A DeferredSink counts a rejected record as handled: its
// Durable offsets pass over it.
type Rejected struct {
	Records []Rejection
}

// Error says how many records were rejected and why the first one was.
func (e *Rejected) Error() string {
	if len(e.Records) == 0 {
		return "no records rejected"
	}
	r := e.Records[0]
	if len(e.Records) == 1 {
		return fmt.Sprintf("record %s/%d@%d rejected: %v", r.Record.Topic, r.Record.Partition, r.Record.Offset, r.Err)
	}
	return fmt.Sprintf("%d records rejected; the first, %s/%d@%d: %v", len(e.Records), r.Record.Topic, r.Record.Partition, r.Record.Offset, r.Err)
}

// Source reads some other system and returns what it read in batches.
//
// The constructor only keeps the configuration; Open connects and loads the
// state. A source keeps two states: the committed one, what it has been told was
// delivered, and the candidate that travels in each Batch. Only Ack promotes
// the candidate; Nack drops it. Poll paces itself: with nothing new, it waits
// for its own interval (or ctx) before returning an empty batch.
//
// A Poll error is retried with back-off, and several in a row set status
// Error. An error that polling again cannot mend (a dropped table, an
// invalidated replication slot) should say so, wrapped with Permanent: the
// status then shows Error at once.
type Source interface {
	// Open is called once, before the first Poll, with the last committed
	// state (nil when there is none). An error stops the source; an
	// unreachable system that Poll can retry should not be one.
	Open(ctx context.Context, state []byte) error
	Poll(ctx context.Context) (Batch, error)
	OnBatchResult(ctx context.Context, result Result) error
	Close(ctx context.Context) error
}

// Pipelined is implemented by a source that can have more than one batch in
// flight: its Poll continues after the candidate of the batch it returned
// last, resolved or not. The source loop then polls the next batch while the
// deliveries of earlier ones are outstanding, and still resolves batches one
// at a time, in poll order: it saves the state of a batch only after every
// earlier batch was acknowledged and saved, and calls OnBatchResult once per
// resolved batch, in order. Ack promotes the oldest outstanding candidate.
// Nack drops every outstanding candidate: the batches polled after the failed
// one are discarded without a result of their own (they were not produced:
// the loop produces a batch only after the one before it is saved), and the
// next Poll reads again from the committed state. Before an empty batch or a
// Poll error is handled, every batch in flight is resolved.
type Pipelined interface {
	// PollAhead is how many batches may be in flight at once; 1 or less
	// means one at a time, as for any other source.
	PollAhead() int
}

// Transform rewrites a decoded record between decode and routing. Value is
// the decoded payload (for JSON, a map[string]any, []any or scalar) and may
// be replaced.
type Transform interface {
	Apply(rec *TransformRecord) error
}

// TransformRecord is the record a Transform sees.
type TransformRecord struct {
	Key     []byte
	Headers []Header
	Value   any
}

// Config is a connector's typed configuration, as generated by picogen.
type Config interface {
	// Redacted returns the configuration for display, with every secret
	// replaced by a mask, keyed by the schema's key names.
	Redacted() map[string]any
}

// Env is what the runtime hands a connector when it builds one. Logger and
// Metrics are never nil: the runtime and the test kits (sdktest.Env,
// sdktest.Env) always set both.
type Env struct {
	// Key is the connector's key from its definition file.
	Key string
	// Logger is a logger that already carries the connector's key.
	Logger *slog.Logger
	// Metrics registers connector-specific metrics.
	Metrics Metrics
}

// Metrics registers connector-specific metrics. The runtime labels each by
// connector key and type; names must be Prometheus metric names, and the
// runtime prefixes them with picomq_connectors_.
type Metrics interface {
	Counter(name, help string) Counter
	Gauge(name, help string) Gauge
	Histogram(name, help string, buckets []float64) Histogram
}

// Counter is a metric that only goes up.
type Counter interface{ Add(delta float64) }

// Gauge is a metric that is set to a value.
type Gauge interface{ Set(value float64) }

// Histogram records observations, such as latencies in seconds.
type Histogram interface{ Observe(value float64) }

// DiscardMetrics is a Metrics that records nothing, for tests and tools.
var DiscardMetrics Metrics = discard{}

type discard struct{}

func (discard) Counter(string, string) Counter                { return discard{} }
func (discard) Gauge(string, string) Gauge                    { return discard{} }
func (discard) Histogram(string, string, []float64) Histogram { return discard{} }
func (discard) Add(float64)                                   {}
func (discard) Set(float64)                                   {}
func (discard) Observe(float64)                               {}
