package icetable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/parquet-go/parquet-go"

	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// The servers every test shares: one PostgreSQL (each test has its own
// database, the catalog) and one S3 server (each test its own prefix).
var shared struct {
	once  sync.Once
	pg    *pgtest.Server
	s3    *s3test.Server
	pgErr error
	s3Err error
	seq   atomic.Int64
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared.pg != nil {
		shared.pg.Close()
	}
	if shared.s3 != nil {
		shared.s3.Close()
	}
	os.Exit(code)
}

// env is one test's catalog database and warehouse prefix.
type env struct {
	t      *testing.T
	s3     *s3test.Server
	cfg    Config
	prefix string // "s3://bucket/test-N/data/": where the test's data files go
}

func newEnv(t *testing.T) *env {
	t.Helper()
	shared.once.Do(func() {
		shared.pg, shared.pgErr = pgtest.New()
		shared.s3, shared.s3Err = s3test.New("")
	})
	pgtest.Need(t, shared.pgErr)
	if shared.s3Err != nil {
		if errors.Is(shared.s3Err, s3test.ErrNoBinary) && os.Getenv("CI") != "true" {
			t.Skip(shared.s3Err)
		}
		t.Fatal(shared.s3Err)
	}
	n := shared.seq.Add(1)
	dsn := shared.pg.CreateDatabase(t, fmt.Sprintf("icecat%d", n))
	s := shared.s3
	base := fmt.Sprintf("s3://%s/test-%d", s.Bucket, n)
	return &env{t: t, s3: s, prefix: base + "/data/", cfg: Config{
		Catalog:   "sql",
		URI:       dsn,
		Warehouse: base + "/warehouse",
		Table:     "lake.events",
		S3: S3Config{Endpoint: s.Endpoint, Region: s3test.Region, AccessKeyID: s.AccessKey,
			SecretAccessKey: s.SecretKey, PathStyle: true},
	}}
}

// open opens the test's table with cols and spec, failing the test on error.
func (e *env) open(cols []Column, spec []PartitionField) *Table {
	e.t.Helper()
	tbl, err := Open(e.t.Context(), e.cfg, cols, spec)
	if err != nil {
		e.t.Fatalf("Open: %v", err)
	}
	e.t.Cleanup(func() { tbl.Close() })
	return tbl
}

// newPair is newEnv with two handles on its table, as two writers have.
func newPair(t *testing.T) (*env, *Table, *Table) {
	t.Helper()
	e := newEnv(t)
	return e, e.open(baseCols, daySpec), e.open(baseCols, daySpec)
}

// baseCols are the sink's metadata columns and two payload columns.
var baseCols = []Column{
	{Name: "offset", Type: "int64"},
	{Name: "timestamp", Type: "timestamp_ms"},
	{Name: "topic", Type: "string"},
	{Name: "partition", Type: "int32"},
	{Name: "key", Type: "bytes", Optional: true},
	{Name: "name", Type: "string"},
	{Name: "amount", Type: "double", Optional: true},
}

var daySpec = []PartitionField{{Source: "timestamp", Transform: "day"}}

// row is a record as the sink writes it with baseCols.
type row struct {
	Offset    int64    `parquet:"offset"`
	Timestamp int64    `parquet:"timestamp,timestamp(millisecond)"`
	Topic     string   `parquet:"topic"`
	Partition int32    `parquet:"partition"`
	Key       []byte   `parquet:"key,optional"`
	Name      string   `parquet:"name"`
	Amount    *float64 `parquet:"amount,optional"`
}

// rowNote is row with the column note added.
type rowNote struct {
	row
	Note *string `parquet:"note,optional"`
}

// day0 is the midnight (UTC) of the test's first day.
var day0 = time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)

// rows are n records of tp from offset first, at ts plus one second each.
func rows(tp TopicPartition, first int64, n int, ts time.Time) []row {
	out := make([]row, n)
	for i := range out {
		off := first + int64(i)
		amount := float64(off) / 2
		out[i] = row{Offset: off, Timestamp: ts.Add(time.Duration(i) * time.Second).UnixMilli(),
			Topic: tp.Topic, Partition: tp.Partition, Key: []byte(fmt.Sprint("k", off)),
			Name: fmt.Sprintf("%s-%d-%d", tp.Topic, tp.Partition, off), Amount: &amount}
	}
	return out
}

// upload writes recs as a Parquet object under the test's prefix and
// returns its DataFile, partitioned by the day of the first record.
func upload[R any](e *env, name string, tp TopicPartition, first, last int64, ts time.Time, recs []R) DataFile {
	e.t.Helper()
	var buf bytes.Buffer
	w := parquet.NewGenericWriter[R](&buf)
	if _, err := w.Write(recs); err != nil {
		e.t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		e.t.Fatal(err)
	}
	path := e.prefix + name
	bucket, key, _ := splitS3(path)
	_, err := e.s3.Client.PutObject(e.t.Context(), &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(buf.Bytes())})
	if err != nil {
		e.t.Fatal(err)
	}
	return DataFile{Path: path, Size: int64(buf.Len()), Records: int64(len(recs)), TP: tp,
		First: first, Last: last, Partition: map[string]any{"timestamp": ts}}
}

// uploadRows is upload of rows(tp, first, n, ts).
func uploadRows(e *env, name string, tp TopicPartition, first int64, n int, ts time.Time) DataFile {
	e.t.Helper()
	return upload(e, name, tp, first, first+int64(n)-1, ts, rows(tp, first, n, ts))
}

// scanned is one row of a scan: the columns a test looks at, as text.
type scanned map[string]string

// scan reads the whole table with iceberg-go's scanner, sorted by topic,
// partition and offset.
func scan(t *testing.T, tbl *Table) []scanned {
	t.Helper()
	at, err := tbl.ReadAll(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	var out []scanned
	tr := array.NewTableReader(at, 1024)
	defer tr.Release()
	for tr.Next() {
		rec := tr.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			r := scanned{}
			for c, f := range rec.Schema().Fields() {
				col := rec.Column(c)
				switch {
				case col.IsNull(i):
					r[f.Name] = "null"
				case f.Type.ID() == arrow.TIMESTAMP:
					ts := col.(*array.Timestamp)
					unit := f.Type.(*arrow.TimestampType).Unit
					r[f.Name] = ts.Value(i).ToTime(unit).UTC().Format(time.RFC3339Nano)
				default:
					r[f.Name] = col.ValueStr(i)
				}
			}
			out = append(out, r)
		}
	}
	if err := tr.Err(); err != nil {
		t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a["topic"] != b["topic"] {
			return a["topic"] < b["topic"]
		}
		if a["partition"] != b["partition"] {
			return a["partition"] < b["partition"]
		}
		return len(a["offset"]) < len(b["offset"]) || len(a["offset"]) == len(b["offset"]) && a["offset"] < b["offset"]
	})
	return out
}

// offsetsOf lists "topic/partition:offset" of every scanned row, in order.
func offsetsOf(rs []scanned) string {
	var parts []string
	for _, r := range rs {
		parts = append(parts, r["topic"]+"/"+r["partition"]+":"+r["offset"])
	}
	return strings.Join(parts, " ")
}

// dataFilePaths are the paths of the data files of the table's current
// snapshot, sorted.
func dataFilePaths(t *testing.T, tbl *Table) map[string]map[int]any {
	t.Helper()
	ctx := context.Background()
	fs, err := tbl.tbl.FS(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[int]any{}
	snap := tbl.tbl.CurrentSnapshot()
	if snap == nil {
		return out
	}
	mfs, err := snap.Manifests(fs)
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for e, err := range mf.Entries(fs, true) {
			if err != nil {
				t.Fatal(err)
			}
			out[e.DataFile().FilePath()] = e.DataFile().Partition()
		}
	}
	return out
}
