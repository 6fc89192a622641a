// Package sourceloop runs one source as sources.md describes: poll, decode,
// transform, route, produce through one producer per [[topics]] block, wait
// for every delivery report, then save the state and Ack, or Nack and save
// nothing.
package sourceloop

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/plugin"
	"github.com/picomq/pico-connectors/runtime/state"
	"github.com/picomq/pico-connectors/runtime/status"
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
	// Source is the plugin, already built by its registration's NewSource
	// with the state loaded from Store. Run calls Close when it returns.
	Source plugin.Source
	// Store saves the candidate state of each acknowledged batch under Key.
	Store state.Store
	// Transforms run in order on each decoded record, before routing.
	Transforms []plugin.Transform
	// BootstrapServers is the comma-separated broker list.
	BootstrapServers string
	// Properties are librdkafka settings applied to every producer and to
	// the admin client (the runtime's [broker.properties]); each block's
	// own Properties are applied on top of them.
	Properties map[string]string
	// Logger receives the loop's logs; nil means slog.Default().
	Logger *slog.Logger
	// Tracker receives the status and counters; nil means a private one.
	Tracker *status.Tracker
	// Metrics receives the loop's own metrics (batch sizes and latencies);
	// nil means plugin.DiscardMetrics.
	Metrics plugin.Metrics
	// RetryDelay is the first back-off after a Nack, doubled on each
	// consecutive Nack up to MaxRetryDelay. Zero means 100ms.
	RetryDelay time.Duration
	// MaxRetryDelay caps the back-off. Zero means 10s.
	MaxRetryDelay time.Duration
	// MaxConsecutiveNacks stops the poll task with status Error after this
	// many Nacks in a row. Zero means 30.
	MaxConsecutiveNacks int
	// DeliveryTimeout bounds the wait for delivery reports of one batch
	// (librdkafka message.timeout.ms). Zero means 30s.
	DeliveryTimeout time.Duration
}

// ErrTooManyNacks is returned by Run when MaxConsecutiveNacks batches in a
// row failed; the tracker is then in status Error.
var ErrTooManyNacks = errors.New("too many consecutive nacks")

// Run polls the source until ctx is cancelled or the poll task gives up,
// then closes the producers and the source. It returns nil after a graceful
// stop, ErrTooManyNacks (wrapped with the last failure) after thirty
// consecutive Nacks, or the error of an unusable definition.
func Run(ctx context.Context, cfg Config) error {
	return errors.New("sourceloop: not implemented yet")
}
