// Package status tracks what each connector is doing: its lifecycle status,
// its last error, and its counters. The loops write it; the HTTP API, the
// metrics and the logs read it.
package status

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// Status is a connector's lifecycle status.
type Status string

// The statuses a connector goes through.
const (
	// Starting: the connector is built and opening (connecting, joining
	// its group, recovering); it moves no records yet.
	Starting Status = "Starting"
	// Running: it moves records, or waits for them, healthy.
	Running Status = "Running"
	// Stopping: a stop was asked; it flushes what it holds.
	Stopping Status = "Stopping"
	// Stopped: it stopped after a stop was asked.
	Stopped Status = "Stopped"
	// Error: it failed, or keeps failing while it retries; the last
	// error says why, and /ready answers 503.
	Error Status = "Error"
	// Disabled: its definition has enabled = false.
	Disabled Status = "Disabled"
	// Standby: in a fleet of runtimes, another runtime owns this source;
	// this one waits to take it over.
	Standby Status = "Standby"
)

// Placement says where a connector's work sits in a fleet of runtimes that
// share it through the broker's group protocol.
type Placement struct {
	// Owner is the id of the runtime that runs a source, this one or
	// another; empty when no runtime holds it.
	Owner string `json:"owner,omitempty"`
	// Partitions are the topic partitions this runtime's sink holds, as
	// "topic/partition", sorted.
	Partitions []string `json:"partitions,omitempty"`
	// Generation counts the rebalances (sinks) or ownership changes
	// (sources) this runtime has seen for the connector.
	Generation int64 `json:"generation,omitempty"`
}

// Counters are the numbers a connector's entry shows. Fields are updated
// atomically by the loops.
type Counters struct {
	Polled      atomic.Int64 // records returned by a source's Poll
	Produced    atomic.Int64 // records acknowledged by the broker
	Consumed    atomic.Int64 // records handed to a sink's Consume
	Batches     atomic.Int64 // batches resolved (acked or, for sinks, consumed)
	Acked       atomic.Int64 // source batches acknowledged
	Nacked      atomic.Int64 // source batches nacked or sink batches failed
	StateSaves  atomic.Int64 // successful state saves
	StateFails  atomic.Int64 // failed state saves
	ConsecNacks atomic.Int64 // current run of consecutive nacks
	Redelivered atomic.Int64 // sink batches redelivered after an error
	DeadLetters atomic.Int64 // records sent to a dead-letter topic
	Committed   atomic.Int64 // sinks: records whose offsets are committed (durable)
	LastBatchAt atomic.Int64 // unix nanoseconds of the last resolved batch
}

// Tracker holds one connector's status. The zero value is not usable; use
// New.
type Tracker struct {
	Key  string
	Kind string // "sink" or "source"

	mu        sync.Mutex
	status    Status
	lastErr   string
	lastErrAt time.Time
	unhealthy string // what the connector's own Health last reported
	snapper   sdk.Snapshotter
	placement Placement
	changed   func(key string, from, to Status, err string)

	Counters Counters
}

// New returns a tracker in status Starting. changed, when not nil, is called
// on every status change (the runtime logs it there).
func New(kind, key string, changed func(key string, from, to Status, err string)) *Tracker {
	return &Tracker{Key: key, Kind: kind, status: Starting, changed: changed}
}

// Set moves the tracker to s, keeping the last error for display.
func (t *Tracker) Set(s Status) { t.set(s, "") }

// Status returns the current status.
func (t *Tracker) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// Fail records err and moves the tracker to Error.
func (t *Tracker) Fail(err error) {
	if err == nil {
		return
	}
	t.set(Error, errorText(err))
}

// RecordError keeps err as the last error without changing the status, for
// failures the loop retries on its own.
func (t *Tracker) RecordError(err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	t.lastErr, t.lastErrAt = errorText(err), time.Now().UTC()
	t.mu.Unlock()
}

// errorText is err as the status shows it: every URL in it masked
// (confkit.MaskURLs), as a client's error may quote one with a token.
func errorText(err error) string { return confkit.MaskURLs(err.Error()) }

func (t *Tracker) set(s Status, errText string) {
	t.mu.Lock()
	from := t.status
	t.status = s
	if errText != "" {
		t.lastErr, t.lastErrAt = errText, time.Now().UTC()
	}
	cb := t.changed
	t.mu.Unlock()
	if cb != nil && from != s {
		cb(t.Key, from, s, errText)
	}
}

// ReportHealth applies a condition the connector watches itself
// (sdk.Health): with err, status Error with its message, as long as it
// lasts; once err is nil again, Running, unless another error has set Error
// meanwhile. The loops call it now and then, whatever their batches do.
func (t *Tracker) ReportHealth(err error) {
	t.mu.Lock()
	prev := t.unhealthy
	cur := ""
	if err != nil {
		cur = errorText(err)
	}
	t.unhealthy = cur
	clears := cur == "" && prev != "" && t.status == Error && t.lastErr == prev
	t.mu.Unlock()
	switch {
	case cur != "" && cur != prev:
		t.set(Error, cur)
	case clears:
		t.set(Running, "")
	}
}

// Unhealthy reports whether the connector's own Health reports a condition:
// a good batch must not clear that Error.
func (t *Tracker) Unhealthy() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.unhealthy != ""
}

// SetPlacement records where the connector's work sits (see Placement).
// The tracker keeps its own copy of p.Partitions.
func (t *Tracker) SetPlacement(p Placement) {
	p.Partitions = append([]string(nil), p.Partitions...)
	t.mu.Lock()
	t.placement = p
	t.mu.Unlock()
}

// Placement returns what SetPlacement last recorded.
func (t *Tracker) Placement() Placement {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.placement
	p.Partitions = append([]string(nil), p.Partitions...)
	return p
}

// SetSnapshotter records the open source's snapshots on demand (nil when
// it is closed or has none): the API asks it for snapshots, and Snapshot
// shows their progress. The source loop sets it.
func (t *Tracker) SetSnapshotter(s sdk.Snapshotter) {
	t.mu.Lock()
	t.snapper = s
	t.mu.Unlock()
}

// Snapshotter returns what SetSnapshotter last recorded.
func (t *Tracker) Snapshotter() sdk.Snapshotter {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.snapper
}

// Snapshot is a point-in-time copy of a tracker, with stable JSON names.
type Snapshot struct {
	Key         string    `json:"key"`
	Kind        string    `json:"type"`
	Status      Status    `json:"status"`
	LastError   string    `json:"last_error,omitempty"`
	LastErrorAt time.Time `json:"last_error_at,omitzero"`
	Counters    Figures   `json:"counters"`
	// Placement is set in a fleet of runtimes (see Placement).
	Placement *Placement `json:"placement,omitempty"`
	// Snapshots are the open source's snapshots on demand
	// (sdk.Snapshotter), requested, running or done.
	Snapshots []sdk.SnapshotProgress `json:"snapshots,omitempty"`
}

// Figures is the counters part of a Snapshot.
type Figures struct {
	Polled      int64 `json:"records_polled"`
	Produced    int64 `json:"records_produced"`
	Consumed    int64 `json:"records_consumed"`
	Batches     int64 `json:"batches"`
	Acked       int64 `json:"batches_acked"`
	Nacked      int64 `json:"batches_nacked"`
	StateSaves  int64 `json:"state_saves"`
	StateFails  int64 `json:"state_save_failures"`
	ConsecNacks int64 `json:"consecutive_nacks"`
	Redelivered int64 `json:"batches_redelivered"`
	DeadLetters int64 `json:"records_dead_lettered"`
	Committed   int64 `json:"records_committed,omitempty"`
}

// Snapshot copies the tracker.
func (t *Tracker) Snapshot() Snapshot {
	t.mu.Lock()
	s := Snapshot{Key: t.Key, Kind: t.Kind, Status: t.status, LastError: t.lastErr, LastErrorAt: t.lastErrAt}
	if p := t.placement; p.Owner != "" || len(p.Partitions) > 0 || p.Generation != 0 {
		p.Partitions = append([]string(nil), p.Partitions...)
		s.Placement = &p
	}
	sn := t.snapper
	t.mu.Unlock()
	if sn != nil {
		s.Snapshots = sn.SnapshotProgress()
	}
	c := &t.Counters
	s.Counters = Figures{
		Polled: c.Polled.Load(), Produced: c.Produced.Load(), Consumed: c.Consumed.Load(),
		Batches: c.Batches.Load(), Acked: c.Acked.Load(), Nacked: c.Nacked.Load(),
		StateSaves: c.StateSaves.Load(), StateFails: c.StateFails.Load(),
		ConsecNacks: c.ConsecNacks.Load(), Redelivered: c.Redelivered.Load(),
		DeadLetters: c.DeadLetters.Load(), Committed: c.Committed.Load(),
	}
	return s
}
