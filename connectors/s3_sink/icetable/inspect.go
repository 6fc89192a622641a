package icetable

import (
	"context"
	"fmt"
	"sort"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
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
	ctx = t.cfg.ioContext(ctx)
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
	files, err := t.Files(ctx, nil)
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = f.Path
	}
	return out, err
}

// File is one data file of the table, as Files lists it.
type File struct {
	Path    string
	Records int64
	// Partition is the file's value of each partition field by its name
	// (region, ts_day, ts_hour), in Iceberg's human-readable form: the
	// value, 2026-12-04 for a day, 2026-12-04-13 for an hour, "null".
	Partition map[string]string
}

// Files lists the data files of the table's current snapshot that a scan
// with filter reads (nil: every one), sorted by path: the manifests'
// partition values prune the others. For tools and tests.
func (t *Table) Files(ctx context.Context, filter iceberg.BooleanExpression) ([]File, error) {
	ctx = t.cfg.ioContext(ctx)
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, t.clean(err)
	}
	if tbl.CurrentSnapshot() == nil {
		return nil, nil
	}
	var opts []table.ScanOption
	if filter != nil {
		opts = append(opts, table.WithRowFilter(filter))
	}
	tasks, err := tbl.Scan(opts...).PlanFiles(ctx)
	if err != nil {
		return nil, t.clean(fmt.Errorf("iceberg table %s: planning a scan: %w", t.cfg.Table, err))
	}
	spec, sc := tbl.Spec(), tbl.Schema()
	out := make([]File, 0, len(tasks))
	for _, task := range tasks {
		df := task.File
		f := File{Path: df.FilePath(), Records: df.Count(), Partition: map[string]string{}}
		for _, pf := range spec.Fields() {
			typ := iceberg.Type(iceberg.PrimitiveTypes.String)
			if src, ok := sc.FindFieldByID(pf.SourceID()); ok {
				typ = src.Type
			}
			f.Partition[pf.Name] = pf.Transform.ToHumanStrType(typ, df.Partition()[pf.FieldID])
		}
		out = append(out, f)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// ReadAll reads the table's current snapshot whole into memory with
// iceberg-go's scanner: for tools and tests, not for large tables. The
// caller releases the result.
func (t *Table) ReadAll(ctx context.Context) (arrow.Table, error) {
	ctx = t.cfg.ioContext(ctx)
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
