package s3sink

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	pqfile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/metadata"

	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// TestParquetRowGroupStatistics writes 3000 rows with
// parquet_row_group_size at its minimum (64 KiB) and reads the files back
// with arrow-go: several row groups per file, none much over the size
// (encoded before compression), and per row group and column the min, max
// and null count of its values, which the test works out from the rows.
func TestParquetRowGroupStatistics(t *testing.T) {
	srv := s3test.Start(t)
	cols := []columnSpec{{Name: "n", Type: "int64"}, {Name: "name", Type: "string"}, {Name: "opt", Type: "int64", Optional: true}}
	const n, groupSize = 3000, 64 << 10
	recs := records("t", 0, n)
	for i := range recs {
		opt := "null"
		if i%3 != 0 {
			opt = strconv.Itoa((i * 7919) % 10007)
		}
		recs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"name":"%s","opt":%s}`, (i*104729)%100003-50000, pad(i, 60+i%50), opt))
	}
	s := openAt(t, srv, srv.Endpoint, "rg", func(o *options) {
		parquetOpts(cols, "zstd")(o)
		o.MaxFileSize, o.RowGroupSize = 4<<20, groupSize
	})
	feed(t, s, recs, 250)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs, err := srv.List(context.Background(), "rg/")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 1 {
		t.Fatalf("%d objects, want 1", len(objs))
	}
	r, err := pqfile.NewParquetReader(bytes.NewReader(srv.MustGet(t, objs[0].Key)))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	tab := readParquet(t, objs[0].Key, srv.MustGet(t, objs[0].Key))
	if r.NumRowGroups() < 4 {
		t.Fatalf("%d row groups for %d rows of about 120 B in row groups of %d B", r.NumRowGroups(), n, groupSize)
	}
	// The payload columns follow the five metadata columns.
	first := 0
	for g := 0; g < r.NumRowGroups(); g++ {
		md := r.MetaData().RowGroup(g)
		rows := tab.rows[first : first+int(md.NumRows())]
		first += int(md.NumRows())
		if size := md.TotalByteSize(); g < r.NumRowGroups()-1 && size > groupSize*3/2 {
			t.Errorf("row group %d: %d bytes before compression, parquet_row_group_size is %d", g, size, groupSize)
		}
		for c := 0; c < md.NumColumns(); c++ {
			cc, _ := md.ColumnChunk(c)
			st, err := cc.Statistics()
			if err != nil || st == nil || !st.HasMinMax() {
				t.Fatalf("row group %d, column %s: no min/max statistics (%v)", g, tab.columns[c], err)
			}
			var lo, hi string
			var nulls int64
			wantInt := tab.physical[c] == "INT64" || tab.physical[c] == "INT32"
			for _, row := range rows {
				v := row[c]
				if v == "<null>" {
					nulls++
					continue
				}
				if lo == "" || less(v, lo, wantInt) {
					lo = v
				}
				if hi == "" || less(hi, v, wantInt) {
					hi = v
				}
			}
			var gotLo, gotHi string
			switch st := st.(type) {
			case *metadata.Int64Statistics:
				gotLo, gotHi = strconv.FormatInt(st.Min(), 10), strconv.FormatInt(st.Max(), 10)
			case *metadata.Int32Statistics:
				gotLo, gotHi = strconv.FormatInt(int64(st.Min()), 10), strconv.FormatInt(int64(st.Max()), 10)
			case *metadata.ByteArrayStatistics:
				gotLo, gotHi = string(st.Min()), string(st.Max())
			default:
				t.Fatalf("column %s: statistics %T", tab.columns[c], st)
			}
			if tab.columns[c] == "timestamp" {
				continue // min/max as integers; the rows hold arrow's text of them
			}
			if gotLo != lo || gotHi != hi || st.NullCount() != nulls {
				t.Errorf("row group %d, column %s: statistics min %s max %s nulls %d, rows min %s max %s nulls %d",
					g, tab.columns[c], clip([]byte(gotLo)), clip([]byte(gotHi)), st.NullCount(), clip([]byte(lo)), clip([]byte(hi)), nulls)
			}
			if g == 0 {
				t.Logf("row group 0 of %d (%d rows, %d B): %s min %s max %s nulls %d", r.NumRowGroups(), md.NumRows(), md.TotalByteSize(),
					tab.columns[c], clip([]byte(gotLo)), clip([]byte(gotHi)), st.NullCount())
			}
		}
	}
	if first != n {
		t.Fatalf("%d rows, want %d", first, n)
	}
}

// less orders two values as integers or as bytes.
func less(a, b string, asInt bool) bool {
	if asInt {
		x, _ := strconv.ParseInt(a, 10, 64)
		y, _ := strconv.ParseInt(b, 10, 64)
		return x < y
	}
	return a < b
}

// ParquetRows reads a parquet object back with arrow-go (readParquet): its
// rows, each value as text. For the black-box tests, which are package
// s3sink_test.
func ParquetRows(t *testing.T, key string, body []byte) [][]string {
	return readParquet(t, key, body).rows
}

// TestParquetSmallBuffer: max_buffer_size (1 MiB) below max_file_size (the
// default 8 MiB) and max_in_flight encodings of it: the encodings take at
// most half the bound and wait for each other beyond it, so the open files
// keep the other half and are cut early at hundreds of records each, not
// one; every record lands once, in order, within the bound.
func TestParquetSmallBuffer(t *testing.T) {
	srv := s3test.Start(t)
	const bound = 1 << 20
	s := openAt(t, srv, srv.Endpoint, "small", func(o *options) {
		parquetOpts([]columnSpec{{Name: "id", Type: "int64"}, {Name: "note", Type: "string"}}, "zstd")(o)
		o.MaxBufferSize = bound
	})
	if s.opts.MaxFileSize <= bound || s.opts.MaxInFlight < 2 {
		t.Fatalf("max_file_size %d, max_in_flight %d: the test needs the defaults", s.opts.MaxFileSize, s.opts.MaxInFlight)
	}
	base := benchRecords(1, 1000)[0]
	const parts, per = 2, 1500
	consumeWithinBound(t, s, bound, parts, per, func(p int32, j int) sdk.Record {
		r := base
		r.Topic, r.Partition, r.Offset = "small", p, int64(j)
		r.Payload = []byte(fmt.Sprintf(`{"id":%d,"note":"%s"}`, j, pad(j*int(p+1), 1000)))
		return r
	})
	tabs := parquetObjects(t, srv, "small/")
	next := map[string]int{}
	for _, tb := range tabs {
		part := tb.key[strings.LastIndexByte(tb.key, '/')+1:][:5]
		for _, r := range tb.rows {
			if r[0] != fmt.Sprint(next[part]) {
				t.Fatalf("%s: offset %s after %d", tb.key, r[0], next[part]-1)
			}
			next[part]++
		}
	}
	if len(next) != parts || next["00000"] != per || next["00001"] != per {
		t.Fatalf("records per partition in the bucket: %v, want %d each", next, per)
	}
	if avg := parts * per / len(tabs); avg < 100 {
		t.Errorf("%d objects, %d records each on average: the encodings' room left the open files too little", len(tabs), avg)
	}
	t.Logf("%d objects for %d records, peak held %d of %d", len(tabs), parts*per, s.peakHeld, bound)
}
