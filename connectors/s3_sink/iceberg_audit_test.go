package s3sink_test

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
)

// tableRows is what a scan of the table gave: per topic, how many rows
// hold each offset, and the rows' column values by name.
type tableRows struct {
	offsets map[string]map[int64]int
	rows    int
	// cols holds, per column name, the values in scan order (nil for null).
	cols map[string][]any
}

// scanTable reads every row of the table's current snapshot with
// iceberg-go's scan into Arrow (icetable's ReadAll).
func scanTable(t *testing.T, ctx context.Context, tb *icetable.Table) tableRows {
	t.Helper()
	tbl, err := tb.ReadAll(ctx)
	if err != nil {
		t.Fatalf("scan: %v", err)
	}
	defer tbl.Release()
	out := tableRows{offsets: map[string]map[int64]int{}, cols: map[string][]any{}}
	rd := array.NewTableReader(tbl, 4096)
	defer rd.Release()
	for rd.Next() {
		addRows(t, &out, rd.RecordBatch())
	}
	return out
}

// addRows adds an Arrow record's rows: its offset and topic columns, and
// every column's values.
func addRows(t *testing.T, out *tableRows, rec arrow.RecordBatch) {
	t.Helper()
	sc := rec.Schema()
	off, top := sc.FieldIndices("offset"), sc.FieldIndices("topic")
	if len(off) != 1 || len(top) != 1 {
		t.Fatalf("the table has no offset or topic column: %s", sc)
	}
	offs, ok := rec.Column(off[0]).(*array.Int64)
	if !ok {
		t.Fatalf("offset is %s, not int64", rec.Column(off[0]).DataType())
	}
	for i := 0; i < int(rec.NumRows()); i++ {
		topic := rec.Column(top[0]).ValueStr(i)
		if out.offsets[topic] == nil {
			out.offsets[topic] = map[int64]int{}
		}
		out.offsets[topic][offs.Value(i)]++
	}
	for c, f := range sc.Fields() {
		col := rec.Column(c)
		for i := 0; i < col.Len(); i++ {
			var v any
			if !col.IsNull(i) {
				v = col.ValueStr(i)
			}
			out.cols[f.Name] = append(out.cols[f.Name], v)
		}
	}
	out.rows += int(rec.NumRows())
}

// auditTable checks the table of sink key against the topics' ends: every
// offset below each end exactly once in the scan; the snapshot summaries'
// offsets never going backwards and ending at end; and the data files the
// manifests name, read with arrow-go's Parquet reader, holding the same
// rows as the scan.
func (e *iceEnv) auditTable(t *testing.T, key string, tb *icetable.Table, end map[string]int64) tableRows {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	scan := scanTable(t, ctx, tb)
	for topic, n := range end {
		missing, dup := 0, 0
		for off := int64(0); off < n; off++ {
			switch c := scan.offsets[topic][off]; {
			case c == 0:
				missing++
			case c > 1:
				dup++
			}
		}
		extra := len(scan.offsets[topic]) - int(n) + missing
		t.Logf("table bb.%s (%d rows), %s: %d offsets, %d missing, %d duplicated, %d beyond the end", key, scan.rows, topic, n, missing, dup, extra)
		if missing > 0 || dup > 0 || extra > 0 {
			t.Errorf("table bb.%s does not hold every offset of %s below %d exactly once: %d missing, %d duplicated, %d beyond", key, topic, n, missing, dup, extra)
		}
	}
	checkSnapshots(t, ctx, key, tb, end)
	files := e.readDataFiles(t, ctx, tb)
	if files.rows != scan.rows {
		t.Errorf("the manifests' data files hold %d rows, the scan %d", files.rows, scan.rows)
	}
	for topic, offs := range scan.offsets {
		for off, c := range offs {
			if files.offsets[topic][off] != c {
				t.Errorf("offset %s@%d: %d rows in the scan, %d in the data files", topic, off, c, files.offsets[topic][off])
				break
			}
		}
	}
	return scan
}

// checkSnapshots checks that, oldest first, no snapshot's summary records
// a lower offset than an earlier one, and that the last records end.
func checkSnapshots(t *testing.T, ctx context.Context, key string, tb *icetable.Table, end map[string]int64) {
	t.Helper()
	snaps, err := tb.Snapshots(ctx)
	if err != nil {
		t.Fatalf("snapshots: %v", err)
	}
	last := map[icetable.TopicPartition]int64{}
	for _, s := range snaps {
		for tp, n := range s.Offsets {
			if n < last[tp] {
				t.Errorf("snapshot %d: the offset of %s went back from %d to %d", s.ID, tp, last[tp], n)
			}
			last[tp] = n
		}
	}
	for topic, n := range end {
		if tp := (icetable.TopicPartition{Topic: topic}); last[tp] != n {
			t.Errorf("the last snapshot of bb.%s records %s at %d, want %d", key, tp, last[tp], n)
		}
	}
	t.Logf("table bb.%s: %d snapshots kept, offsets never went back", key, len(snaps))
}

// readDataFiles reads every data file of the current snapshot (its
// manifests name them) with arrow-go's Parquet reader.
func (e *iceEnv) readDataFiles(t *testing.T, ctx context.Context, tb *icetable.Table) tableRows {
	t.Helper()
	out := tableRows{offsets: map[string]map[int64]int{}, cols: map[string][]any{}}
	paths, err := tb.DataFiles(ctx)
	if err != nil {
		t.Fatalf("data files: %v", err)
	}
	prefix := "s3://" + e.srv.Bucket + "/"
	for _, p := range paths {
		key, ok := strings.CutPrefix(p, prefix)
		if !ok {
			t.Fatalf("data file %s is not in bucket %s", p, e.srv.Bucket)
		}
		e.readParquet(t, ctx, key, &out)
	}
	return out
}

// readParquet reads one object with arrow-go's Parquet reader into out.
func (e *iceEnv) readParquet(t *testing.T, ctx context.Context, key string, out *tableRows) {
	t.Helper()
	obj, err := e.srv.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(e.srv.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	body, err := io.ReadAll(obj.Body)
	obj.Body.Close()
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	pf, err := file.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s is not a Parquet file: %v", key, err)
	}
	defer pf.Close()
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 4096}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(ctx)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	defer tbl.Release()
	rd := array.NewTableReader(tbl, 4096)
	defer rd.Release()
	for rd.Next() {
		addRows(t, out, rd.RecordBatch())
	}
}
