package s3sink

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
	"github.com/picomq/pico-connectors/sdk"
)

// table_format = "iceberg": every uploaded data file is remembered until a
// commit appends it to the table, every commit_interval and at a graceful
// Close, in one snapshot whose summary holds the next offset of each
// partition. Durable reports only what the table holds, so the runtime
// commits consumer offsets after the snapshot, and a partition resumes
// from the table's offset when that is ahead of the consumer group's. A
// file uploaded and not committed is not in the table: the replay after a
// crash writes it again (same key, same bytes) and commits it then, so
// the bucket listing of the other delivery mode is not used (recover).

func newIceMetrics(m sdk.Metrics) iceMetrics {
	return iceMetrics{
		snapshot:  m.Gauge("s3_sink_iceberg_snapshot_id", "Id of the table snapshot the sink last committed (table_format = iceberg)."),
		lag:       m.Gauge("s3_sink_iceberg_commit_lag_seconds", "Seconds since the oldest uploaded file not yet committed to the table was uploaded; 0 when every uploaded file is committed."),
		pending:   m.Gauge("s3_sink_iceberg_uncommitted_files", "Uploaded data files waiting for the next table commit."),
		commits:   m.Counter("s3_sink_iceberg_commits_total", "Table commits that succeeded (one snapshot each, or none when nothing changed)."),
		failures:  m.Counter("s3_sink_iceberg_commit_failures_total", "Table commits that failed; the files stay remembered and go into the next commit."),
		committed: m.Counter("s3_sink_iceberg_files_committed_total", "Data files appended to the table."),
	}
}

// healthAfter is how many commits in a row must fail before Health reports
// the catalog's error: one failure is often a conflict or a blip that the
// next commit mends.
const healthAfter = 2

// openTable opens (creating or evolving) the table of table_format =
// "iceberg" and starts the commit timer; nothing when it is off.
func (s *Sink) openTable(ctx context.Context, client *s3.Client) error {
	if s.ice == nil {
		return nil
	}
	spec, err := s.opts.partitionSpec()
	if err != nil {
		return err
	}
	cols, err := s.tableColumns()
	if err != nil {
		return err
	}
	o := &s.opts
	t, err := icetable.Open(ctx, o.tableConfig(client), cols, specFields(spec))
	if err != nil {
		return fmt.Errorf("s3 sink: %w", o.tableError(err))
	}
	s.ice.table, s.ice.spec = t, spec
	s.wg.Add(1)
	go s.commitTimer()
	return nil
}

// tableError is err of icetable, naming the table and the catalog, as
// Open and Check report it.
func (o *options) tableError(err error) error {
	return fmt.Errorf("iceberg_table '%s' (iceberg_catalog %s): %w", o.Iceberg.Table, o.Iceberg.Catalog, err)
}

// specFields is the partition spec as icetable takes it.
func specFields(spec []partitionField) []icetable.PartitionField {
	out := make([]icetable.PartitionField, len(spec))
	for i, f := range spec {
		out[i] = icetable.PartitionField{Source: f.Source, Transform: f.Transform}
	}
	return out
}

// icePartition returns the partition values of a file starting at rec
// (whose parquet row is s.row): the source columns' values of its first
// record, which path_template makes every record of the file share, or
// for day and hour share the day or hour of (see partitionSpec); icetable
// applies the transform. nil without a table or a partition spec.
func (s *Sink) icePartition(rec *sdk.Record) map[string]any {
	if s.ice == nil || len(s.ice.spec) == 0 {
		return nil
	}
	vals := make(map[string]any, len(s.ice.spec))
	for _, f := range s.ice.spec {
		switch {
		case f.Source == "timestamp" && f.col < 0:
			vals[f.Source] = rec.Timestamp.UTC()
		case f.Source == "topic" && f.col < 0:
			vals[f.Source] = rec.Topic
		case f.Source == "partition" && f.col < 0:
			vals[f.Source] = rec.Partition
		case f.col < len(s.row.row):
			v := s.row.row[f.col]
			switch {
			case v.IsNull():
				vals[f.Source] = nil
			case f.typ == "string":
				vals[f.Source] = string(v.ByteArray())
			case f.typ == "int64":
				vals[f.Source] = v.Int64()
			case f.typ == "boolean":
				vals[f.Source] = v.Boolean()
			case f.typ == "date":
				vals[f.Source] = time.Unix(int64(v.Int32())*86400, 0).UTC()
			case f.typ == "timestamp_ms":
				vals[f.Source] = time.UnixMilli(v.Int64()).UTC()
			case f.typ == "timestamp_us":
				vals[f.Source] = time.UnixMicro(v.Int64()).UTC()
			}
		}
	}
	return vals
}

// iceStart reads the table's offset of p, about to take its first record
// at p.next, with the lock released: a table ahead moves p.next there (its
// records are in the table already); the commits of p will expect it.
func (s *Sink) iceStart(p *partitionState) error {
	start := p.next
	t := s.ice.table
	s.mu.Unlock()
	offs, _, err := t.Offsets(s.ctx)
	s.mu.Lock()
	if err != nil {
		return fmt.Errorf("s3 sink: reading the offsets of iceberg_table '%s' for %s/%d: %w", s.opts.Iceberg.Table, p.topic, p.partition, err)
	}
	if s.parts[p.bufferKey] != p || p.released {
		return errReleased
	}
	have, ok := offs[icetable.TopicPartition{Topic: p.topic, Partition: p.partition}]
	if !ok {
		have = -1
	}
	p.ice = icePart{expect: have, durable: max(have, start)}
	if have > start {
		s.log.Info("S3 sink resumes a partition from the table's offset, ahead of the consumer group's; the records between are in the table already",
			"topic", p.topic, "partition", p.partition, "group_offset", start, "table_offset", have)
		p.next = have
	}
	return nil
}

// iceUploaded remembers f, just uploaded, for the next commit.
func (s *Sink) iceUploaded(f *closedFile) {
	p := f.p
	if s.ice == nil || p.released || p.ice.fenced {
		return
	}
	if len(p.ice.files) == 0 {
		p.ice.since = s.now()
	}
	df := icetable.DataFile{
		Path: "s3://" + s.opts.Bucket + "/" + f.key, Size: f.size, Records: int64(f.count),
		TP:    icetable.TopicPartition{Topic: p.topic, Partition: p.partition},
		First: f.info.FirstOffset, Last: f.info.LastOffset, Partition: f.part,
	}
	// Uploads finish in any order: keep the files by first offset (the
	// files of a group share it), so that those below an offset are a
	// prefix (collect, adopt).
	i := sort.Search(len(p.ice.files), func(i int) bool { return p.ice.files[i].First > df.First })
	p.ice.files = slices.Insert(p.ice.files, i, df)
}

// commitTimer commits every commit_interval until Close; a failure is
// recorded in iceState and reported by Health.
func (s *Sink) commitTimer() {
	s.every(s.opts.Iceberg.CommitInterval, func() { _ = s.commitTable(s.ctx) })
}

// iceBatch is what one commit takes: the files, and per partition the
// next and the expected offsets.
type iceBatch struct {
	files        []icetable.DataFile
	next, expect map[icetable.TopicPartition]int64
	parts        map[icetable.TopicPartition]*partitionState
	taken        map[*partitionState]int // files taken off the front of p.ice.files
}

// collect takes, under the lock, each partition's uploaded files that lie
// wholly below its durable offset (a file uploaded beyond one still on its
// way waits: the snapshot's offset must cover every record before it), and
// that offset.
func (s *Sink) collect() iceBatch {
	b := iceBatch{next: map[icetable.TopicPartition]int64{}, expect: map[icetable.TopicPartition]int64{},
		parts: map[icetable.TopicPartition]*partitionState{}, taken: map[*partitionState]int{}}
	keys := make([]bufferKey, 0, len(s.parts))
	for k := range s.parts {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		return keys[i].topic < keys[j].topic || keys[i].topic == keys[j].topic && keys[i].partition < keys[j].partition
	})
	for _, k := range keys {
		p := s.parts[k]
		if !p.started || p.released || p.ice.fenced {
			continue
		}
		d := p.durable(s.opts.Buffered)
		n := 0
		for n < len(p.ice.files) && p.ice.files[n].Last < d {
			n++
		}
		if n == 0 && d <= p.ice.durable {
			continue
		}
		tp := icetable.TopicPartition{Topic: p.topic, Partition: p.partition}
		b.files = append(b.files, p.ice.files[:n]...)
		b.next[tp], b.expect[tp], b.parts[tp], b.taken[p] = d, p.ice.expect, p, n
	}
	return b
}

// commitTable appends the files uploaded since the last commit to the
// table in one snapshot. A failure keeps them for the next commit; a
// partition whose table offset another writer moved is adopted or fenced
// (adopt), and an adopted one's later files are committed in a second
// snapshot at once.
func (s *Sink) commitTable(ctx context.Context) error {
	s.ice.commitMu.Lock()
	defer s.ice.commitMu.Unlock()
	for range 3 {
		again, err := s.commitRound(ctx)
		if err != nil || !again {
			return err
		}
	}
	return nil
}

// commitRound is one commit of commitTable; again reports a partition
// adopted, whose files above the table's offset wait for another.
func (s *Sink) commitRound(ctx context.Context) (again bool, err error) {
	ice := s.ice
	s.mu.Lock()
	b := s.collect()
	if len(b.next) == 0 {
		s.iceGauges()
		s.mu.Unlock()
		return false, nil
	}
	ice.committing = true
	s.mu.Unlock()

	res, err := ice.table.Commit(ctx, b.files, b.next, b.expect)
	var have map[icetable.TopicPartition]int64
	if err == nil && len(res.Dropped) > 0 {
		// An earlier commit that returned an error may have landed: the
		// table's offsets tell.
		have, _, err = ice.table.Offsets(ctx)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	ice.committing = false
	defer s.cond.Broadcast()
	if err != nil {
		ice.failures++
		ice.lastErr = err
		ice.m.failures.Add(1)
		s.log.Warn("S3 sink could not commit to the Iceberg table; the uploaded files stay remembered and go into the next commit",
			"table", s.opts.Iceberg.Table, "files", len(b.files), "failures", ice.failures, "error", err)
		s.iceGauges()
		return false, err
	}
	if ice.failures > 0 {
		s.log.Info("S3 sink committed to the Iceberg table again", "table", s.opts.Iceberg.Table, "failed_before", ice.failures)
	}
	ice.failures, ice.lastErr = 0, nil
	dropped := map[icetable.TopicPartition]bool{}
	for _, tp := range res.Dropped {
		dropped[tp] = true
	}
	committed := 0
	for tp, p := range b.parts {
		if dropped[tp] {
			n, ok := s.adopt(p, tp, b.expect[tp], have[tp])
			committed += n
			again = again || ok
			continue
		}
		n := b.taken[p]
		committed += n
		p.ice.files = p.ice.files[n:]
		p.ice.expect, p.ice.durable = b.next[tp], b.next[tp]
		if len(p.ice.files) > 0 {
			p.ice.since = s.now()
		}
	}
	if res.SnapshotID != 0 {
		ice.snapshot = res.SnapshotID
		ice.m.snapshot.Set(float64(res.SnapshotID))
	}
	ice.m.commits.Add(1)
	ice.m.committed.Add(float64(committed))
	s.log.Debug("S3 sink committed to the Iceberg table", "table", s.opts.Iceberg.Table, "snapshot", res.SnapshotID, "files", committed)
	s.iceGauges()
	return again, nil
}

// adopt settles a partition the table's commit left out because its
// offset was no longer the one expected, have. When have lies between the
// expected offset and the partition's durable one, at a boundary of its
// remembered files, the table holds the files below it already (an earlier commit that returned an error landed,
// or another writer committed the same files: the cuts are the same on
// every replay), and the partition goes on from have; it returns how many
// files that settled, and true. Otherwise another writer holds the partition, and
// this sink fences it: it commits none of its files any more.
func (s *Sink) adopt(p *partitionState, tp icetable.TopicPartition, expect, have int64) (int, bool) {
	files := p.ice.files
	if have > expect && have <= p.durable(s.opts.Buffered) {
		n := 0
		for n < len(files) && files[n].Last < have {
			n++
		}
		if n == len(files) || files[n].First >= have {
			p.ice.files = files[n:]
			p.ice.expect, p.ice.durable = have, have
			s.log.Info("S3 sink found its files in the table already (a commit that reported an error had landed); it goes on from the table's offset",
				"table", s.opts.Iceberg.Table, "topic", tp.Topic, "partition", tp.Partition, "table_offset", have)
			return n, true
		}
	}
	s.log.Error("S3 sink: another writer moved the table's offset of a partition (a runtime that lost it, or a second sink on the table); this sink commits none of its files any more, and they are not in the table",
		"table", s.opts.Iceberg.Table, "topic", tp.Topic, "partition", tp.Partition, "expected", expect, "table_offset", have, "files_dropped", len(files))
	p.ice.fenced = true
	p.ice.files = nil
	return 0, false
}

// iceGauges sets the commit lag and the uncommitted files' gauges.
func (s *Sink) iceGauges() {
	var oldest time.Time
	n := 0
	for _, p := range s.parts {
		if len(p.ice.files) > 0 && (oldest.IsZero() || p.ice.since.Before(oldest)) {
			oldest = p.ice.since
		}
		n += len(p.ice.files)
	}
	lag := 0.0
	if !oldest.IsZero() {
		lag = s.now().Sub(oldest).Seconds()
	}
	s.ice.m.lag.Set(lag)
	s.ice.m.pending.Set(float64(n))
}

// iceHealth is the table's part of Health: the catalog's error once
// healthAfter commits in a row failed.
func (s *Sink) iceHealth() error {
	if s.ice == nil || s.ice.failures < healthAfter {
		return nil
	}
	return fmt.Errorf("s3 sink: %d commits to iceberg_table '%s' failed in a row; uploads go on and the files are committed once the catalog answers: %w",
		s.ice.failures, s.opts.Iceberg.Table, s.ice.lastErr)
}

// iceSettle waits for a commit under way, so that the offsets of the
// partitions being released are settled before they are given up.
func (s *Sink) iceSettle(ctx context.Context) error {
	for s.ice != nil && s.ice.committing {
		if ctx.Err() != nil {
			return fmt.Errorf("s3 sink: a release waits for the table commit under way: %w", ctx.Err())
		}
		s.cond.Wait()
	}
	return nil
}

// iceRelease forgets the uploaded files of p that are not in the table:
// its next owner writes them again from the table's offset.
func (s *Sink) iceRelease(p *partitionState) {
	if n := len(p.ice.files); n > 0 {
		s.log.Info("S3 sink gives up a partition with uploaded files not yet in the table; its next owner writes them again",
			"topic", p.topic, "partition", p.partition, "files", n, "table_offset", p.ice.durable)
	}
	p.ice.files = nil
}

// closeTable makes the last commit of a graceful Close, once every upload
// is done, and closes the table.
func (s *Sink) closeTable(ctx context.Context) error {
	if s.ice == nil || s.ice.table == nil {
		return nil
	}
	err := s.commitTable(ctx)
	if err != nil {
		err = fmt.Errorf("s3 sink: the last commit to iceberg_table '%s' failed; its files are written again and committed on the next start: %w", s.opts.Iceberg.Table, err)
	}
	return errors.Join(err, s.ice.table.Close())
}
