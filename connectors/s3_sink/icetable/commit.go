package icetable

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// offsetPrefix starts the snapshot summary property of a topic
// partition's next offset: "pico.offset.TOPIC.PARTITION".
const offsetPrefix = "pico.offset."

// maxAttempts bounds the retries of a commit that lost an optimistic
// concurrency race; the back-off between them grows from minBackoff to
// maxBackoff.
const (
	maxAttempts = 8
	minBackoff  = 50 * time.Millisecond
	maxBackoff  = 2 * time.Second
)

// offsetKey is the summary property of tp.
func offsetKey(tp TopicPartition) string {
	return offsetPrefix + tp.Topic + "." + strconv.FormatInt(int64(tp.Partition), 10)
}

// parseOffsetKey is the topic partition of a summary property; a topic may
// hold dots, the partition is after the last one.
func parseOffsetKey(k string) (TopicPartition, bool) {
	rest, ok := strings.CutPrefix(k, offsetPrefix)
	if !ok {
		return TopicPartition{}, false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return TopicPartition{}, false
	}
	p, err := strconv.ParseInt(rest[i+1:], 10, 32)
	if err != nil || p < 0 {
		return TopicPartition{}, false
	}
	return TopicPartition{Topic: rest[:i], Partition: int32(p)}, true
}

// snapshotOffsets are the offsets in the summary of snap (nil: none).
func snapshotOffsets(snap *table.Snapshot) map[TopicPartition]int64 {
	out := map[TopicPartition]int64{}
	if snap == nil || snap.Summary == nil {
		return out
	}
	for k, v := range snap.Summary.Properties {
		tp, ok := parseOffsetKey(k)
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[tp] = n
		}
	}
	return out
}

// tableOffsets are the offsets of the newest snapshot, from the current
// one back along its parents, whose summary records any: a snapshot
// another engine made (a compaction, a delete) records none, and must not
// reset them. Every snapshot Commit makes records them all.
func tableOffsets(tbl *table.Table) map[TopicPartition]int64 {
	for snap := tbl.CurrentSnapshot(); snap != nil; {
		if offs := snapshotOffsets(snap); len(offs) > 0 {
			return offs
		}
		if snap.ParentSnapshotID == nil {
			break
		}
		snap = tbl.SnapshotByID(*snap.ParentSnapshotID)
	}
	return map[TopicPartition]int64{}
}

// Offsets returns, per topic partition, the next offset recorded in the
// summary (property "pico.offset.TOPIC.PARTITION") of the table's current
// snapshot, or of its newest ancestor that records offsets when another
// engine made the newer ones; and the current snapshot's id (0: none). It
// reloads the table from the catalog first.
func (t *Table) Offsets(ctx context.Context) (map[TopicPartition]int64, int64, error) {
	ctx = t.cfg.ioContext(ctx)
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, 0, t.clean(err)
	}
	var id int64
	if snap := tbl.CurrentSnapshot(); snap != nil {
		id = snap.SnapshotID
	}
	return tableOffsets(tbl), id, nil
}

// Commit appends files to the table in one snapshot whose summary holds,
// per topic partition, the next offsets of next merged over the previous
// snapshot's. A partition's files and offset are committed only when the
// table's recorded offset for it is still expect[tp] (missing in the
// table, or in expect, is -1): when another writer moved it, they are left
// out and reported in Dropped. An offset never goes backwards: a next
// below the table's is not recorded. An optimistic-concurrency conflict
// is retried on the fresh table state, fence included (bounded, with
// back-off). With nothing to commit it does nothing and returns the
// current snapshot id.
func (t *Table) Commit(ctx context.Context, files []DataFile, next, expect map[TopicPartition]int64) (_ CommitResult, err error) {
	ctx = t.cfg.ioContext(ctx)
	t.mu.Lock()
	defer t.mu.Unlock()
	defer func() { err = t.clean(err) }()
	defer recoverError(&err)
	for attempt := 0; ; attempt++ {
		res, err := t.commitOnce(ctx, files, next, expect)
		res.Retries = attempt
		if err == nil && res.committed {
			res.ExpireErr = t.clean(t.expire(ctx))
		}
		if err == nil || !isConflict(err) || attempt >= maxAttempts {
			return res, err
		}
		if err := t.reload(ctx, attempt); err != nil {
			return CommitResult{Retries: attempt + 1}, err
		}
	}
}

// commitOnce is one attempt of Commit on t.tbl.
func (t *Table) commitOnce(ctx context.Context, files []DataFile, next, expect map[TopicPartition]int64) (CommitResult, error) {
	tbl := t.tbl
	snap := tbl.CurrentSnapshot()
	var res CommitResult
	if snap != nil {
		res.SnapshotID = snap.SnapshotID
	}
	cur := tableOffsets(tbl)
	recorded := func(m map[TopicPartition]int64, tp TopicPartition) int64 {
		if v, ok := m[tp]; ok {
			return v
		}
		return -1
	}
	// The fence: which partitions may commit.
	fenced := map[TopicPartition]bool{}
	check := func(tp TopicPartition) {
		if _, done := fenced[tp]; !done {
			fenced[tp] = recorded(cur, tp) == recorded(expect, tp)
		}
	}
	for _, f := range files {
		check(f.TP)
	}
	for tp := range next {
		check(tp)
	}
	for tp, ok := range fenced {
		if !ok {
			res.Dropped = append(res.Dropped, tp)
		}
	}
	sort.Slice(res.Dropped, func(i, j int) bool {
		a, b := res.Dropped[i], res.Dropped[j]
		return a.Topic < b.Topic || a.Topic == b.Topic && a.Partition < b.Partition
	})

	props := iceberg.Properties{}
	for tp, off := range cur {
		props[offsetKey(tp)] = strconv.FormatInt(off, 10)
	}
	moved := false
	for tp, off := range next {
		if fenced[tp] && off > recorded(cur, tp) {
			props[offsetKey(tp)] = strconv.FormatInt(off, 10)
			moved = true
		}
	}
	if err := checkOverlaps(files); err != nil {
		return res, err
	}
	spec := tbl.Spec()
	sc := tbl.Schema()
	var dfs []iceberg.DataFile
	for _, f := range files {
		if !fenced[f.TP] {
			continue
		}
		if err := checkRange(f, recorded(cur, f.TP), next); err != nil {
			return res, err
		}
		df, err := dataFile(spec, sc, f)
		if err != nil {
			return res, err
		}
		dfs = append(dfs, df)
	}
	if len(dfs) == 0 && !moved {
		return res, nil
	}

	txn := tbl.NewTransaction()
	// Pin the branch head: a concurrent snapshot fails this commit with
	// ErrCommitFailed instead of iceberg-go replaying it on the new head,
	// which would skip the fence and record offsets from the old one.
	if err := txn.AssertRefSnapshotID(table.MainBranch); err != nil {
		return res, fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err)
	}
	var err error
	if len(dfs) > 0 {
		// The fence already keeps a file from being added twice, so the
		// duplicate check (which reads every manifest) is skipped.
		err = txn.AddDataFiles(ctx, dfs, props, table.WithoutDuplicateCheck())
	} else {
		err = txn.AddFiles(ctx, nil, props, true) // an empty snapshot: offsets only
	}
	if err != nil {
		return res, fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err)
	}
	committed, err := txn.Commit(ctx)
	if err != nil {
		return res, fmt.Errorf("iceberg table %s: commit: %w", t.cfg.Table, err)
	}
	t.tbl = committed
	if s := committed.CurrentSnapshot(); s != nil {
		res.SnapshotID = s.SnapshotID
	}
	res.committed = true
	return res, nil
}

// expireBatch is how many snapshots must be past the table's retention
// (history.expire.max-snapshot-age-ms, beyond the
// history.expire.min-snapshots-to-keep newest) for Commit to expire them:
// an expiry is a commit of its own, not worth making for one snapshot.
const expireBatch = 20

// expire expires the snapshots past the table's retention when there are
// expireBatch of them. Only snapshot metadata and the manifests only they
// reference go: every data file of an append-only table stays in the
// current snapshot. A conflict is left to a later commit.
func (t *Table) expire(ctx context.Context) error {
	tbl := t.tbl
	props := tbl.Properties()
	maxAge := props.GetInt64(table.MaxSnapshotAgeMsKey, table.MaxSnapshotAgeMsDefault)
	keep := props.GetInt(table.MinSnapshotsToKeepKey, table.MinSnapshotsToKeepDefault)
	snaps := tbl.Metadata().Snapshots()
	cutoff := time.Now().UnixMilli() - maxAge
	old := 0
	for _, s := range snaps {
		if s.TimestampMs < cutoff {
			old++
		}
	}
	if old > len(snaps)-keep {
		old = len(snaps) - keep
	}
	if old < expireBatch {
		return nil
	}
	txn := tbl.NewTransaction()
	if err := txn.ExpireSnapshots(); err != nil {
		return fmt.Errorf("iceberg table %s: expiring snapshots: %w", t.cfg.Table, err)
	}
	next, err := txn.Commit(ctx)
	if isConflict(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("iceberg table %s: expiring snapshots: %w", t.cfg.Table, err)
	}
	t.tbl = next
	return nil
}

// checkRange refuses a file whose offsets are not between the table's
// offset of its partition (at) and the offset the commit moves it to:
// committing it would duplicate records, or leave the table's offset
// behind records it holds.
func checkRange(f DataFile, at int64, next map[TopicPartition]int64) error {
	to, ok := next[f.TP]
	switch {
	case f.Last < f.First:
		return fmt.Errorf("iceberg data file %s: offsets %d to %d are not a range", f.Path, f.First, f.Last)
	case !ok:
		return fmt.Errorf("iceberg data file %s of %s: the commit gives no next offset for %s", f.Path, f.TP, f.TP)
	case f.First < at:
		return fmt.Errorf("iceberg data file %s holds offsets %d to %d of %s, but the table holds %s up to %d already: it would duplicate records", f.Path, f.First, f.Last, f.TP, f.TP, at)
	case f.Last >= to:
		return fmt.Errorf("iceberg data file %s holds offsets %d to %d of %s, at or past the next offset %d the commit records", f.Path, f.First, f.Last, f.TP, to)
	}
	return nil
}

// checkOverlaps refuses two files of one partition whose offsets overlap
// (or one path given twice): together they would duplicate records. Files
// with the same offsets are a group (a path_template that reads each
// record writes one file per directory, cut together, whose records
// interleave), and are accepted.
func checkOverlaps(files []DataFile) error {
	byTP := map[TopicPartition][]DataFile{}
	paths := map[string]bool{}
	for _, f := range files {
		if paths[f.Path] {
			return fmt.Errorf("iceberg data file %s is given twice", f.Path)
		}
		paths[f.Path] = true
		byTP[f.TP] = append(byTP[f.TP], f)
	}
	for tp, fs := range byTP {
		sort.Slice(fs, func(i, j int) bool { return fs[i].First < fs[j].First })
		for i := 1; i < len(fs); i++ {
			if fs[i].First == fs[i-1].First && fs[i].Last == fs[i-1].Last {
				continue // one group's files, one per directory, cut together
			}
			if fs[i].First <= fs[i-1].Last {
				return fmt.Errorf("iceberg data files %s (offsets %d to %d) and %s (offsets %d to %d) of %s overlap: together they would duplicate records",
					fs[i-1].Path, fs[i-1].First, fs[i-1].Last, fs[i].Path, fs[i].First, fs[i].Last, tp)
			}
		}
	}
	return nil
}

// dataFile is f as an Iceberg data file of spec.
func dataFile(spec iceberg.PartitionSpec, sc *iceberg.Schema, f DataFile) (iceberg.DataFile, error) {
	part, err := partitionData(spec, sc, f)
	if err != nil {
		return nil, err
	}
	b, err := iceberg.NewDataFileBuilder(spec, iceberg.EntryContentData, f.Path, iceberg.ParquetFile,
		part, nil, nil, f.Records, f.Size)
	if err != nil {
		return nil, fmt.Errorf("iceberg data file %s: %w", f.Path, err)
	}
	return b.Build(), nil
}

// isConflict says whether err is a lost optimistic-concurrency race,
// after which nothing was committed: the catalog refused the commit
// because the table moved (ErrCommitFailed), or found, before writing,
// that a requirement of the commit no longer held.
func isConflict(err error) bool {
	return err != nil && (errors.Is(err, table.ErrCommitFailed) || strings.Contains(err.Error(), "requirement failed"))
}

// reload waits the back-off of attempt and loads the table afresh.
func (t *Table) reload(ctx context.Context, attempt int) error {
	wait := minBackoff << attempt
	if wait > maxBackoff {
		wait = maxBackoff
	}
	wait = wait/2 + rand.N(wait/2+1) // jitter: two writers do not retry in step
	timer := time.NewTimer(wait)
	select {
	case <-ctx.Done():
		timer.Stop()
		return ctx.Err()
	case <-timer.C:
	}
	return t.load(ctx)
}

// refresh loads the table from the catalog, holding t.mu, and returns it.
func (t *Table) refresh(ctx context.Context) (*table.Table, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if err := t.load(ctx); err != nil {
		return nil, err
	}
	return t.tbl, nil
}

// load loads the table from the catalog into t.tbl; t.mu is held.
func (t *Table) load(ctx context.Context) error {
	tbl, err := t.cat.LoadTable(ctx, t.ident)
	if err != nil {
		return fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err)
	}
	t.tbl = tbl
	return nil
}
