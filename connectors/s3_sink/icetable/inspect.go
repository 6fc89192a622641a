package icetable

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Snapshot is one snapshot of the table, as Snapshots lists it.
type Snapshot struct {
	ID, ParentID int64 // ParentID 0: none
	Time         time.Time
	// Offsets are the next offsets its summary records: all of them for a
	// snapshot Commit made, none for one another engine made.
	Offsets map[TopicPartition]int64
	// AddedFiles and AddedRecords are what it appended.
	AddedFiles, AddedRecords int64
}

// Snapshots lists the snapshots the table keeps (those not expired), oldest
// first: for status pages, tools and tests.
func (t *Table) Snapshots(ctx context.Context) ([]Snapshot, error) {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, t.clean(err)
	}
	var out []Snapshot
	for _, s := range tbl.Metadata().Snapshots() {
		snap := Snapshot{ID: s.SnapshotID, Time: time.UnixMilli(s.TimestampMs).UTC(), Offsets: snapshotOffsets(&s)}
		if s.ParentSnapshotID != nil {
			snap.ParentID = *s.ParentSnapshotID
		}
		if s.Summary != nil {
			snap.AddedFiles = s.Summary.Properties.GetInt64("added-data-files", 0)
			snap.AddedRecords = s.Summary.Properties.GetInt64("added-records", 0)
		}
		out = append(out, snap)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Time.Before(out[j].Time) })
	return out, nil
}

// DataFiles lists the paths of the data files of the table's current
// snapshot, sorted.
func (t *Table) DataFiles(ctx context.Context) ([]string, error) {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, t.clean(err)
	}
	snap := tbl.CurrentSnapshot()
	if snap == nil {
		return nil, nil
	}
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, t.clean(fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err))
	}
	mfs, err := snap.Manifests(fs)
	if err != nil {
		return nil, t.clean(fmt.Errorf("iceberg table %s: reading the manifest list: %w", t.cfg.Table, err))
	}
	var out []string
	for _, mf := range mfs {
		for e, err := range mf.Entries(fs, true) {
			if err != nil {
				return nil, t.clean(fmt.Errorf("iceberg table %s: reading manifest %s: %w", t.cfg.Table, mf.FilePath(), err))
			}
			out = append(out, e.DataFile().FilePath())
		}
	}
	sort.Strings(out)
	return out, nil
}

// ReadAll reads the table's current snapshot whole into memory with
// iceberg-go's scanner: for tools and tests, not for large tables. The
// caller releases the result.
func (t *Table) ReadAll(ctx context.Context) (arrow.Table, error) {
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, t.clean(err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		return nil, t.clean(fmt.Errorf("iceberg table %s: scan: %w", t.cfg.Table, err))
	}
	return at, nil
}
