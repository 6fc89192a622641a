package icetable

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/table"
)

// TestCommitScan commits real Parquet files to a day-partitioned table in
// a PostgreSQL catalog and reads them back with iceberg-go's scanner: the
// rows, their millisecond timestamps, the partition values of the data
// files and the offsets of the snapshot summary.
func TestCommitScan(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tbl := e.open(baseCols, daySpec)

	offs, snap, err := tbl.Offsets(ctx)
	if err != nil || len(offs) != 0 || snap != 0 {
		t.Fatalf("Offsets of a new table = %v, %d, %v; want none, 0", offs, snap, err)
	}
	tp0, tp1 := TopicPartition{"orders.eu", 0}, TopicPartition{"orders.eu", 1}
	files := []DataFile{
		uploadRows(e, "a.parquet", tp0, 0, 3, day0.Add(23*60*60*1e9)),   // 23:00 day 0
		uploadRows(e, "b.parquet", tp0, 3, 2, day0.Add(24*60*60*1e9+1)), // day 1
		uploadRows(e, "c.parquet", tp1, 0, 2, day0),
	}
	next := map[TopicPartition]int64{tp0: 5, tp1: 2}
	res, err := tbl.Commit(ctx, files, next, nil)
	if err != nil {
		t.Fatalf("Commit: %v", err)
	}
	if res.SnapshotID == 0 || len(res.Dropped) != 0 {
		t.Fatalf("Commit = %+v; want a snapshot and nothing dropped", res)
	}
	offs, snap, err = tbl.Offsets(ctx)
	if err != nil || !reflect.DeepEqual(offs, next) || snap != res.SnapshotID {
		t.Fatalf("Offsets = %v, %d, %v; want %v, %d", offs, snap, err, next, res.SnapshotID)
	}

	got := scan(t, tbl)
	if want := "orders.eu/0:0 orders.eu/0:1 orders.eu/0:2 orders.eu/0:3 orders.eu/0:4 orders.eu/1:0 orders.eu/1:1"; offsetsOf(got) != want {
		t.Fatalf("scanned offsets %s\nwant %s", offsetsOf(got), want)
	}
	first := got[0]
	want := scanned{"offset": "0", "timestamp": "2026-11-30T23:00:00Z", "topic": "orders.eu", "partition": "0",
		"key": "azA=", "name": "orders.eu-0-0", "amount": "0"}
	if !reflect.DeepEqual(first, want) {
		t.Fatalf("first row %v\nwant %v", first, want)
	}
	if got[4]["timestamp"] != "2026-12-01T00:00:01Z" || got[4]["amount"] != "2" {
		t.Fatalf("row of offset 4 is %v; want timestamp 2026-12-01T00:00:01Z and amount 2", got[4])
	}

	// The partition values are the days of the files' records.
	day := int32(day0.Unix() / 86400)
	parts := dataFilePaths(t, tbl)
	for path, wantDay := range map[string]int32{files[0].Path: day, files[1].Path: day + 1, files[2].Path: day} {
		p, ok := parts[path]
		if !ok {
			t.Fatalf("%s is not a data file of the table (%v)", path, parts)
		}
		if fmt.Sprint(p[1000]) != fmt.Sprint(wantDay) {
			t.Errorf("%s: partition %v; want timestamp_day %d", path, p, wantDay)
		}
	}

	// The partition values prune: a scan of day 1 plans b.parquet only
	// (the files carry no column statistics, so only the partition can
	// leave the others out).
	tasks, err := tbl.tbl.Scan(table.WithRowFilter(iceberg.GreaterThanEqual(iceberg.Reference("timestamp"),
		iceberg.Timestamp(day0.Add(24*time.Hour).UnixMicro())))).PlanFiles(ctx)
	if err != nil || len(tasks) != 1 || tasks[0].File.FilePath() != files[1].Path {
		t.Fatalf("files planned for day 1: %d, %v; want only %s", len(tasks), err, files[1].Path)
	}

	// A snapshot of another engine (here an empty append without our
	// summary properties, as a compaction would make) keeps the offsets.
	other := tbl.tbl.NewTransaction()
	if err := other.AddFiles(ctx, nil, iceberg.Properties{"engine": "other"}, true); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	offs, snap, err = tbl.Offsets(ctx)
	if err != nil || !reflect.DeepEqual(offs, next) || snap == res.SnapshotID {
		t.Fatalf("Offsets after another engine's snapshot = %v, %d, %v; want %v of the snapshot before, under a new current one", offs, snap, err, next)
	}

	// Offsets only: an empty snapshot that moves tp1 and keeps tp0.
	res2, err := tbl.Commit(ctx, nil, map[TopicPartition]int64{tp1: 4}, map[TopicPartition]int64{tp1: 2})
	if err != nil || res2.SnapshotID == res.SnapshotID {
		t.Fatalf("offsets-only Commit = %+v, %v; want a new snapshot", res2, err)
	}
	offs, _, _ = tbl.Offsets(ctx)
	if want := map[TopicPartition]int64{tp0: 5, tp1: 4}; !reflect.DeepEqual(offs, want) {
		t.Fatalf("Offsets = %v; want %v", offs, want)
	}
	// Nothing to do: no snapshot.
	res3, err := tbl.Commit(ctx, nil, map[TopicPartition]int64{tp1: 4}, map[TopicPartition]int64{tp1: 4})
	if err != nil || res3.SnapshotID != res2.SnapshotID {
		t.Fatalf("empty Commit = %+v, %v; want snapshot %d unchanged", res3, err, res2.SnapshotID)
	}
	if n := len(scan(t, tbl)); n != 7 {
		t.Fatalf("%d rows after the offsets-only commit; want 7", n)
	}
}

// TestFence: a writer whose expected offset is stale has its partition's
// files dropped, while its other partitions land.
func TestFence(t *testing.T) {
	e, a, b := newPair(t)
	ctx := t.Context()
	tp0, tp1 := TopicPartition{"t", 0}, TopicPartition{"t", 1}

	fa := uploadRows(e, "a.parquet", tp0, 0, 3, day0)
	if res, err := a.Commit(ctx, []DataFile{fa}, map[TopicPartition]int64{tp0: 3}, map[TopicPartition]int64{tp0: -1}); err != nil || len(res.Dropped) != 0 {
		t.Fatalf("a.Commit = %+v, %v", res, err)
	}
	// b still believes tp0 is at -1 (it never saw a's commit): the same
	// records, in another file, must not land twice.
	fb := uploadRows(e, "b.parquet", tp0, 0, 3, day0)
	fb1 := uploadRows(e, "b1.parquet", tp1, 0, 2, day0)
	res, err := b.Commit(ctx, []DataFile{fb, fb1}, map[TopicPartition]int64{tp0: 3, tp1: 2}, nil)
	if err != nil {
		t.Fatalf("b.Commit: %v", err)
	}
	if !reflect.DeepEqual(res.Dropped, []TopicPartition{tp0}) {
		t.Fatalf("b.Commit dropped %v; want [t/0]", res.Dropped)
	}
	if got := offsetsOf(scan(t, b)); got != "t/0:0 t/0:1 t/0:2 t/1:0 t/1:1" {
		t.Fatalf("scanned %s; want t/0 0-2 once and t/1 0-1", got)
	}
	paths, err := b.DataFiles(ctx)
	if want := []string{fa.Path, fb1.Path}; err != nil || !reflect.DeepEqual(paths, want) {
		t.Fatalf("DataFiles = %v, %v; want %v (not the dropped %s)", paths, err, want, fb.Path)
	}
	// A file outside the range from the table's offset to next is a
	// caller's error, not a commit.
	early := uploadRows(e, "early.parquet", tp1, 1, 2, day0)
	if _, err := b.Commit(ctx, []DataFile{early}, map[TopicPartition]int64{tp1: 3}, map[TopicPartition]int64{tp1: 2}); err == nil || !strings.Contains(err.Error(), "would duplicate records") {
		t.Fatalf("Commit of offsets 1-2 over a table at 2: %v; want a refusal", err)
	}
	late := uploadRows(e, "late.parquet", tp1, 2, 2, day0)
	if _, err := b.Commit(ctx, []DataFile{late}, map[TopicPartition]int64{tp1: 3}, map[TopicPartition]int64{tp1: 2}); err == nil || !strings.Contains(err.Error(), "at or past the next offset 3") {
		t.Fatalf("Commit of offsets 2-3 with next 3: %v; want a refusal", err)
	}
	if _, err := b.Commit(ctx, []DataFile{late}, nil, map[TopicPartition]int64{tp1: 2}); err == nil || !strings.Contains(err.Error(), "no next offset for t/1") {
		t.Fatalf("Commit of a file without a next offset: %v; want a refusal", err)
	}
	f1, f2 := uploadRows(e, "o1.parquet", tp1, 2, 3, day0), uploadRows(e, "o2.parquet", tp1, 4, 2, day0)
	if _, err := b.Commit(ctx, []DataFile{f2, f1}, map[TopicPartition]int64{tp1: 6}, map[TopicPartition]int64{tp1: 2}); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("Commit of files with offsets 2-4 and 4-5: %v; want a refusal", err)
	}
	if _, err := b.Commit(ctx, []DataFile{f1, f1}, map[TopicPartition]int64{tp1: 5}, map[TopicPartition]int64{tp1: 2}); err == nil || !strings.Contains(err.Error(), "given twice") {
		t.Fatalf("Commit of one file twice: %v; want a refusal", err)
	}
	// The fence holds for offsets alone too.
	res, err = b.Commit(ctx, nil, map[TopicPartition]int64{tp0: 9}, map[TopicPartition]int64{tp0: 0})
	if err != nil || !reflect.DeepEqual(res.Dropped, []TopicPartition{tp0}) {
		t.Fatalf("stale offsets-only Commit = %+v, %v; want t/0 dropped", res, err)
	}
	offs, _, _ := a.Offsets(ctx)
	if want := map[TopicPartition]int64{tp0: 3, tp1: 2}; !reflect.DeepEqual(offs, want) {
		t.Fatalf("Offsets = %v; want %v", offs, want)
	}
}

// TestConflictRetry: two writers of different partitions commit on stale
// table states; each commit loses the race once, is retried on the new
// state and lands, and every snapshot's summary keeps the other writer's
// offsets.
func TestConflictRetry(t *testing.T) {
	e, a, b := newPair(t)
	ctx := t.Context()
	tpA, tpB := TopicPartition{"t", 0}, TopicPartition{"t", 1}
	const rounds = 4
	for i := 0; i < rounds; i++ {
		// Both handles hold the state before this round: b's commit
		// conflicts with a's.
		fa := uploadRows(e, fmt.Sprintf("a%d.parquet", i), tpA, int64(2*i), 2, day0)
		fb := uploadRows(e, fmt.Sprintf("b%d.parquet", i), tpB, int64(2*i), 2, day0)
		expect := func(tp TopicPartition) map[TopicPartition]int64 {
			if i == 0 {
				return nil
			}
			return map[TopicPartition]int64{tp: int64(2 * i)}
		}
		if _, err := a.Commit(ctx, []DataFile{fa}, map[TopicPartition]int64{tpA: int64(2*i + 2)}, expect(tpA)); err != nil {
			t.Fatalf("round %d: a.Commit: %v", i, err)
		}
		res, err := b.Commit(ctx, []DataFile{fb}, map[TopicPartition]int64{tpB: int64(2*i + 2)}, expect(tpB))
		if err != nil || len(res.Dropped) != 0 || res.Retries != 1 {
			t.Fatalf("round %d: b.Commit = %+v, %v; want it retried once and landed", i, res, err)
		}
	}
	offs, _, err := a.Offsets(ctx)
	if want := map[TopicPartition]int64{tpA: 2 * rounds, tpB: 2 * rounds}; err != nil || !reflect.DeepEqual(offs, want) {
		t.Fatalf("Offsets = %v, %v; want %v", offs, err, want)
	}
	got := scan(t, a)
	if len(got) != 4*rounds {
		t.Fatalf("%d rows; want %d: %s", len(got), 4*rounds, offsetsOf(got))
	}
	// Offsets never go backwards along the snapshots.
	snaps, err := a.Snapshots(ctx)
	if err != nil || len(snaps) != 2*rounds {
		t.Fatalf("Snapshots = %d, %v; want %d", len(snaps), err, 2*rounds)
	}
	last := map[TopicPartition]int64{}
	for i, s := range snaps {
		if i > 0 && s.ParentID != snaps[i-1].ID || s.AddedFiles != 1 || s.AddedRecords != 2 {
			t.Fatalf("snapshot %d: %+v; want parent %d, 1 file of 2 records", i, s, snaps[i-1].ID)
		}
		for tp, off := range s.Offsets {
			if off < last[tp] {
				t.Fatalf("snapshot %d: %s went back from %d to %d", s.ID, tp, last[tp], off)
			}
			last[tp] = off
		}
		for tp := range last {
			if _, ok := s.Offsets[tp]; !ok {
				t.Fatalf("snapshot %d lost the offset of %s", s.ID, tp)
			}
		}
	}
}

// TestSchemaEvolution: a column added to the definition is added to the
// table; rows committed before read it as null. A type change Iceberg
// cannot make, or another partitioning, is refused by name.
func TestSchemaEvolution(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tp := TopicPartition{"t", 0}
	tbl := e.open(baseCols, daySpec)
	f1 := uploadRows(e, "old.parquet", tp, 0, 2, day0)
	if _, err := tbl.Commit(ctx, []DataFile{f1}, map[TopicPartition]int64{tp: 2}, nil); err != nil {
		t.Fatal(err)
	}
	tbl.Close()

	cols := append(append([]Column{}, baseCols...), Column{Name: "note", Type: "string", Optional: true})
	tbl2 := e.open(cols, daySpec)
	var recs []rowNote
	for i, r := range rows(tp, 2, 2, day0) {
		note := fmt.Sprint("note ", i)
		recs = append(recs, rowNote{row: r, Note: &note})
	}
	f2 := upload(e, "new.parquet", tp, 2, 3, day0, recs)
	if _, err := tbl2.Commit(ctx, []DataFile{f2}, map[TopicPartition]int64{tp: 4}, map[TopicPartition]int64{tp: 2}); err != nil {
		t.Fatal(err)
	}
	var notes []string
	for _, r := range scan(t, tbl2) {
		notes = append(notes, r["offset"]+":"+r["note"])
	}
	if got := strings.Join(notes, " "); got != "0:null 1:null 2:note 0 3:note 1" {
		t.Fatalf("offset:note = %s; want the old rows null", got)
	}
	// Opening again with the same columns changes nothing.
	before := tbl2.tbl.Metadata().CurrentSchema().ID
	tbl3 := e.open(cols, daySpec)
	if id := tbl3.tbl.Metadata().CurrentSchema().ID; id != before {
		t.Fatalf("schema id %d after a reopen with the same columns; want %d", id, before)
	}

	other := e.cfg
	other.Table = "lake.other"
	if _, err := Open(ctx, other, nil, nil); err == nil || !strings.Contains(err.Error(), "iceberg table lake.other: table does not exist") {
		t.Fatalf("Open of a missing table without columns: %v; want it not created", err)
	}
	other.Warehouse = ""
	if _, err := Open(ctx, other, cols, daySpec); err == nil || !strings.Contains(err.Error(), "iceberg table lake.other does not exist and no warehouse is set") {
		t.Fatalf("Open of a new table without a warehouse: %v", err)
	}
	bad := append([]Column{}, cols...)
	bad[5] = Column{Name: "name", Type: "int64"}
	_, err := Open(ctx, e.cfg, bad, daySpec)
	if err == nil || !strings.Contains(err.Error(), "iceberg column name") || !strings.Contains(err.Error(), "string in the table") {
		t.Fatalf("Open with name string->int64: %v; want an error naming the column and both types", err)
	}
	_, err = Open(ctx, e.cfg, cols, []PartitionField{{Source: "timestamp", Transform: "hour"}})
	if err == nil || !strings.Contains(err.Error(), "partitioned by [day(timestamp)]") {
		t.Fatalf("Open with another partitioning: %v; want an error naming both", err)
	}
	// Widening is allowed: amount is double already; partition int32 -> int64.
	wide := append([]Column{}, cols...)
	wide[3] = Column{Name: "partition", Type: "int64"}
	if w, err := Open(ctx, e.cfg, wide, daySpec); err != nil {
		t.Fatalf("Open widening partition to int64: %v", err)
	} else {
		w.Close()
	}
}

// TestOrphans: an uploaded file no snapshot references is an orphan; a
// committed one is not, and DeleteOrphans refuses it.
func TestOrphans(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tp := TopicPartition{"t", 0}
	tbl := e.open(baseCols, daySpec)
	committed := uploadRows(e, "t/0/committed.parquet", tp, 0, 2, day0)
	orphan := uploadRows(e, "t/0/orphan.parquet", tp, 2, 2, day0)
	if _, err := tbl.Commit(ctx, []DataFile{committed}, map[TopicPartition]int64{tp: 2}, nil); err != nil {
		t.Fatal(err)
	}
	got, err := tbl.Orphans(ctx, e.prefix)
	if err != nil || !reflect.DeepEqual(got, []string{orphan.Path}) {
		t.Fatalf("Orphans = %v, %v; want [%s]", got, err, orphan.Path)
	}
	// The warehouse (metadata) is not listed even when under the prefix.
	whole := strings.TrimSuffix(e.prefix, "data/")
	got, err = tbl.Orphans(ctx, whole)
	if err != nil || !reflect.DeepEqual(got, []string{orphan.Path}) {
		t.Fatalf("Orphans(%s) = %v, %v; want [%s]", whole, got, err, orphan.Path)
	}
	if err := tbl.DeleteOrphans(ctx, []string{orphan.Path, committed.Path}); err == nil || !strings.Contains(err.Error(), "not an orphan") {
		t.Fatalf("DeleteOrphans of a committed file: %v; want a refusal", err)
	}
	e.cfg.OrphanMinAge = time.Hour
	young := e.open(nil, nil) // as it is, as the admin command opens it
	if got, err := young.Orphans(ctx, e.prefix); err != nil || len(got) != 0 {
		t.Fatalf("Orphans of objects younger than OrphanMinAge = %v, %v; want none", got, err)
	}
	if err := tbl.DeleteOrphans(ctx, got); err != nil {
		t.Fatal(err)
	}
	if got, err := tbl.Orphans(ctx, e.prefix); err != nil || len(got) != 0 {
		t.Fatalf("Orphans after DeleteOrphans = %v, %v; want none", got, err)
	}
	if n := len(scan(t, tbl)); n != 2 {
		t.Fatalf("%d rows; want the committed file's 2", n)
	}
}

// TestErrorsHideSecrets: a failing catalog's error quotes neither the
// password of its URI nor the S3 secret key.
func TestErrorsHideSecrets(t *testing.T) {
	cfg := Config{Catalog: "sql", URI: "postgres://pico:Hunter2Secret@127.0.0.1:1/cat?sslmode=disable",
		Table: "a.b", S3: S3Config{SecretAccessKey: "S3SecretValue"}}
	_, err := Open(t.Context(), cfg, baseCols, nil)
	if err == nil {
		t.Fatal("Open of an unreachable catalog succeeded")
	}
	if msg := err.Error(); strings.Contains(msg, "Hunter2Secret") || strings.Contains(msg, "S3SecretValue") {
		t.Fatalf("the error quotes a secret: %s", msg)
	}
	// A REST catalog that quotes the request's credentials back in its
	// error: the error Open returns still hides them.
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		msg := fmt.Sprintf("bad request %s %s auth=%s body=%s", r.Method, r.URL, r.Header.Get("Authorization"), body)
		json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "BadRequestException", "code": 400}})
	}))
	defer srv.Close()
	for _, rc := range []Config{
		{Catalog: "rest", URI: srv.URL, Token: "TokSecret123", Table: "a.b"},
		{Catalog: "rest", URI: srv.URL, Credential: "client:CredSecret456", Table: "a.b"},
	} {
		_, err := Open(t.Context(), rc, baseCols, nil)
		if err == nil {
			t.Fatal("Open of a failing REST catalog succeeded")
		}
		if msg := err.Error(); strings.Contains(msg, "TokSecret123") || strings.Contains(msg, "CredSecret456") {
			t.Fatalf("the error quotes a secret: %s", msg)
		}
		t.Logf("rest: %q", err.Error())
	}
	for _, c := range []struct {
		cfg  Config
		want string
	}{
		{Config{Catalog: "hive", Table: "a.b"}, "iceberg catalog 'hive' is not supported"},
		{Config{Catalog: "sql", Table: "nodot"}, "must be namespace.table"},
		{Config{Catalog: "sql", URI: "mysql://x", Table: "a.b"}, "neither a PostgreSQL URL nor a SQLite file"},
		{Config{Catalog: "sql", Table: "a.b", Warehouse: "gs://b/w"}, "iceberg warehouse 'gs://b/w' is not an S3 location"},
	} {
		if _, err := Open(t.Context(), c.cfg, baseCols, nil); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Open(%+v) = %v; want %q", c.cfg, err, c.want)
		}
	}
}

// TestConcurrentWriters: two writers commit their own partitions at the
// same time, each on its own table handle; every commit lands.
func TestConcurrentWriters(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	const rounds = 5
	writers := []*Table{e.open(baseCols, daySpec), e.open(baseCols, daySpec)}
	errs := make(chan error, len(writers))
	retries := make(chan int, len(writers)*rounds)
	for w, tbl := range writers {
		tp := TopicPartition{"t", int32(w)}
		files := make([]DataFile, rounds)
		for i := range files {
			files[i] = uploadRows(e, fmt.Sprintf("w%d-%d.parquet", w, i), tp, int64(3*i), 3, day0)
		}
		go func() {
			for i, f := range files {
				expect := int64(3 * i)
				if i == 0 {
					expect = -1 // none yet
				}
				res, err := tbl.Commit(ctx, []DataFile{f}, map[TopicPartition]int64{tp: int64(3*i + 3)}, map[TopicPartition]int64{tp: expect})
				if err == nil && len(res.Dropped) > 0 {
					err = fmt.Errorf("writer %d round %d: dropped %v", w, i, res.Dropped)
				}
				if err != nil {
					errs <- err
					return
				}
				retries <- res.Retries
			}
			errs <- nil
		}()
	}
	for range writers {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	close(retries)
	total := 0
	for r := range retries {
		total += r
	}
	t.Logf("%d commits retried %d times", 2*rounds, total)
	offs, _, err := writers[0].Offsets(ctx)
	if want := map[TopicPartition]int64{{"t", 0}: 3 * rounds, {"t", 1}: 3 * rounds}; err != nil || !reflect.DeepEqual(offs, want) {
		t.Fatalf("Offsets = %v, %v; want %v", offs, err, want)
	}
	if n := len(scan(t, writers[0])); n != 2*3*rounds {
		t.Fatalf("%d rows; want %d", n, 2*3*rounds)
	}
}

// TestExpireSnapshots: once enough snapshots are past the table's
// retention, Commit expires them; manifests are merged (here every 4);
// every row and data file stays.
func TestExpireSnapshots(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tbl := e.open(baseCols, daySpec)
	txn := tbl.tbl.NewTransaction()
	if err := txn.SetProperties(map[string]string{"history.expire.max-snapshot-age-ms": "1", "history.expire.min-snapshots-to-keep": "3",
		"commit.manifest.min-count-to-merge": "4"}); err != nil {
		t.Fatal(err)
	}
	next, err := txn.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	tbl.tbl = next
	tp := TopicPartition{"t", 0}
	most := 0
	for i := 0; i < expireBatch+4; i++ {
		f := uploadRows(e, fmt.Sprintf("f%d.parquet", i), tp, int64(i), 1, day0)
		expect := int64(i)
		if i == 0 {
			expect = -1
		}
		res, err := tbl.Commit(ctx, []DataFile{f}, map[TopicPartition]int64{tp: int64(i + 1)}, map[TopicPartition]int64{tp: expect})
		if err != nil || res.ExpireErr != nil || len(res.Dropped) > 0 {
			t.Fatalf("commit %d = %+v, %v", i, res, err)
		}
		most = max(most, len(tbl.tbl.Metadata().Snapshots()))
	}
	if n := len(tbl.tbl.Metadata().Snapshots()); n >= expireBatch+3 || most > expireBatch+3 {
		t.Fatalf("%d snapshots (at most %d) after %d commits; want them expired after %d", n, most, expireBatch+4, expireBatch+3)
	}
	if n := len(scan(t, tbl)); n != expireBatch+4 {
		t.Fatalf("%d rows; want %d", n, expireBatch+4)
	}
	if paths, err := tbl.DataFiles(ctx); err != nil || len(paths) != expireBatch+4 {
		t.Fatalf("DataFiles = %d, %v; want %d", len(paths), err, expireBatch+4)
	}
	fs, err := tbl.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if mfs, err := tbl.tbl.CurrentSnapshot().Manifests(fs); err != nil || len(mfs) >= 4 {
		t.Fatalf("%d manifests, %v; want them merged below 4", len(mfs), err)
	}
	// The merged manifests keep the partition values: day 1 prunes every file.
	tasks, err := tbl.tbl.Scan(table.WithRowFilter(iceberg.GreaterThanEqual(iceberg.Reference("timestamp"),
		iceberg.Timestamp(day0.Add(24*time.Hour).UnixMicro())))).PlanFiles(ctx)
	if err != nil || len(tasks) != 0 {
		t.Fatalf("files planned for day 1: %d, %v; want none", len(tasks), err)
	}
	if got, err := tbl.Orphans(ctx, e.prefix); err != nil || len(got) != 0 {
		t.Fatalf("Orphans after expiry = %v, %v; want none", got, err)
	}
}

// TestOpenRace: writers that open a missing table at the same time all
// get it, created once, with the column one of them adds.
func TestOpenRace(t *testing.T) {
	e := newEnv(t)
	const n = 4
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		cols := baseCols
		if i == n-1 {
			cols = append(append([]Column{}, baseCols...), Column{Name: "note", Type: "string", Optional: true})
		}
		go func() {
			tbl, err := Open(t.Context(), e.cfg, cols, daySpec)
			if err == nil {
				err = tbl.Close()
			}
			errs <- err
		}()
	}
	for i := 0; i < n; i++ {
		if err := <-errs; err != nil {
			t.Fatalf("concurrent Open: %v", err)
		}
	}
	tbl := e.open(baseCols, daySpec)
	if _, ok := tbl.tbl.Schema().FindFieldByName("note"); !ok {
		t.Fatalf("schema %v lacks the column note", tbl.tbl.Schema())
	}
}

// TestCatalogOutage: while the catalog's database is down Commit fails
// (nothing committed, the error names the catalog without the password
// of its URI); once it is back the same commit lands, on the same Table.
func TestCatalogOutage(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tbl := e.open(baseCols, daySpec)
	tp := TopicPartition{"t", 0}
	f := uploadRows(e, "a.parquet", tp, 0, 2, day0)
	if err := shared.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { shared.pg.Start() })
	_, err := tbl.Commit(ctx, []DataFile{f}, map[TopicPartition]int64{tp: 2}, nil)
	if err == nil {
		t.Fatal("Commit with the catalog down succeeded")
	}
	t.Logf("catalog down: %v", err)
	if _, _, err := tbl.Offsets(ctx); err == nil {
		t.Fatal("Offsets with the catalog down succeeded")
	}
	if err := shared.pg.Start(); err != nil {
		t.Fatal(err)
	}
	res, err := tbl.Commit(ctx, []DataFile{f}, map[TopicPartition]int64{tp: 2}, nil)
	if err != nil || len(res.Dropped) != 0 {
		t.Fatalf("Commit after the catalog came back = %+v, %v", res, err)
	}
	if got := offsetsOf(scan(t, tbl)); got != "t/0:0 t/0:1" {
		t.Fatalf("scanned %s; want offsets 0 and 1 once", got)
	}
}

// TestSQLiteCatalog: the sql catalog on a SQLite file (sqlite:PATH) holds
// the table as the PostgreSQL one does: commit, offsets, scan, and a
// second handle that reopens the file.
func TestSQLiteCatalog(t *testing.T) {
	e := newEnv(t)
	e.cfg.URI = "sqlite:" + filepath.Join(t.TempDir(), "catalog.db")
	ctx := t.Context()
	tbl := e.open(baseCols, daySpec)
	tp := TopicPartition{"orders.eu", 0}
	files := []DataFile{uploadRows(e, "s1.parquet", tp, 0, 3, day0), uploadRows(e, "s2.parquet", tp, 3, 2, day0)}
	res, err := tbl.Commit(ctx, files, map[TopicPartition]int64{tp: 5}, nil)
	if err != nil || res.SnapshotID == 0 {
		t.Fatalf("Commit = %+v, %v; want a snapshot", res, err)
	}
	again := e.open(baseCols, daySpec)
	offs, snap, err := again.Offsets(ctx)
	if err != nil || offs[tp] != 5 || snap != res.SnapshotID {
		t.Fatalf("Offsets through a second handle = %v, %d, %v; want %v: 5 at snapshot %d", offs, snap, err, tp, res.SnapshotID)
	}
	if got := offsetsOf(scan(t, again)); got != "orders.eu/0:0 orders.eu/0:1 orders.eu/0:2 orders.eu/0:3 orders.eu/0:4" {
		t.Fatalf("scanned %s; want offsets 0 to 4 once", got)
	}
}
