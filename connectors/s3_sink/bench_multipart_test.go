package s3sink

import (
	"fmt"
	"testing"

	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// BenchmarkMultipart writes 512 MiB of 1 KiB records to one partition per
// op against versitygw, in 8 MiB files of one PutObject each (single, run
// first), in 64 MiB files uploaded in parts of 16 MiB at their cut
// (multipart: max_buffer_size 256MiB, the default, so a 64 MiB file is
// within a quarter of it and is held whole), and in 64 MiB files streamed
// while they fill (streamed: max_buffer_size 64MiB, so a file streams
// above 16 MiB, then is copied to its key), and reports MB/s and
// ratio_vs_single in the same run. The gzip cases write records of random
// hex (compressing to about half) in 64 MiB files held whole and
// compressed at the cut (gzip-held, as multipart), or compressed as they
// stream (gzip-streamed, ratio_vs_gzip_held), and the most bytes a sink
// held (peak_held_MiB). Run with -benchtime 2x or
// more.
func BenchmarkMultipart(b *testing.B) {
	const total = 512 << 20
	var single, gzipHeld float64
	for _, c := range []struct {
		name             string
		fileSize, buffer int64
		comp             compression
	}{
		{"single-8MiB", 8 << 20, 256 << 20, compressNone}, {"multipart-64MiB", 64 << 20, 256 << 20, compressNone},
		{"streamed-64MiB", 64 << 20, 64 << 20, compressNone},
		{"gzip-held-64MiB", 64 << 20, 256 << 20, compressGzip}, {"gzip-streamed-64MiB", 64 << 20, 64 << 20, compressGzip},
	} {
		b.Run(c.name, func(b *testing.B) {
			srv := s3test.Start(b)
			recs := benchRecords(1000, 1024)
			if c.comp != compressNone {
				recs = streamedRecords(1000)
			}
			var n, one int
			var peak int64
			for i := 0; i < b.N; i++ {
				s := openBenchSink(b, srv, func(o *options) {
					o.MaxFileSize, o.PartSize, o.MaxBufferSize = c.fileSize, 16<<20, c.buffer
					o.Compression = c.comp
					o.Prefix = fmt.Sprintf("%s-%s-%d", o.Prefix, c.name, i)
				})
				if i == 0 {
					one = len(s.fmt.appendRecord(nil, &recs[0], true, metaTail("orders.eu", 0)))
					n = total / one
					b.SetBytes(int64(n * one))
					b.ResetTimer()
				}
				feedFrom1000(b, s, recs, n)
				peak = max(peak, s.peakHeld)
			}
			mbs := float64(int64(b.N)*int64(n*one)) / b.Elapsed().Seconds() / 1e6
			b.ReportMetric(mbs, "MB/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak_held_MiB")
			switch {
			case c.name == "single-8MiB":
				single = mbs
			case c.name == "gzip-held-64MiB":
				gzipHeld = mbs
			case c.comp != compressNone && gzipHeld > 0:
				b.ReportMetric(mbs/gzipHeld, "ratio_vs_gzip_held")
			case c.comp == compressNone && single > 0:
				b.ReportMetric(mbs/single, "ratio_vs_single")
			}
		})
	}
}
