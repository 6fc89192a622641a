package sinkloop

import (
	"log/slog"
	"time"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// Config is everything Run needs to run one sink.
type Config struct {
	// Key is the connector's key from its definition file. It names the
	// consumer group ("pico-connectors-" + Key unless GroupID is set) and
	// labels logs, metrics and dead letters.
	Key string
	// Topics are the definition's [[topics]] blocks. Each block subscribes
	// by Pattern (a regular expression; a leading ^ is added for
	// librdkafka when missing) or by Topic.Literal (an exact name). All
	// blocks must share batch_length and poll_interval. Each topic's
	// records are decoded with the Schema, and dead-lettered to the
	// DeadLetterTopic, of the first block that matches it.
	Topics []definition.Topics
	// BaseDir resolves a relative avro_schema_path (the definition file's
	// folder).
	BaseDir string
	// Sink is the plugin, already built by its registration's NewSink.
	// Run calls Open before consuming and Close (which flushes) on stop.
	// A sdk.DeferredSink's Durable is called from the loop's goroutine
	// while Consume may be running in another: it must be safe for that.
	Sink sdk.Sink
	// Transforms run in order on each record before the plugin sees it.
	Transforms []sdk.Transform
	// BootstrapServers is the comma-separated broker list.
	BootstrapServers string
	// Properties are librdkafka settings applied to the consumer and the
	// dead-letter producer (the runtime's [broker.properties]); each
	// block's own Properties are applied on top of them for the consumer,
	// in block order.
	Properties map[string]string
	// GroupID overrides the consumer group; empty means
	// "pico-connectors-" + Key.
	GroupID string
	// Logger receives the loop's logs; nil means slog.Default().
	Logger *slog.Logger
	// Tracker receives the status and counters; nil means a private one.
	// Run sets Running once subscribed, Error after ErrorAfter failed
	// batches in a row (back to Running on the next success), and Stopped
	// after a graceful stop.
	Tracker *status.Tracker
	// Metrics receives the consume-stage durations and record counters
	// (see package metrics); nil means sdk.DiscardMetrics.
	Metrics sdk.Metrics
	// RetryDelay is the first back-off after a failed batch, doubled on
	// each consecutive failure up to MaxRetryDelay, with 20% jitter. Zero
	// means 100ms.
	RetryDelay time.Duration
	// MaxRetryDelay caps the back-off. Zero means 30s.
	MaxRetryDelay time.Duration
	// ErrorAfter is how many failed batches in a row set status Error.
	// Zero means 3.
	ErrorAfter int
	// CloseTimeout bounds a graceful stop, counted from the moment ctx
	// ends: the batch in hand, the sink's Close and the last commit must
	// fit in it (the supervisor passes a little less than shutdown_grace,
	// so the process never exits in the middle of Close). It also bounds a
	// Release on revoke. Zero means 30s.
	CloseTimeout time.Duration
	// CommitInterval is how often a DeferredSink's Durable offsets are
	// committed between batches, and a sdk.Health sink's Health is
	// read. Zero means 1s.
	CommitInterval time.Duration
	// DeliveryTimeout bounds a dead-letter produce (librdkafka's
	// message.timeout.ms). Zero means 30s.
	DeliveryTimeout time.Duration
	// InstanceID, when set, is the consumer's group.instance.id (static
	// membership, see the package doc): the id of the runtime, stable
	// across its restarts and unique in the fleet. A group.instance.id in
	// Properties or a block's properties wins over it. Empty (and none in
	// the properties) means a dynamic member, which leaves the group when
	// it stops.
	InstanceID string
	// SessionTimeout, when above zero, is the consumer's
	// session.timeout.ms (the runtime passes fleet.session_timeout), with
	// heartbeat.interval.ms a third of it: how long the group waits for a
	// member that stopped answering before its partitions move. Zero leaves librdkafka's defaults (45 s,
	// 3 s). A session.timeout.ms in the properties turns it off.
	SessionTimeout time.Duration
}
