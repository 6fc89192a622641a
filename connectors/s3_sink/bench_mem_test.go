package s3sink

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// peakRSS returns the process's peak resident set size (VmHWM) in bytes.
func peakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "VmHWM:") {
			f := strings.Fields(l)
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

// resetPeakRSS resets VmHWM to the current RSS (Linux clear_refs 5).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

func openBenchSink(b *testing.B, srv *s3test.Server, mod func(*options)) *Sink {
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.Prefix = fmt.Sprintf("bench-%d", b.N)
	if mod != nil {
		mod(&o)
	}
	s := newSink(o, sinkEnv("bench", sdk.DiscardMetrics))
	if err := s.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	return s
}

// BenchmarkOpenPartitionsMemory fills N partitions to just below
// max_file_size, then past it so every one uploads, and reports the Go heap
// and the peak RSS against N x max_file_size. The peak RSS is the whole
// process's: run one sub-benchmark per process with -benchtime 1x.
func BenchmarkOpenPartitionsMemory(b *testing.B) {
	const maxFile = 4 << 20
	for _, n := range []int{16, 64} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			srv := s3test.Start(b)
			recs := benchRecords(1024, 1024)
			for i := 0; i < b.N; i++ {
				// A bound above N x max_file_size plus the files in flight, so
				// every partition can hold a nearly full file.
				bufBound := int64(n+8) * maxFile * 5 / 4
				s := openBenchSink(b, srv, func(o *options) { o.MaxFileSize = maxFile; o.MaxBufferSize = bufBound })
				runtime.GC()
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				baseHeap := ms.HeapInuse
				resetPeakRSS()
				baseRSS := peakRSS()
				ctx := context.Background()
				one := len(s.fmt.appendRecord(nil, &recs[0], true, metaTail("t.0", 0)))
				perFile := maxFile/(one+32) - 1 // stay below the threshold
				batch := make([]sdk.Record, 0, 1024)
				feed := func(count int) {
					for p := 0; p < n; p++ {
						for j := 0; j < count; j += len(batch) {
							batch = batch[:0]
							for k := 0; k < min(1024, count-j); k++ {
								r := recs[k]
								r.Topic = "t." + strconv.Itoa(p)
								r.Offset = int64(j + k)
								batch = append(batch, r)
							}
							if err := s.Consume(ctx, batch); err != nil {
								b.Fatal(err)
							}
						}
					}
				}
				feed(perFile)
				var held int64
				for _, p := range s.parts {
					held += p.open.size
				}
				if s.open != n || held < int64(n)*maxFile*9/10 {
					b.Fatalf("%d open files holding %d MiB", s.open, held>>20)
				}
				runtime.ReadMemStats(&ms)
				heapFull := ms.HeapInuse - baseHeap
				rssFull := peakRSS() - baseRSS
				feed(2) // every partition crosses the threshold and uploads
				rssUpload := peakRSS() - baseRSS
				if err := s.Close(ctx); err != nil {
					b.Fatal(err)
				}
				if i > 0 {
					continue // the peak RSS of a process only grows: report the first run
				}
				bound := float64(n * maxFile)
				b.ReportMetric(float64(heapFull)/(1<<20), "heap_MiB")
				b.ReportMetric(float64(rssFull)/(1<<20), "peak_rss_MiB")
				b.ReportMetric(float64(rssUpload)/(1<<20), "peak_rss_upload_MiB")
				b.ReportMetric(bound/(1<<20), "NxMax_MiB")
				b.ReportMetric(float64(heapFull)/bound, "heap/NxMax")
				b.ReportMetric(float64(rssUpload)/bound, "peak_rss/NxMax")
				b.ReportMetric(float64(rssUpload)/float64(bufBound), "peak_rss/max_buffer_size")
			}
		})
	}
}

// BenchmarkSinkUpload measures the sink alone against versitygw: batches of
// records handed to Consume, 8 MiB files uploaded as they fill, without
// compression and with gzip and zstd (compressed size against none in
// the same run as ratio_vs_none).
func BenchmarkSinkUpload(b *testing.B) {
	for _, size := range []int{100, 1024} {
		var noneBytes float64
		for _, comp := range []compression{compressNone, compressGzip, compressZstd} {
			name := fmt.Sprintf("%dB", size)
			if comp != compressNone {
				name += "-" + comp.encoding()
			}
			b.Run(name, func(b *testing.B) {
				srv := s3test.Start(b)
				m := newTestMetrics()
				o := defaultOptions()
				o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
				o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
				o.Compression = comp
				s := newSink(o, sinkEnv("bench", m))
				if err := s.Open(context.Background()); err != nil {
					b.Fatal(err)
				}
				recs := benchRecords(10_000, size)
				b.SetBytes(int64(size))
				b.ReportAllocs()
				b.ResetTimer()
				consumeN(b, s, recs, len(recs))
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "rec/s")
				perRec := m.get("s3_sink_bytes_uploaded_total") / float64(b.N)
				b.ReportMetric(perRec, "uploaded_B/rec")
				if comp == compressNone {
					noneBytes = perRec
				} else if noneBytes > 0 {
					b.ReportMetric(noneBytes/perRec, "ratio_vs_none")
				}
			})
		}
	}
}

// BenchmarkBufferBound writes four times max_buffer_size (32 MiB) of 1 KiB
// records over 1, 16 and 256 partitions with 8 MiB files, and reports the
// sink's peak held bytes and the process's peak RSS growth against the
// bound. Run one sub-benchmark per process with -benchtime 1x.
func BenchmarkBufferBound(b *testing.B) {
	const bound = 32 << 20
	for _, n := range []int{1, 16, 256} {
		b.Run(fmt.Sprintf("partitions=%d", n), func(b *testing.B) {
			srv := s3test.Start(b)
			recs := benchRecords(1024, 1024)
			for i := 0; i < b.N; i++ {
				s := openBenchSink(b, srv, func(o *options) { o.MaxFileSize = 8 << 20; o.MaxBufferSize = bound })
				runtime.GC()
				resetPeakRSS()
				baseRSS := peakRSS()
				ctx := context.Background()
				next := make([]int64, n)
				batch := make([]sdk.Record, 0, 1024)
				for sent := 0; sent < 4*bound/1024; sent += len(batch) {
					p := (sent / 1024) % n
					batch = batch[:0]
					for k := range 1024 {
						r := recs[k]
						r.Topic, r.Partition, r.Offset = "t", int32(p), next[p]
						next[p]++
						batch = append(batch, r)
					}
					if err := s.Consume(ctx, batch); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Close(ctx); err != nil {
					b.Fatal(err)
				}
				if i > 0 {
					continue
				}
				rss := float64(peakRSS() - baseRSS)
				b.ReportMetric(float64(s.peakHeld)/(1<<20), "peak_held_MiB")
				b.ReportMetric(float64(s.peakHeld)/bound, "held/max_buffer_size")
				b.ReportMetric(rss/(1<<20), "peak_rss_growth_MiB")
				b.ReportMetric(rss/bound, "rss_growth/max_buffer_size")
			}
		})
	}
}
