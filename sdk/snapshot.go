package sdk

import "context"

// Snapshotter is an optional interface of a Source: it reads again, on
// demand and while it keeps running, what it reads (tables, collections),
// such as the Postgres source's incremental snapshot. The runtime offers
// it as POST /sources/{key}/snapshot to the running source; a connector
// may also offer it as an admin command (RegisterAdmin).
type Snapshotter interface {
	// Snapshot asks for a snapshot of the named collections, as the
	// connector's configuration names them. It returns once the request
	// is recorded (the snapshot itself runs in later Polls), or an error
	// saying which name the source cannot snapshot and why. It may be
	// called while Poll runs, from another goroutine.
	Snapshot(ctx context.Context, names []string) error
	// SnapshotProgress returns the snapshots requested, running or done,
	// for the connector's API entry. It must be cheap: it reads what the
	// source last recorded, it queries nothing.
	SnapshotProgress() []SnapshotProgress
}

// SnapshotProgress is one collection's snapshot, as a Snapshotter reports
// it and the API entry shows it (field "snapshots").
type SnapshotProgress struct {
	// Name is the collection (a table: schema.table).
	Name string `json:"name"`
	// State is "queued", "running" or "done".
	State string `json:"state"`
	// Chunks and Rows are what the snapshot has delivered so far.
	Chunks int64 `json:"chunks"`
	Rows   int64 `json:"rows"`
}

// The states of a SnapshotProgress.
const (
	SnapshotQueued  = "queued"
	SnapshotRunning = "running"
	SnapshotDone    = "done"
)
