package api

import (
	"context"
	"errors"
	"time"

	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// The kinds of connector the API serves, as they appear in URL paths
// (/sources, /sinks) and in the "type" field of an entry.
const (
	KindSource = "source"
	KindSink   = "sink"
)

// Connectors is what the API reads and drives. The supervisor implements
// it; kind is KindSource or KindSink.
type Connectors interface {
	// List returns the entries of one kind, in any order (the API sorts
	// them by key).
	List(kind string) []Entry
	// Get returns one entry, or false when kind has no connector key.
	Get(kind, key string) (Entry, bool)
	// Config returns the effective definition of a connector (after env
	// overrides) for display, with every secret already masked by the
	// generated Config.Redacted, or false when there is no such connector.
	// Definition builds it from a definition and its loaded configs.
	Config(kind, key string) (map[string]any, bool)
	// Restart stops the connector (gracefully, as on shutdown) and starts
	// it again from its definition, returning once it has started or
	// failed to. It returns an error wrapping ErrNotFound for an unknown
	// key, ErrDisabled for a disabled connector, and any other error when
	// the restart could not be carried out.
	Restart(ctx context.Context, kind, key string) error
}

// ErrNotFound is wrapped by Connectors.Restart for an unknown key.
var ErrNotFound = errors.New("connector not found")

// ErrDisabled is wrapped by Connectors.Restart for a disabled connector.
var ErrDisabled = errors.New("connector is disabled")

// Entry is one connector as GET /sources/{key} and GET /sinks/{key} show
// it. Field names are stable; README.md documents them.
type Entry struct {
	// Key is the connector's key from its definition file.
	Key string `json:"key"`
	// Type is "source" or "sink".
	Type string `json:"type"`
	// Name is the definition's human-readable name.
	Name string `json:"name,omitempty"`
	// Path is the plugin, such as libpicomq_connector_s3_sink.
	Path string `json:"path"`
	// Version is the definition's version.
	Version int `json:"version"`
	// Enabled is the definition's enabled flag.
	Enabled bool `json:"enabled"`
	// Status is Starting, Running, Stopping, Stopped, Error, Disabled or
	// Standby (another runtime of the fleet runs the source).
	Status status.Status `json:"status"`
	// LastError is the text of the last failure, kept after recovery.
	LastError string `json:"last_error,omitempty"`
	// LastErrorAt is when LastError happened (RFC 3339, UTC).
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	// Topics lists what the connector reads or writes: a topic name, a
	// sink's topic pattern, or a source's routing template.
	Topics []string `json:"topics"`
	// Counters are the connector's live counters.
	Counters status.Figures `json:"counters"`
	// Placement says, in a fleet of runtimes, which runtime runs a source
	// and which partitions this runtime's sink holds; omitted otherwise.
	Placement *status.Placement `json:"placement,omitempty"`
	// Snapshots are a running source's snapshots on demand (POST
	// /sources/{key}/snapshot), requested, running or done; omitted for a
	// source that has none.
	Snapshots []sdk.SnapshotProgress `json:"snapshots,omitempty"`
}

// Snapshotter is implemented by a Connectors whose running sources may
// take snapshots on demand (POST /sources/{key}/snapshot).
type Snapshotter interface {
	// Snapshot asks the running source key for a snapshot of tables. It
	// returns an error wrapping ErrNotFound for an unknown key,
	// ErrNotRunning when the source is not open on this runtime or takes
	// no snapshots, and the source's own error for what it refuses.
	Snapshot(ctx context.Context, key string, tables []string) error
}

// ErrNotRunning is wrapped by Snapshotter.Snapshot for a source that is
// not open on this runtime (stopped, failed, or run by another runtime of
// the fleet) or that takes no snapshots on demand.
var ErrNotRunning = errors.New("source is not running here or takes no snapshots on demand")

// Fleet is implemented by a Connectors that runs in a fleet of runtimes;
// GET /health then shows its id, mode and the members it knows of.
type Fleet interface {
	// Membership returns this runtime's view of the fleet.
	Membership() Membership
}

// Membership is a runtime's view of its fleet.
type Membership struct {
	// RuntimeID is this runtime's id (runtime config id).
	RuntimeID string
	// Mode is "standalone" or "distributed".
	Mode string
	// Members are the runtime ids this runtime has seen in its connectors'
	// groups, itself included, sorted.
	Members []string
}
