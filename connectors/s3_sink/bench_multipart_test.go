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
// ratio_vs_single in the same run. Run with -benchtime 2x or more.
func BenchmarkMultipart(b *testing.B) {
	const total = 512 << 20
	var single float64
	for _, c := range []struct {
		name             string
		fileSize, buffer int64
	}{{"single-8MiB", 8 << 20, 256 << 20}, {"multipart-64MiB", 64 << 20, 256 << 20}, {"streamed-64MiB", 64 << 20, 64 << 20}} {
		b.Run(c.name, func(b *testing.B) {
			srv := s3test.Start(b)
			recs := benchRecords(1000, 1024)
			var n, one int
			for i := 0; i < b.N; i++ {
				s := openBenchSink(b, srv, func(o *options) {
					o.MaxFileSize, o.PartSize, o.MaxBufferSize = c.fileSize, 16<<20, c.buffer
					o.Prefix = fmt.Sprintf("%s-%s-%d", o.Prefix, c.name, i)
				})
				if i == 0 {
					one = len(s.fmt.appendRecord(nil, &recs[0], true, metaTail("orders.eu", 0)))
					n = total / one
					b.SetBytes(int64(n * one))
					b.ResetTimer()
				}
				feedFrom1000(b, s, recs, n)
			}
			mbs := float64(int64(b.N)*int64(n*one)) / b.Elapsed().Seconds() / 1e6
			b.ReportMetric(mbs, "MB/s")
			if c.fileSize == 8<<20 {
				single = mbs
			} else if single > 0 {
				b.ReportMetric(mbs/single, "ratio_vs_single")
			}
		})
	}
}
