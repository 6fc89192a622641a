// Package sinkloop runs one sink: a librdkafka consumer that subscribes to
// the sink's [[topics]] blocks, hands batches of decoded records to the
// plugin's Consume, and commits offsets only after Consume succeeds.
package sinkloop

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/plugin"
	"github.com/picomq/pico-connectors/runtime/status"
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
	// topic's records are decoded with the Schema of the block that
	// matches it first.
	Topics []definition.Topics
	// Sink is the plugin, already built by its registration's NewSink.
	// Run calls Open before consuming and Close (which flushes) on stop.
	Sink plugin.Sink
	// BootstrapServers is the comma-separated broker list.
	BootstrapServers string
	// Properties are librdkafka settings applied to the consumer (the
	// runtime's [broker.properties]); each block's own Properties are
	// applied on top of them.
	Properties map[string]string
	// GroupID overrides the consumer group; empty means
	// "pico-connectors-" + Key.
	GroupID string
	// Logger receives the loop's logs; nil means slog.Default().
	Logger *slog.Logger
	// Tracker receives the status and counters; nil means a private one.
	Tracker *status.Tracker
	// Metrics receives the loop's own metrics (batch sizes and latencies);
	// nil means plugin.DiscardMetrics.
	Metrics plugin.Metrics
	// RetryDelay is the first back-off after a failed Consume, doubled on
	// each consecutive failure up to MaxRetryDelay. Zero means 100ms.
	RetryDelay time.Duration
	// MaxRetryDelay caps the back-off. Zero means 30s.
	MaxRetryDelay time.Duration
	// CloseTimeout bounds the sink's Close on stop. Zero means 30s.
	CloseTimeout time.Duration
}

// Run opens the sink and consumes until ctx is cancelled, then finishes the
// batch in hand, closes the sink (which flushes) and closes the consumer.
// It returns nil after a graceful stop, or the error that stopped the sink
// (a failed Open, a bad definition, an unusable consumer).
func Run(ctx context.Context, cfg Config) error {
	return errors.New("sinkloop: not implemented yet")
}
