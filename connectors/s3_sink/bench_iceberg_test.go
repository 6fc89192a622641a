package s3sink

import (
	"fmt"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// BenchmarkIceberg writes 512 MiB of 1 KiB JSON records per op to one
// partition against versitygw as Parquet files with the same columns:
// plain files (parquet, run first), and the same files appended to an
// Iceberg table on a PostgreSQL SQL catalog with commit_interval 10s
// (iceberg: the last commit, at Close, is in the time; Open, which creates
// the table, is not, for either). It reports MB/s and, for iceberg, ratio_vs_parquet in the
// same run. Run with -benchtime 2x or more.
func BenchmarkIceberg(b *testing.B) {
	const total = 512 << 20
	srv := s3test.Start(b)
	dsn := pgtest.Start(b).CreateDatabase(b, "iceberg")
	cols := []columnSpec{{Name: "id", Type: "int64"}, {Name: "customer", Type: "string"}, {Name: "total", Type: "double"},
		{Name: "currency", Type: "string"}, {Name: "note", Type: "string"}}
	var plain float64
	for _, ice := range []bool{false, true} {
		name := map[bool]string{false: "parquet", true: "iceberg"}[ice]
		b.Run(name, func(b *testing.B) {
			recs := benchRecords(1000, 1024)
			n := total / len(recs[0].Payload)
			b.SetBytes(int64(n * len(recs[0].Payload)))
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				s := openBenchSink(b, srv, func(o *options) {
					o.Format, o.Columns, o.MaxFileSize = formatParquet, cols, 8<<20
					o.Prefix = fmt.Sprintf("%s-%s-%d-%d", o.Prefix, name, b.N, i)
					if ice {
						o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: dsn, CommitInterval: 10 * time.Second,
							Table: fmt.Sprintf("bench.t%d_%d", b.N, i)}
					}
				})
				b.StartTimer()
				feedFrom1000(b, s, recs, n)
			}
			mbs := float64(int64(b.N)*int64(total)) / b.Elapsed().Seconds() / 1e6
			b.ReportMetric(mbs, "MB/s")
			if !ice {
				plain = mbs
			} else if plain > 0 {
				b.ReportMetric(mbs/plain, "ratio_vs_parquet")
			}
		})
	}
}
