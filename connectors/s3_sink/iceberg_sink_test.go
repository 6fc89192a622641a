package s3sink

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// In-process tests of table_format = "iceberg" against versitygw and
// PostgreSQL 15 as the SQL catalog: schema evolution, resuming from a
// table ahead of the consumer group, the orphans command. The black-box
// runs (SIGKILL, catalog outage) are in iceberg_blackbox_test.go.

// iceHarness is a bucket and a catalog database.
type iceHarness struct {
	srv *s3test.Server
	dsn string
}

func newIceHarness(t *testing.T) *iceHarness {
	pg := pgtest.Start(t)
	return &iceHarness{srv: s3test.Start(t), dsn: pg.CreateDatabase(t, "iceberg")}
}

// open opens an iceberg sink on table lake.NAME under prefix NAME, with
// columns and commits only at Close (commit_interval 1h).
func (h *iceHarness) open(t *testing.T, name string, cols []columnSpec) *Sink {
	t.Helper()
	return openAt(t, h.srv, h.srv.Endpoint, name, func(o *options) {
		o.Format, o.Columns, o.MaxMessages, o.RotateByMessages = formatParquet, cols, 20, true
		o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: h.dsn, Table: "lake." + name, CommitInterval: time.Hour}
	})
}

// table opens the table lake.NAME as it is.
func (h *iceHarness) table(t *testing.T, name string) *icetable.Table {
	t.Helper()
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = h.srv.Bucket, s3test.Region, h.srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey, o.Prefix = h.srv.AccessKey, h.srv.SecretKey, name
	o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: h.dsn, Table: "lake." + name}
	tb, err := icetable.Open(context.Background(), o.tableConfig(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

// iceRecords are JSON records from..to-1 of topic, partition 0: n, and
// extra = "xN".
func iceRecords(topic string, from, to int64) []sdk.Record {
	var out []sdk.Record
	for i := from; i < to; i++ {
		out = append(out, sdk.Record{Topic: topic, Offset: i, Schema: sdk.SchemaJSON,
			Timestamp: time.UnixMilli(1_790_000_000_000 + i).UTC(), Payload: fmt.Appendf(nil, `{"n":%d,"extra":"x%d"}`, i, i)})
	}
	return out
}

// readTable returns the table's rows: n and extra (nil for null) by
// offset, and how many rows each offset has.
func readTable(t *testing.T, tb *icetable.Table) (map[int64][2]any, map[int64]int) {
	t.Helper()
	tbl, err := tb.ReadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	rows, seen := map[int64][2]any{}, map[int64]int{}
	rd := array.NewTableReader(tbl, 1024)
	defer rd.Release()
	for rd.Next() {
		rec := rd.RecordBatch()
		idx := func(name string) int {
			if f := rec.Schema().FieldIndices(name); len(f) == 1 {
				return f[0]
			}
			return -1
		}
		off, n, extra := idx("offset"), idx("n"), idx("extra")
		for i := 0; i < int(rec.NumRows()); i++ {
			o := rec.Column(off).(*array.Int64).Value(i)
			seen[o]++
			var x any
			if extra >= 0 && !rec.Column(extra).IsNull(i) {
				x = rec.Column(extra).ValueStr(i)
			}
			rows[o] = [2]any{rec.Column(n).ValueStr(i), x}
		}
	}
	return rows, seen
}

// tableShape scans the table and returns its columns as "name:type ..."
// (arrow's types) and its row count.
func tableShape(t *testing.T, tb *icetable.Table) (string, int64) {
	t.Helper()
	tbl, err := tb.ReadAll(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	var cols []string
	for _, f := range tbl.Schema().Fields() {
		cols = append(cols, f.Name+":"+f.Type.String())
	}
	return strings.Join(cols, " "), tbl.NumRows()
}

// wantOnce fails unless every offset below n is in seen exactly once.
func wantOnce(t *testing.T, seen map[int64]int, n int64) {
	t.Helper()
	for o := int64(0); o < n; o++ {
		if seen[o] != 1 {
			t.Fatalf("offset %d is %d times in the table, want once (%d offsets, %d rows)", o, seen[o], n, len(seen))
		}
	}
	if int64(len(seen)) != n {
		t.Fatalf("the table holds %d offsets, want %d", len(seen), n)
	}
}

// TestIcebergSchemaEvolution: a column added to the definition between
// two runs is added to the table; the rows of the first run read it as
// null, those of the second have it.
func TestIcebergSchemaEvolution(t *testing.T) {
	h := newIceHarness(t)
	const topic = "evolve"
	s := h.open(t, "evolve", []columnSpec{{Name: "n", Type: "int64"}})
	feed(t, s, iceRecords(topic, 0, 50), 25)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d, _ := durableOf(s, topic); d != 50 {
		t.Fatalf("Durable after Close = %d, want 50 (the last commit)", d)
	}
	s = h.open(t, "evolve", []columnSpec{{Name: "n", Type: "int64"}, {Name: "extra", Type: "string", Optional: true}})
	feed(t, s, iceRecords(topic, 50, 100), 25)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	rows, seen := readTable(t, h.table(t, "evolve"))
	wantOnce(t, seen, 100)
	for o, r := range rows {
		want := any(nil)
		if o >= 50 {
			want = fmt.Sprintf("x%d", o)
		}
		if r[1] != want || r[0] != fmt.Sprint(o) {
			t.Fatalf("offset %d: n %v, extra %v; want n %d, extra %v", o, r[0], r[1], o, want)
		}
	}
}

// TestIcebergResumesFromTheTable: a sink handed records below the table's
// offset (the consumer group behind the table) skips them, and Durable
// reports the table's offset.
func TestIcebergResumesFromTheTable(t *testing.T) {
	h := newIceHarness(t)
	const topic = "ahead"
	cols := []columnSpec{{Name: "n", Type: "int64"}}
	s := h.open(t, "ahead", cols)
	feed(t, s, iceRecords(topic, 0, 100), 30)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s = h.open(t, "ahead", cols)
	feed(t, s, iceRecords(topic, 40, 70), 30)
	if d, ok := durableOf(s, topic); !ok || d != 100 {
		t.Fatalf("Durable = %d, %v; want the table's 100 while records below it arrive", d, ok)
	}
	feed(t, s, iceRecords(topic, 70, 150), 30)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	_, seen := readTable(t, h.table(t, "ahead"))
	wantOnce(t, seen, 150)
}

// TestIcebergOrphans: iceberg-orphans lists a Parquet file under the
// prefix that no snapshot references, and --delete deletes it and nothing
// else.
func TestIcebergOrphans(t *testing.T) {
	h := newIceHarness(t)
	const name = "orph"
	s := h.open(t, name, []columnSpec{{Name: "n", Type: "int64"}})
	feed(t, s, iceRecords("orph", 0, 60), 30)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	orphan := name + "/orph/00000-00000000000000000060-00000000000000000079.parquet"
	if _, err := h.srv.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(h.srv.Bucket), Key: aws.String(orphan), Body: strings.NewReader("PAR1")}); err != nil {
		t.Fatal(err)
	}
	cfg, err := s3sinkconfig.Load(map[string]any{"bucket": h.srv.Bucket, "region": s3test.Region, "endpoint": h.srv.Endpoint,
		"access_key_id": h.srv.AccessKey, "secret_access_key": h.srv.SecretKey, "prefix": name, "output_format": "parquet",
		"columns": []map[string]any{{"name": "n", "type": "int64"}}, "table_format": "iceberg", "iceberg_catalog": "sql",
		"iceberg_catalog_uri": h.dsn, "iceberg_table": "lake." + name}, envPrefix, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	var cmd sdk.AdminCommand
	for _, c := range sdk.AdminCommands(s3sinkconfig.Path) {
		if c.Name == "iceberg-orphans" {
			cmd = c
		}
	}
	if cmd.Run == nil {
		t.Fatal("iceberg-orphans is not registered")
	}
	run := func(args ...string) string {
		var out bytes.Buffer
		if err := cmd.Run(ctx, sdk.AdminRequest{Key: name, Config: cfg, Args: args, Out: &out}); err != nil {
			t.Fatalf("iceberg-orphans %v: %v", args, err)
		}
		return out.String()
	}
	if out := run(); !strings.Contains(out, "0 file(s)") {
		t.Fatalf("with the default --min-age of 1h a new file is no orphan yet:\n%s", out)
	}
	out := run("--min-age", "0s")
	if !strings.Contains(out, "s3://"+h.srv.Bucket+"/"+orphan+"\n") || !strings.Contains(out, "1 file(s)") {
		t.Fatalf("iceberg-orphans --min-age 0s:\n%s\nwant %s alone", out, orphan)
	}
	if out := run("--delete", "--min-age", "0s"); !strings.Contains(out, "deleted 1 file(s)") {
		t.Fatalf("--delete:\n%s", out)
	}
	if _, err := h.srv.Client.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(h.srv.Bucket), Key: aws.String(orphan)}); err == nil {
		t.Fatalf("%s is still there after --delete", orphan)
	}
	_, seen := readTable(t, h.table(t, name))
	wantOnce(t, seen, 60)
}

// TestIcebergTwoWriters: two sinks write one partition into one table, as
// a runtime that lost it without a rebalance and its next owner do. The
// second to commit finds the table's offset moved: when it lies at the
// end of one of its files (the same records, cut alike) it goes on from
// there, its files below it left out; inside one of its files it is
// fenced and commits nothing more. Either way every committed offset is
// in the table once.
func TestIcebergTwoWriters(t *testing.T) {
	h := newIceHarness(t)
	cols := []columnSpec{{Name: "n", Type: "int64"}}
	for _, c := range []struct {
		name     string
		first    int64 // the first writer's records, 0 to first-1
		want     int64 // the table's offset at the end
		fenced   bool
		durableB int64
	}{
		{"adopted", 60, 100, false, 100}, // B's files end at 19, 39, 59: 60 is a boundary
		{"fenced", 50, 50, true, 0},      // 50 is inside B's file 40-59
	} {
		t.Run(c.name, func(t *testing.T) {
			name := "two" + c.name
			b := h.open(t, name, cols) // starts first: reads the table empty
			feed(t, b, iceRecords(name, 0, 1), 1)
			a := h.open(t, name, cols)
			feed(t, a, iceRecords(name, 0, c.first), 25)
			if err := a.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			feed(t, b, iceRecords(name, 1, 100), 25)
			if err := b.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d, _ := durableOf(b, name); d != c.durableB {
				t.Errorf("the second writer's Durable = %d, want %d", d, c.durableB)
			}
			b.mu.Lock()
			fenced := b.parts[bufferKey{name, 0}].ice.fenced
			b.mu.Unlock()
			if fenced != c.fenced {
				t.Errorf("fenced = %v, want %v", fenced, c.fenced)
			}
			_, seen := readTable(t, h.table(t, name))
			wantOnce(t, seen, c.want)
		})
	}
}

// TestIcebergAvroColumns: without columns, an Avro topic's fields become
// the table's columns (metadata first), with their types; a record field
// is refused with its name.
func TestIcebergAvroColumns(t *testing.T) {
	h := newIceHarness(t)
	const schema = `{"type":"record","name":"r","fields":[{"name":"n","type":"long"},{"name":"s","type":["null","string"]},{"name":"d","type":"double"}]}`
	ice := func(name string) func(*options) {
		return func(o *options) {
			o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: h.dsn, Table: "lake." + name, CommitInterval: time.Hour}
		}
	}
	s := openAvro(t, h.srv, "avroice", schema, ice("avroice"))
	var vals []map[string]any
	for i := range 30 {
		vals = append(vals, map[string]any{"n": int64(i), "s": map[string]any{"string": fmt.Sprint("v", i)}, "d": float64(i) / 2})
	}
	feed(t, s, avroRecords(t, schema, vals), 10)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got, rows := tableShape(t, h.table(t, "avroice"))
	if want := "offset:int64 timestamp:timestamp[us, tz=UTC] topic:utf8 partition:int32 key:binary n:int64 s:utf8 d:float64"; got != want || rows != 30 {
		t.Fatalf("table columns %s with %d rows, want %s with 30", got, rows, want)
	}
	o := defaultOptions()
	o.Format = formatParquet
	nested := `{"type":"record","name":"r","fields":[{"name":"in","type":{"type":"record","name":"i","fields":[{"name":"x","type":"int"}]}}]}`
	bad := newSink(o, sinkEnv("avro", sdk.DiscardMetrics))
	if err := bad.SetTopics([]sdk.TopicSchema{{Topic: "t", Schema: sdk.SchemaAvro, AvroSchema: nested}}); err != nil {
		t.Fatal(err)
	}
	if _, err := bad.tableColumns(); err == nil || !strings.Contains(err.Error(), "field in is a record, an array or a map") {
		t.Fatalf("a record field: %v", err)
	}
}
