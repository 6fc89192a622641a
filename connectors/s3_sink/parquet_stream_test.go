package s3sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// streamedParquet is a Parquet sink's settings that stream a file above
// 5 MiB (part_size, a quarter of max_buffer_size 20MiB), with row groups
// of 1 MiB of raw rows.
func streamedParquet(t *testing.T) func(*options) {
	return func(o *options) {
		parquetOpts([]columnSpec{{Name: "n", Type: "int64"}, {Name: "pad", Type: "string"}}, "zstd")(o)
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 20<<20
		o.RowGroupSize = 1 << 20
		o.MaxInFlight = 2
	}
}

// parquetRecords returns n records of topic t from offset 0 whose rows
// are about 1 KiB, of text that compresses little.
func parquetRecords(n int) []sdk.Record {
	recs := records("t", 0, n)
	for i := range recs {
		recs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, pad(i, 900+i%200)))
	}
	return recs
}

// TestParquetStreamed: a Parquet file of about 30 MiB of raw rows, above
// max_buffer_size (20MiB), streams: its parts go up to the staging upload
// while it fills, and it is one object, as the whole file, whose rows are
// the records, in several row groups; the sink's held bytes stay within
// the bound and a row group. Its bytes are those of the same file held
// whole and encoded at its upload (max_buffer_size 256MiB): a replay
// writes the same object whether it streams the file or not. With row
// groups of 1 MiB, and of half the bound (whose writer's share, counted
// once, must leave the file room to fill).
func TestParquetStreamed(t *testing.T) {
	recs := parquetRecords(30_000)
	for _, rg := range []int64{1 << 20, 10 << 20} {
		t.Run(formatSize(rg), func(t *testing.T) {
			mod := func(o *options) {
				streamedParquet(t)(o)
				o.RowGroupSize = rg
			}
			parquetStreamed(t, recs, mod, int(30<<20/rg)*2/3)
		})
	}
}

// parquetStreamed runs TestParquetStreamed with the settings of mod;
// the file must have at least groups row groups.
func parquetStreamed(t *testing.T, recs []sdk.Record, mod func(*options), groups int) {
	h := newHarness(t, mod)
	feed(t, h.sink, recs, 500)
	// Open still: its parts are on their way or in, and it holds the raw
	// rows of a batch or so, not its row group.
	h.sink.mu.Lock()
	fb := &h.sink.parts[bufferKey{"t", 0}].open
	parts, raw := 0, len(fb.chunks)
	if fb.stream != nil {
		parts = len(fb.stream.mpu.parts)
	}
	h.sink.mu.Unlock()
	if parts < 2 || raw > 2 {
		t.Fatalf("open file: %d parts started, %d raw chunks held; want its parts going up while it fills, its rows freed as they are encoded", parts, raw)
	}
	if err := h.sink.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	staged := 0
	for _, e := range h.proxy.Log() {
		if e.Method == http.MethodPut && strings.Contains(e.Path, "/"+stagingFolder+"/") {
			staged++
		}
	}
	if staged < 4 {
		t.Fatalf("%d PUT requests under the staging key, want the file's parts streamed there\n%+v", staged, h.proxy.Log())
	}
	tabs := parquetObjects(t, h.srv, "t/")
	if len(tabs) != 1 {
		t.Fatalf("%d objects, want the whole file in one (streamed, not cut at max_buffer_size)", len(tabs))
	}
	tb := tabs[0]
	if tb.key != key("", 0, len(recs)-1, "parquet")[1:] {
		t.Fatalf("key %s, want the file of every record", tb.key)
	}
	if tb.rowGroups < groups {
		t.Errorf("%d row groups, want %d or more", tb.rowGroups, groups)
	}
	if len(tb.rows) != len(recs) {
		t.Fatalf("%d rows, want %d", len(tb.rows), len(recs))
	}
	for i, r := range tb.rows {
		if r[0] != fmt.Sprint(i) || r[5] != fmt.Sprint(i) || r[6] != pad(i, 900+i%200) {
			t.Fatalf("row %d: %v, want offset and n %d and its pad", i, r[:6], i)
		}
	}
	// max_buffer_size, and the row group the writer flushes at once.
	if most := h.sink.opts.MaxBufferSize + h.sink.rowGroupTarget(); h.sink.peakHeld > most {
		t.Errorf("held %d bytes at the peak, above max_buffer_size and a row group (%d)", h.sink.peakHeld, most)
	}
	t.Logf("%d bytes, %d row groups, %d parts streamed; peak held %.1f MiB", tb.size, tb.rowGroups, staged, float64(h.sink.peakHeld)/(1<<20))

	whole := openAt(t, h.srv, h.srv.Endpoint, "whole", func(o *options) {
		mod(o)
		o.MaxBufferSize = 256 << 20
	})
	feed(t, whole, recs, 500)
	whole.mu.Lock()
	st := whole.parts[bufferKey{"t", 0}].open.stream
	whole.mu.Unlock()
	if st != nil {
		t.Fatal("the file held whole streams")
	}
	if err := whole.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := "t/" + tb.key
	if got, want := h.srv.MustGet(t, k), h.srv.MustGet(t, "whole/"+k); !bytes.Equal(got, want) {
		t.Fatalf("%s: the streamed file has %d bytes, not the %d bytes of the file held whole", k, len(got), len(want))
	}
}

// TestParquetStreamedMemoryBound writes a Parquet file of 200 MiB of raw
// rows with part_size 8MiB, parquet_row_group_size 8MiB and
// max_buffer_size 64MiB: it streams, so the sink holds at most the bound
// and a row group, the process's peak RSS grows by less than twice the
// bound (Go's heap headroom; a sink that held the file would exceed it),
// and the file is one object of every record.
func TestParquetStreamedMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MiB")
	}
	const bound = 64 << 20
	h := newHarness(t, func(o *options) {
		streamedParquet(t)(o)
		o.PartSize, o.MaxFileSize, o.MaxBufferSize, o.RowGroupSize = 8<<20, 200<<20, bound, 8<<20
	})
	recs := parquetRecords(1024)
	raw := 0
	for i := range recs {
		if _, err := h.sink.pq.row(&h.sink.row, &recs[i]); err != nil {
			t.Fatal(err)
		}
		raw += len(appendRow(nil, h.sink.row.row))
	}
	total := (200 << 20) / (raw / len(recs)) * 99 / 100 // within max_file_size: one file
	grown := rssGrowth(func() { feedFrom1000(t, h.sink, recs, total) })
	t.Logf("%d records; peak held %.1f MiB of %d MiB; peak RSS %.1f MiB above the baseline",
		total, float64(h.sink.peakHeld)/(1<<20), bound>>20, float64(grown)/(1<<20))
	if most := int64(bound + 8<<20); h.sink.peakHeld > most {
		t.Errorf("held %d bytes at the peak, above max_buffer_size and a row group (%d)", h.sink.peakHeld, most)
	}
	if grown > 2*bound {
		t.Errorf("peak RSS grew by %.1f MiB, above twice max_buffer_size (%d MiB)", float64(grown)/(1<<20), bound>>20)
	}
	tabs := parquetObjects(t, h.srv, "t/")
	if len(tabs) != 1 || len(tabs[0].rows) != total {
		t.Fatalf("%d objects, want one of the %d records", len(tabs), total)
	}
	for i, r := range tabs[0].rows {
		if r[0] != fmt.Sprint(1000+i) {
			t.Fatalf("row %d: offset %s, want %d", i, r[0], 1000+i)
		}
	}
}

// rssGrowth runs f after a collection and returns how much the process's
// peak RSS grew meanwhile.
func rssGrowth(f func()) int64 {
	runtime.GC()
	resetPeakRSS()
	before := peakRSS()
	f()
	return peakRSS() - before
}

// TestParquetStreamedGroup: the Parquet files of a group (path_template
// {field:region}) stream each on its own: two regions interleaved record
// by record, about 12 MiB of raw rows each under max_buffer_size 20MiB,
// are one file per region, each on its own staging upload, whose rows are
// its region's records and whose bytes are those of the group held whole
// (max_buffer_size 256MiB). Every record moves the open file, with its
// writer, into the idle set and back.
func TestParquetStreamedGroup(t *testing.T) {
	cols := []columnSpec{{Name: "n", Type: "int64"}, {Name: "region", Type: "string"}, {Name: "pad", Type: "string"}}
	mod := func(o *options) {
		streamedParquet(t)(o)
		o.Columns = cols
		o.PathTemplate = mustTemplate(t, "{topic}/{field:region}")
	}
	regions := []string{"eu", "us"}
	recs := records("t", 0, 24_000)
	for i := range recs {
		recs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"region":"%s","pad":"%s"}`, i, regions[i%2], pad(i, 900+i%200)))
	}
	h := newHarness(t, mod)
	h.consumeClose(recs, 500)
	staged := map[string]bool{}
	for _, e := range h.proxy.Log() {
		if e.Method == http.MethodPost && strings.Contains(e.Path, "/"+stagingFolder+"/") {
			staged[e.Path] = true
		}
	}
	if len(staged) != 2 {
		t.Errorf("multipart uploads on staging keys %v, want one per region's file", staged)
	}
	whole := openAt(t, h.srv, h.srv.Endpoint, "whole", func(o *options) {
		mod(o)
		o.MaxBufferSize = 256 << 20
	})
	feed(t, whole, recs, 500)
	if err := whole.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tabs := parquetObjects(t, h.srv, "t/")
	if len(tabs) != 2 {
		t.Fatalf("%d objects, want one per region", len(tabs))
	}
	for r, tb := range tabs {
		if want := regions[r] + "/" + key("", 0, len(recs)-1, "parquet")[1:]; tb.key != want {
			t.Fatalf("key %s, want %s", tb.key, want)
		}
		for j, row := range tb.rows {
			if i := r + 2*j; row[0] != fmt.Sprint(i) || row[5] != fmt.Sprint(i) || row[6] != regions[r] || row[7] != pad(i, 900+i%200) {
				t.Fatalf("%s: row %d: %v, want record %d", tb.key, j, row[:7], i)
			}
		}
		if len(tb.rows) != len(recs)/2 {
			t.Fatalf("%s: %d rows, want %d", tb.key, len(tb.rows), len(recs)/2)
		}
		k := "t/" + tb.key
		if got, want := h.srv.MustGet(t, k), h.srv.MustGet(t, "whole/"+k); !bytes.Equal(got, want) {
			t.Fatalf("%s: the streamed file has %d bytes, not the %d bytes of the file held whole", k, len(got), len(want))
		}
	}
}

// TestParquetStreamedCrash: a sink that crashes while its Parquet file
// streams (parts in its staging upload) and resumes from its Durable
// offset writes the same object as a run without a crash that held the
// file whole, and leaves no upload behind (the next start aborts the
// staging upload).
func TestParquetStreamedCrash(t *testing.T) {
	recs := parquetRecords(16_000)
	h := newHarness(t, streamedParquet(t))
	feed(t, h.sink, recs[:12_000], 500)
	testwait.For(t, time.Minute, "a part of the open file to be in", func() bool {
		h.sink.mu.Lock()
		defer h.sink.mu.Unlock()
		st := h.sink.parts[bufferKey{"t", 0}].open.stream
		return st != nil && len(st.mpu.parts) > 0 && st.mpu.parts[0].ETag != nil
	})
	from, _ := durableOf(h.sink, "t")
	h.sink.crash()
	if from != 0 {
		t.Fatalf("Durable %d during the crashed file, want 0", from)
	}
	if len(h.uploads("")) != 1 {
		t.Fatalf("uploads %v after the crash, want the staging upload", h.uploads(""))
	}
	again := openAt(t, h.srv, h.srv.Endpoint, "", streamedParquet(t))
	feed(t, again, recs[from:], 500)
	if err := again.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ref := openAt(t, h.srv, h.srv.Endpoint, "ref", func(o *options) {
		streamedParquet(t)(o)
		o.MaxBufferSize = 256 << 20 // held whole
	})
	feed(t, ref, recs, 500)
	if err := ref.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := "t/" + key("", 0, len(recs)-1, "parquet")[1:]
	if got, want := h.srv.MustGet(t, k), h.srv.MustGet(t, "ref/"+k); !bytes.Equal(got, want) {
		t.Fatalf("%s: %d bytes after the crash, not the %d bytes of the run without one", k, len(got), len(want))
	}
	if left := h.uploads(""); len(left) > 0 {
		t.Fatalf("uploads left: %v", left)
	}
}

// TestParquetStreamedRelease: a partition revoked while its Parquet file
// streams drops the file: its raw rows, its encoded bytes and its
// writer's share are freed, its staging upload is aborted, nothing is
// written.
func TestParquetStreamedRelease(t *testing.T) {
	h := newHarness(t, streamedParquet(t))
	feed(t, h.sink, parquetRecords(12_000), 500)
	h.sink.mu.Lock()
	fb := &h.sink.parts[bufferKey{"t", 0}].open
	streaming := fb.stream != nil && fb.pq.enc != nil && fb.pq.enc.out.size > 0
	h.sink.mu.Unlock()
	if !streaming {
		t.Fatal("the open file does not stream its encoded bytes")
	}
	ctx := context.Background()
	err := h.sink.Release(ctx, []sdk.TopicPartition{{Topic: "t"}})
	err = errors.Join(err, h.sink.Close(ctx)) // Close waits for the abort
	if left, keys := h.uploads(""), h.keys(); err != nil || len(left) > 0 || len(keys) > 0 || h.sink.held != 0 {
		t.Fatalf("after the release: %v; uploads %v, objects %v, %d bytes held; want none", err, left, keys, h.sink.held)
	}
}

// TestParquetStreamedIceberg: with table_format = "iceberg" a streamed
// Parquet file is committed with its encoded size and its record count
// (the table's data file entry); the table reads back every record once,
// which it could not with the raw size.
func TestParquetStreamedIceberg(t *testing.T) {
	srv := s3test.Start(t)
	const n = 12_000 // about 12 MiB of raw rows: streams above 5 MiB
	s := openAt(t, srv, srv.Endpoint, "ice", func(o *options) {
		streamedParquet(t)(o)
		o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: "sqlite:" + filepath.Join(t.TempDir(), "catalog.db"), Table: "lake.ice", CommitInterval: time.Hour}
	})
	feed(t, s, parquetRecords(n), 500)
	s.mu.Lock()
	p := s.parts[bufferKey{"t", 0}]
	streaming := p.open.stream != nil
	s.closeFile(p)
	s.mu.Unlock()
	if !streaming {
		t.Fatal("the open file does not stream")
	}
	s.settle()
	s.mu.Lock()
	files := slices.Clone(p.ice.files)
	s.mu.Unlock()
	if len(files) != 1 {
		t.Fatalf("%d data files waiting for the commit, want the one", len(files))
	}
	k := strings.TrimPrefix(files[0].Path, "s3://"+srv.Bucket+"/")
	if body := srv.MustGet(t, k); files[0].Size != int64(len(body)) || files[0].Records != n {
		t.Fatalf("data file %s: size %d, %d records; want the object's %d bytes and %d", k, files[0].Size, files[0].Records, len(body), n)
	}
	if err := s.Close(context.Background()); err != nil { // commits
		t.Fatal(err)
	}
	tb, err := icetable.Open(context.Background(), s.opts.tableConfig(nil), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tb.Close()
	_, seen := readTable(t, tb)
	wantOnce(t, seen, n)
}

// BenchmarkParquetStreamed writes 192 MiB of raw Parquet rows (about
// 1 KiB each, text that compresses to about half) to one partition per op
// against versitygw, in files of 64 MiB of raw rows, parts of 16 MiB:
// held whole and encoded at the upload (held: max_buffer_size 256MiB,
// the default), and streamed, encoded on the consume path as they fill
// (streamed: max_buffer_size 64MiB, so a file streams above 16 MiB). It
// reports raw MB/s, the peak held MiB, and ratio_vs_held in the same run.
func BenchmarkParquetStreamed(b *testing.B) {
	const total = 192 << 20
	recs := parquetRecords(1000)
	var held float64
	for _, c := range []struct {
		name   string
		buffer int64
	}{{"held-64MiB", 256 << 20}, {"streamed-64MiB", 64 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			srv := s3test.Start(b)
			var n, raw int
			var peak int64
			for i := 0; i < b.N; i++ {
				s := openBenchSink(b, srv, func(o *options) {
					parquetOpts([]columnSpec{{Name: "n", Type: "int64"}, {Name: "pad", Type: "string"}}, "zstd")(o)
					o.MaxFileSize, o.PartSize, o.MaxBufferSize = 64<<20, 16<<20, c.buffer
					o.Prefix = fmt.Sprintf("%s-%s-%d", o.Prefix, c.name, i)
				})
				if i == 0 {
					for j := range recs {
						if _, err := s.pq.row(&s.row, &recs[j]); err != nil {
							b.Fatal(err)
						}
						raw += len(appendRow(nil, s.row.row))
					}
					n = total / (raw / len(recs))
					b.SetBytes(int64(total))
					b.ResetTimer()
				}
				feedFrom1000(b, s, recs, n)
				peak = max(peak, s.peakHeld)
				objs, err := srv.List(context.Background(), s.opts.Prefix+"/")
				if err != nil || len(objs) != (n*raw/len(recs)+64<<20-1)/(64<<20) {
					b.Fatalf("%d objects (%v), want files of 64 MiB of raw rows, none cut early", len(objs), err)
				}
			}
			mbs := float64(int64(b.N)*total) / b.Elapsed().Seconds() / 1e6
			b.ReportMetric(mbs, "MB/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak_held_MiB")
			if c.buffer == 256<<20 {
				held = mbs
			} else if held > 0 {
				b.ReportMetric(mbs/held, "ratio_vs_held")
			}
		})
	}
}
