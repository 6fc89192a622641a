package s3sink

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	pqfile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// The parquet files are read back with apache/arrow-go's reader, not the
// writer's own library.

// pqTable is one parquet object read back: its schema, codecs, row groups
// and its rows as text (arrow's ValueStr; "<null>" for a null).
type pqTable struct {
	key       string
	size      int
	columns   []string
	logical   []string // logical type of each column
	physical  []string
	codecs    map[string]bool
	rowGroups int
	rows      [][]string
}

func readParquet(t *testing.T, key string, body []byte) pqTable {
	t.Helper()
	r, err := pqfile.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	defer r.Close()
	out := pqTable{key: key, size: len(body), codecs: map[string]bool{}, rowGroups: r.NumRowGroups()}
	sc := r.MetaData().Schema
	for i := 0; i < sc.NumColumns(); i++ {
		c := sc.Column(i)
		out.columns = append(out.columns, c.Name())
		out.logical = append(out.logical, c.LogicalType().String())
		out.physical = append(out.physical, c.PhysicalType().String())
	}
	for g := 0; g < r.NumRowGroups(); g++ {
		md := r.MetaData().RowGroup(g)
		for i := 0; i < sc.NumColumns(); i++ {
			cc, err := md.ColumnChunk(i)
			if err != nil {
				t.Fatal(err)
			}
			out.codecs[strings.ToLower(cc.Compression().String())] = true
		}
	}
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	defer tbl.Release()
	n := int(tbl.NumRows())
	out.rows = make([][]string, n)
	for c := 0; c < int(tbl.NumCols()); c++ {
		row := 0
		for _, arr := range tbl.Column(c).Data().Chunks() {
			for i := 0; i < arr.Len(); i++ {
				v := "<null>"
				if !arr.IsNull(i) {
					v = valueStr(arr, i)
				}
				out.rows[row] = append(out.rows[row], v)
				row++
			}
		}
	}
	return out
}

// valueStr is arrow's text of a value; binary values as text when they
// are printable UTF-8 (arrow reads JSON columns as binary), else in hex.
func valueStr(arr arrow.Array, i int) string {
	if b, ok := arr.(interface{ Value(int) []byte }); ok && arr.DataType().ID() == arrow.BINARY {
		v := b.Value(i)
		if utf8.Valid(v) && !bytes.ContainsFunc(v, func(r rune) bool { return r < ' ' }) {
			return string(v)
		}
		return fmt.Sprintf("%x", v)
	}
	return arr.ValueStr(i)
}

// pad returns n bytes of text that compresses little.
func pad(i, n int) string {
	var b strings.Builder
	for j := 0; b.Len() < n; j++ {
		sum := sha256.Sum256([]byte(fmt.Sprint(i, j)))
		b.WriteString(hex.EncodeToString(sum[:]))
	}
	return b.String()[:n]
}

// parquetObjects reads back every object under prefix, in key order.
func parquetObjects(t *testing.T, srv *s3test.Server, prefix string) []pqTable {
	t.Helper()
	objs, err := srv.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []pqTable
	for _, o := range objs {
		if !strings.HasSuffix(o.Key, ".parquet") {
			t.Fatalf("%s does not end in .parquet", o.Key)
		}
		out = append(out, readParquet(t, strings.TrimPrefix(o.Key, prefix), srv.MustGet(t, o.Key)))
	}
	return out
}

// allColumns is one column of every type, nested paths, optional columns.
var allColumns = []columnSpec{
	{Name: "id", Type: "int64"},
	{Name: "name", Type: "string", Path: "customer.name"},
	{Name: "city", Type: "string", Path: "customer.address.city", Optional: true},
	{Name: "score", Type: "double"},
	{Name: "vip", Type: "boolean", Optional: true},
	{Name: "at_ms", Type: "timestamp_ms"},
	{Name: "at_us", Type: "timestamp_us", Optional: true},
	{Name: "day", Type: "date"},
	{Name: "price", Type: "decimal", Precision: 9, Scale: 2},
	{Name: "total", Type: "decimal", Precision: 18, Scale: 4, Optional: true},
	{Name: "big", Type: "decimal", Precision: 38, Scale: 3, Optional: true},
	{Name: "blob", Type: "bytes", Optional: true},
	{Name: "extra", Type: "json", Optional: true},
}

func parquetOpts(cols []columnSpec, codec string) func(*options) {
	return func(o *options) {
		o.Format, o.Columns, o.ParquetCodec = formatParquet, cols, codec
	}
}

func TestParquetEveryColumnType(t *testing.T) {
	srv := s3test.Start(t)
	s := openAt(t, srv, srv.Endpoint, "types", func(o *options) {
		parquetOpts(allColumns, "snappy")(o)
		o.IncludeHeaders = true
	})
	recs := records("t", 0, 3)
	recs[0].Payload = []byte(`{"id": 1, "customer": {"name": "Ada \"A\" L\u00f6", "address": {"city": "Paris", "zip": "75001"}},
		"score": 2.5, "vip": true, "at_ms": "2026-09-03T21:15:04.118Z", "at_us": 1788470104118123, "day": "2026-09-03",
		"price": 12.34, "total": "-99999999999999.9999", "big": "12345678901234567890123456789012345.678",
		"blob": "AAEC/w==", "extra": {"a": [1, 2, {"b": null}]}, "ignored": [1, {"x": "y"}]}`)
	recs[0].Headers = []sdk.Header{{Key: "h", Value: []byte("v1")}, {Key: "h", Value: []byte("v2")}}
	// Optional columns null or missing; integers for times and dates.
	recs[1].Payload = []byte(`{"customer": {"name": "Bob"}, "id": -2, "score": -1e3, "vip": null,
		"at_ms": 1788470104118, "day": 20699, "price": "-0.5", "big": -1.5}`)
	recs[1].Key = nil
	recs[2].Payload = []byte(`{"id": 3, "customer": {"name": ""}, "score": 0, "at_ms": "2026-09-03T23:15:04+02:00", "day": 0, "price": 0}`)
	if err := s.Consume(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tabs := parquetObjects(t, srv, "types/")
	if len(tabs) != 1 || tabs[0].key != "t/00000-00000000000000000000-00000000000000000002.parquet" {
		t.Fatalf("objects %+v", tabs)
	}
	tb := tabs[0]
	wantCols := "offset timestamp topic partition key headers id name city score vip at_ms at_us day price total big blob extra"
	if got := strings.Join(tb.columns, " "); got != wantCols {
		t.Fatalf("columns %s\nwant    %s", got, wantCols)
	}
	types := make([]string, len(tb.columns))
	for i := range types {
		types[i] = tb.physical[i] + "/" + tb.logical[i]
	}
	t.Logf("types: %s", strings.Join(types, ", "))
	for i, want := range map[int]string{
		0: "INT64", 1: "Timestamp(isAdjustedToUTC=true, timeUnit=milliseconds", 2: "String", 3: "Int(bitWidth=32, isSigned=true)",
		5: "JSON", 8: "String", 11: "timeUnit=milliseconds", 12: "timeUnit=microseconds", 13: "Date",
		14: "INT32/Decimal(precision=9, scale=2)", 15: "INT64/Decimal(precision=18, scale=4)",
		16: "FIXED_LEN_BYTE_ARRAY/Decimal(precision=38, scale=3)", 17: "BYTE_ARRAY", 18: "JSON",
	} {
		if !strings.Contains(types[i], want) {
			t.Errorf("column %s is %s, want %s", tb.columns[i], types[i], want)
		}
	}
	want := [][]string{
		{"0", "", "t", "0", "k0", `{"h":["v1","v2"]}`, "1", `Ada "A" Lö`, "Paris", "2.5", "true",
			"", "", "2026-09-03", "12.34", "-99999999999999.9999", "12345678901234567890123456789012345.678", "000102ff", `{"a":[1,2,{"b":null}]}`},
		{"1", "", "t", "0", "<null>", "<null>", "-2", "Bob", "<null>", "-1000", "<null>",
			"", "<null>", "2026-09-03", "-0.5", "<null>", "-1.5", "<null>", "<null>"},
		{"2", "", "t", "0", "k2", "<null>", "3", "", "<null>", "0", "<null>",
			"", "<null>", "1970-01-01", "0", "<null>", "<null>", "<null>", "<null>"},
	}
	if len(tb.rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(tb.rows), len(want))
	}
	for r := range want {
		for c := range want[r] {
			if want[r][c] == "" && (c == 1 || c == 11 || c == 12) {
				continue // times, checked below
			}
			if tb.rows[r][c] != want[r][c] {
				t.Errorf("row %d column %s = %q, want %q", r, tb.columns[c], tb.rows[r][c], want[r][c])
			}
		}
	}
	at := time.Date(2026, 9, 3, 21, 15, 4, 118_000_000, time.UTC)
	for r, wantTimes := range [][3]time.Time{
		{stamp(0).Truncate(time.Millisecond), at, at.Add(123 * time.Microsecond)},
		{stamp(1).Truncate(time.Millisecond), at, {}},
		{stamp(2).Truncate(time.Millisecond), at.Truncate(time.Second), {}},
	} {
		for i, c := range []int{1, 11, 12} {
			got := tb.rows[r][c]
			if wantTimes[i].IsZero() {
				if got != "<null>" {
					t.Errorf("row %d column %s = %q, want null", r, tb.columns[c], got)
				}
				continue
			}
			if g, err := time.Parse(time.RFC3339Nano, got); err != nil || !g.Equal(wantTimes[i]) {
				t.Errorf("row %d column %s = %q, want %s", r, tb.columns[c], got, wantTimes[i].Format(time.RFC3339Nano))
			}
		}
	}
}

func TestParquetCompression(t *testing.T) {
	srv := s3test.Start(t)
	cols := []columnSpec{{Name: "n", Type: "int64"}, {Name: "pad", Type: "string"}}
	recs := records("t", 0, 500)
	for i := range recs {
		recs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("ab", 100)))
	}
	sizes := map[string]int{}
	for _, codec := range []string{"none", "snappy", "gzip", "zstd"} {
		s := openAt(t, srv, srv.Endpoint, codec, parquetOpts(cols, codec))
		feed(t, s, recs, 100)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		tabs := parquetObjects(t, srv, codec+"/")
		if len(tabs) != 1 {
			t.Fatalf("%s: %d objects", codec, len(tabs))
		}
		tb := tabs[0]
		wantCodec := map[string]string{"none": "uncompressed", "snappy": "snappy", "gzip": "gzip", "zstd": "zstd"}[codec]
		if len(tb.codecs) != 1 || !tb.codecs[wantCodec] {
			t.Errorf("%s: column chunks compressed with %v", codec, tb.codecs)
		}
		if len(tb.rows) != len(recs) {
			t.Fatalf("%s: %d rows", codec, len(tb.rows))
		}
		for i, r := range tb.rows {
			if r[0] != fmt.Sprint(i) || r[5] != fmt.Sprint(i) || r[6] != strings.Repeat("ab", 100) {
				t.Fatalf("%s: row %d = %v", codec, i, r)
			}
		}
		sizes[codec] = tb.size
		obj := srv.MustGet(t, codec+"/"+tb.key)
		if !bytes.HasPrefix(obj, []byte("PAR1")) {
			t.Fatalf("%s: stored bytes are not a bare parquet file", codec)
		}
	}
	t.Logf("file sizes: %v", sizes)
	for _, c := range []string{"snappy", "gzip", "zstd"} {
		if sizes[c] >= sizes["none"] {
			t.Errorf("%s (%d bytes) is not smaller than none (%d)", c, sizes[c], sizes["none"])
		}
	}
}

// TestParquetRejects: records that do not fit are returned in a
// *sdk.Rejected, the others are written, Durable passes over the
// rejected ones, and a redelivery rejects them again (so a batch that
// failed for want of a dead-letter topic never drops them silently).
func TestParquetRejects(t *testing.T) {
	srv := s3test.Start(t)
	cols := []columnSpec{{Name: "id", Type: "int64"}, {Name: "amount", Type: "decimal", Precision: 6, Scale: 2, Path: "order.amount"},
		{Name: "note", Type: "string", Optional: true}}
	s := openAt(t, srv, srv.Endpoint, "rej", parquetOpts(cols, "zstd"))
	recs := records("t", 0, 8)
	payloads := []string{
		`{"id": 0, "order": {"amount": 1.5}}`,
		`{"order": {"amount": 1}}`,                     // missing required
		`{"id": "two", "order": {"amount": 1}}`,        // wrong type
		`{"id": 3, "order": {"amount": 1.234}}`,        // too many decimals
		`{"id": 4, "order": {"amount": 12345.6}}`,      // too many digits
		`{"id": 5, "order": {"amount": 1}, "note": 7}`, // wrong type, optional column
		`not json`, // not JSON
		`{"id": 7, "order": {"amount": "9999.99"}, "note": null}`,
	}
	for i, p := range payloads {
		recs[i].Payload = []byte(p)
	}
	wantErr := map[int64]string{
		1: "column id (int64): payload field id is missing and the column is not optional",
		2: `column id (int64): payload field id = "two": not an integer`,
		3: "column amount (decimal(6,2)): payload field order.amount = 1.234: more than 2 digits after the point",
		4: "column amount (decimal(6,2)): payload field order.amount = 12345.6: more than 6 digits (precision 6, scale 2)",
		5: "column note (string): payload field note = 7: not a string",
		6: "the payload is not a JSON object",
	}
	checkRejected(t, s.Consume(context.Background(), recs), wantErr)
	// The runtime redelivers the batch when no dead-letter topic takes
	// them: they are rejected again, the others skipped.
	checkRejected(t, s.Consume(context.Background(), recs), wantErr)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d, _ := durableOf(s, "t"); d != 8 {
		t.Fatalf("durable = %d, want 8", d)
	}
	tabs := parquetObjects(t, srv, "rej/")
	if len(tabs) != 1 || tabs[0].key != "t/00000-00000000000000000000-00000000000000000007.parquet" {
		t.Fatalf("objects %v", tabs)
	}
	var got []string
	for _, r := range tabs[0].rows {
		got = append(got, strings.Join(r[5:], " "))
	}
	if strings.Join(got, ",") != "0 1.5 <null>,7 9999.99 <null>" {
		t.Fatalf("rows %q", got)
	}
}

// checkRejected checks that err is a *sdk.Rejected of exactly the offsets
// of want, each with its error.
func checkRejected(t *testing.T, err error, want map[int64]string) {
	t.Helper()
	var rej *sdk.Rejected
	if !errors.As(err, &rej) {
		t.Fatalf("Consume = %v, want *sdk.Rejected", err)
	}
	if len(rej.Records) != len(want) {
		t.Fatalf("%d rejected, want %d: %v", len(rej.Records), len(want), err)
	}
	for _, r := range rej.Records {
		if w := want[r.Record.Offset]; r.Err == nil || r.Err.Error() != w {
			t.Errorf("offset %d rejected with %v, want %s", r.Record.Offset, r.Err, w)
		}
	}
}

// TestParquetRotation: files close once their rows' raw (serialized) size
// reaches max_file_size, encoded smaller, with row groups of
// parquet_row_group_size; the sink's held bytes stay within
// max_buffer_size.
func TestParquetRotation(t *testing.T) {
	srv := s3test.Start(t)
	cols := []columnSpec{{Name: "n", Type: "int64"}, {Name: "pad", Type: "string"}}
	const n = 3000
	recs := records("t", 0, n)
	for i := range recs {
		recs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad(i, 60+i%50)))
	}
	const maxFile = 64 << 10
	s := openAt(t, srv, srv.Endpoint, "rot", func(o *options) {
		parquetOpts(cols, "zstd")(o)
		o.MaxFileSize = maxFile
		o.MaxBufferSize = 1 << 20
		o.RowGroupSize = maxFile / 4
	})
	// The serialized size of each record's row, as the sink counts it.
	raw := make([]int, n)
	for i := range recs {
		if _, err := s.pq.row(&s.row, &recs[i]); err != nil {
			t.Fatal(err)
		}
		raw[i] = len(appendRow(nil, s.row.row))
	}
	feed(t, s, recs, 250)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.peakHeld > s.opts.MaxBufferSize {
		t.Errorf("held %d bytes at the peak, over max_buffer_size %d", s.peakHeld, s.opts.MaxBufferSize)
	}
	tabs := parquetObjects(t, srv, "rot/")
	if len(tabs) < 3 {
		t.Fatalf("%d objects, want several", len(tabs))
	}
	next := 0
	for i, tb := range tabs {
		// A file is cut at the record that takes its rows (and the marks
		// of its row groups, a byte each) to max_file_size.
		size := tb.rowGroups - 1
		for j := range tb.rows {
			size += raw[next+j]
		}
		if last := raw[next+len(tb.rows)-1]; i < len(tabs)-1 && (size < maxFile || size-last >= maxFile) {
			t.Errorf("%s: rows of %d raw bytes, want the first to reach max_file_size (%d)", tb.key, size, maxFile)
		}
		if tb.size >= maxFile {
			t.Errorf("%s: %d bytes encoded, not below its %d raw bytes", tb.key, tb.size, size)
		}
		if i < len(tabs)-1 && tb.rowGroups < 4 {
			t.Errorf("%s: %d row group(s), want 4 of parquet_row_group_size (max_file_size / 4)", tb.key, tb.rowGroups)
		}
		for _, r := range tb.rows {
			if r[0] != fmt.Sprint(next) || r[5] != fmt.Sprint(next) {
				t.Fatalf("%s: row %v, want offset %d", tb.key, r[:6], next)
			}
			next++
		}
		t.Logf("%s: %d bytes from %d raw, %d row groups, %d rows", tb.key, tb.size, size, tb.rowGroups, len(tb.rows))
	}
	if next != n {
		t.Fatalf("%d rows, want %d", next, n)
	}
}

// TestParquetReplay crashes a parquet sink and resumes from a durable
// offset: the bucket ends with the same keys and the same bytes as a run
// without a crash, rejected records included.
func TestParquetReplay(t *testing.T) {
	srv := s3test.Start(t)
	cols := []columnSpec{{Name: "n", Type: "int64"}, {Name: "pad", Type: "string"}, {Name: "when", Type: "timestamp_us", Path: "at", Optional: true}}
	const n = 1200
	recs := records("t", 0, n)
	for i := range recs {
		if i%97 == 5 {
			recs[i].Payload = []byte(`{"pad": "no n"}`)
			continue
		}
		recs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":"%s","at":%d}`, i, pad(i, i%61), int64(i)*1000003))
	}
	mod := func(o *options) {
		parquetOpts(cols, "zstd")(o)
		o.MaxFileSize = 6 << 10
	}
	run := func(s *Sink, from, to int) {
		for i := from; i < to; i += 50 {
			err := s.Consume(context.Background(), recs[i:min(i+50, to)])
			var rej *sdk.Rejected
			if err != nil && !errors.As(err, &rej) {
				t.Fatal(err)
			}
		}
	}
	ref := openAt(t, srv, srv.Endpoint, "ref", mod)
	run(ref, 0, n)
	if err := ref.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want, _ := srv.List(context.Background(), "ref/")
	if len(want) < 4 {
		t.Fatalf("%d objects, want several", len(want))
	}
	for ci, crashAt := range []int{130, 700} {
		prefix := fmt.Sprintf("crash%d", ci)
		s := openAt(t, srv, srv.Endpoint, prefix, mod)
		run(s, 0, crashAt)
		if ci == 0 {
			s.settle()
		}
		from, _ := durableOf(s, "t")
		s.crash()
		s = openAt(t, srv, srv.Endpoint, prefix, mod)
		run(s, int(from), n)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		got, _ := srv.List(context.Background(), prefix+"/")
		if len(got) != len(want) {
			t.Fatalf("crash at %d: %d objects, want %d", crashAt, len(got), len(want))
		}
		for i := range want {
			k := strings.TrimPrefix(want[i].Key, "ref/")
			if strings.TrimPrefix(got[i].Key, prefix+"/") != k {
				t.Fatalf("crash at %d: key %s, want %s", crashAt, got[i].Key, k)
			}
			if !bytes.Equal(srv.MustGet(t, got[i].Key), srv.MustGet(t, want[i].Key)) {
				t.Fatalf("crash at %d: %s differs from the run without a crash", crashAt, k)
			}
		}
	}
	rows := 0
	for _, tb := range parquetObjects(t, srv, "ref/") {
		rows += len(tb.rows)
	}
	if wantRows := n - (n-5+96)/97; rows != wantRows {
		t.Fatalf("%d rows, want %d", rows, wantRows)
	}
}

// TestParquetConfigRules: the generated validation refuses an unknown
// column type and a duplicate column name with the column's index, a
// decimal without precision, parquet without columns, and file
// compression on top of parquet's own.
func TestParquetConfigRules(t *testing.T) {
	cols := func(c ...map[string]any) []any {
		out := make([]any, len(c))
		for i := range c {
			out[i] = c[i]
		}
		return out
	}
	for _, c := range []struct {
		name string
		mod  func(map[string]any)
		want string
	}{
		{"unknown type", func(m map[string]any) {
			m["columns"] = cols(map[string]any{"name": "a", "type": "int64"}, map[string]any{"name": "b", "type": "varchar"})
		}, "columns[1].type: 'varchar' is not a column type; use string, int64"},
		{"duplicate name", func(m map[string]any) {
			m["columns"] = cols(map[string]any{"name": "a", "type": "int64"}, map[string]any{"name": "b", "type": "string"}, map[string]any{"name": "a", "type": "double"})
		}, "columns[2].name: column name a is used twice"},
		{"decimal without precision", func(m map[string]any) {
			m["columns"] = cols(map[string]any{"name": "a", "type": "decimal"})
		}, "columns[0].precision is required for a decimal column"},
		{"file compression", func(m map[string]any) {
			m["columns"] = cols(map[string]any{"name": "a", "type": "int64"})
			m["compression"] = "gzip"
		}, "output_format 'parquet' compresses inside the file: remove compression"},
	} {
		m := map[string]any{"bucket": "picomq-archive", "region": "eu-west-1", "output_format": "parquet"}
		c.mod(m)
		_, err := s3sinkconfig.Load(m, envPrefix, noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// What the schema cannot say is checked at Open, by index too.
	for _, c := range []struct {
		cols []columnSpec
		meta bool
		want string
	}{
		{[]columnSpec{{Name: "offset", Type: "int64"}}, true, "columns[0].name: offset is already used by a metadata column"},
		{[]columnSpec{{Name: "a", Type: "decimal", Precision: 4, Scale: 5}}, false, "columns[0].scale (5) must be 0 to precision (4)"},
		{[]columnSpec{{Name: "a", Type: "string", Path: "x"}, {Name: "b", Type: "string", Path: "x.y"}}, false, "columns[1].path 'x.y' is inside the path of column a"},
		{[]columnSpec{{Name: "a", Type: "string", Path: "x..y"}}, false, "columns[0].path 'x..y' has an empty segment"},
	} {
		o := defaultOptions()
		o.Bucket, o.Region, o.Format, o.Columns, o.IncludeMetadata = "picomq-archive", "eu-west-1", formatParquet, c.cols, c.meta
		if err := o.validate(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.cols, err, c.want)
		}
	}
}

// BenchmarkParquetEncode converts 1 KiB JSON records into rows and
// encodes the files they fill with zstd pages, as the sink's Consume and
// upload workers do, without S3.
func BenchmarkParquetEncode(b *testing.B) {
	recs := benchRecords(benchN, 1024)
	o := defaultOptions()
	o.Format, o.ParquetCodec = formatParquet, "zstd"
	o.Columns = []columnSpec{{Name: "id", Type: "int64"}, {Name: "customer", Type: "string"}, {Name: "total", Type: "double"},
		{Name: "currency", Type: "string"}, {Name: "items", Type: "json"}, {Name: "note", Type: "string"}}
	s := newSink(o, sinkEnv("test", sdk.DiscardMetrics))
	p := &partitionState{bufferKey: bufferKey{"orders.eu", 0}}
	b.SetBytes(1024)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		rec := &recs[i%benchN]
		if _, err := s.pq.row(&s.row, rec); err != nil {
			b.Fatal(err)
		}
		s.mu.Lock()
		if err := s.append(p, rec); err != nil {
			b.Fatal(err)
		}
		var f *closedFile
		if p.open.full(&s.opts) {
			s.closeFile(p)
			f = p.pending[0]
		}
		s.mu.Unlock()
		if f != nil {
			if err := s.encodeParquet(f); err != nil {
				b.Fatal(err)
			}
			s.mu.Lock()
			s.finish(f)
			s.mu.Unlock()
		}
	}
}

// FuzzParquetRow: any payload converts or is refused with an error, never
// a panic; one that converts is valid JSON when the columns are json.
func FuzzParquetRow(f *testing.F) {
	for _, s := range []string{`{"a": {"b": 1}, "c": "x"}`, `{"a": "\"\\"}`, `{"c": [1, {"a": 2}]}`, `{`, `{"a"`, `{"a": }`, `[]`, `{"a": {"b": {"c": 1}}}`} {
		f.Add([]byte(s))
	}
	o := defaultOptions()
	o.Format, o.IncludeMetadata = formatParquet, false
	o.Columns = []columnSpec{{Name: "b", Type: "json", Path: "a.b", Optional: true}, {Name: "c", Type: "json", Optional: true}}
	l, err := newPQLayout(&o)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var r pqRow
		rec := sdk.Record{Topic: "t", Payload: payload, Schema: sdk.SchemaRaw}
		if _, err := l.row(&r, &rec); err != nil {
			return
		}
		for i, raw := range r.raw {
			if raw != nil && !json.Valid(raw) {
				t.Fatalf("column %d took %q from %q", i, raw, payload)
			}
		}
	})
}

// TestParquetMemoryBound: 16 partitions of 1 KiB records under a 1 MiB
// max_buffer_size, with slow uploads. The row groups, the writers and the
// encoded files together stay within the bound (the largest open file is
// uploaded early), and every record is in the bucket once, in order.
func TestParquetMemoryBound(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	proxy.SetLatency(5 * time.Millisecond)
	const bound = 1 << 20
	s := openAt(t, srv, proxy.URL, "m", func(o *options) {
		parquetOpts([]columnSpec{{Name: "id", Type: "int64"}, {Name: "customer", Type: "string"}, {Name: "note", Type: "string"}}, "zstd")(o)
		o.MaxFileSize = 256 << 10
		o.MaxBufferSize = bound
		o.MaxInFlight = 2
	})
	base := benchRecords(1, 1000)[0]
	const parts, per = 16, 600
	consumeWithinBound(t, s, bound, parts, per, func(p int32, j int) sdk.Record {
		r := base
		r.Topic, r.Partition, r.Offset = "m", p, int64(j)
		r.Payload = []byte(fmt.Sprintf(`{"id":%d,"customer":"c%d","note":"%s"}`, j, p, pad(j*int(p+1), 900)))
		return r
	})
	next := map[string]int{}
	for _, tb := range parquetObjects(t, srv, "m/") {
		part := tb.key[strings.LastIndexByte(tb.key, '/')+1:][:5]
		for _, r := range tb.rows {
			if r[0] != fmt.Sprint(next[part]) {
				t.Fatalf("%s: offset %s after %d", tb.key, r[0], next[part]-1)
			}
			next[part]++
		}
	}
	if len(next) != parts {
		t.Fatalf("%d partitions in the bucket", len(next))
	}
	for part, n := range next {
		if n != per {
			t.Fatalf("partition %s: %d records", part, n)
		}
	}
}
