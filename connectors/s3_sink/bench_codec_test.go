package s3sink

import (
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// hexRecords returns n JSON records of size bytes whose filler is random
// hex (4 bits of entropy per character), as cmd/pico-bench writes them: they
// compress about as well as typical event data, not 50:1.
func hexRecords(n, size int) []sdk.Record {
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, size/2)
	base := time.Date(2026, 9, 3, 21, 15, 4, 0, time.UTC)
	out := make([]sdk.Record, n)
	for i := range out {
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		v := fmt.Sprintf(`{"id":%d,"event":"page_view","user":"user-%d","pad":"%s`, i, i%977, hex.EncodeToString(raw))
		out[i] = sdk.Record{Topic: "events", Offset: int64(i), Timestamp: base.Add(time.Duration(i) * time.Millisecond),
			Payload: []byte(v[:size-2] + `"}`), Schema: sdk.SchemaJSON}
	}
	return out
}

// hexColumns are the columns of hexRecords.
var hexColumns = []columnSpec{{Name: "id", Type: "int64"}, {Name: "event", Type: "string"}, {Name: "user", Type: "string"}, {Name: "pad", Type: "string"}}

// codecCase is one output setting of BenchmarkCodecs.
type codecCase struct {
	name, base string // base: the case its ratio is against, run before it
	mod        func(*options)
}

// BenchmarkCodecs measures the sink alone against versitygw on 1 KiB
// records with random hex filler, with metadata: each compression and
// Parquet setting against its baseline in the same run (ratio), and the
// bytes stored per record. Run with -benchtime 60000x.
func BenchmarkCodecs(b *testing.B) {
	cases := []codecCase{{"none", "", nil}}
	for _, l := range []struct {
		name  string
		level level
	}{{"fastest", levelFastest}, {"default", levelDefault}, {"best", levelBest}} {
		cases = append(cases,
			codecCase{"gzip-" + l.name, "none", func(o *options) { o.Compression, o.Level = compressGzip, l.level }},
			codecCase{"zstd-" + l.name, "none", func(o *options) { o.Compression, o.Level = compressZstd, l.level }})
	}
	parquet := func(codec string, l level) func(*options) {
		return func(o *options) { o.Format, o.Columns, o.ParquetCodec, o.Level = formatParquet, hexColumns, codec, l }
	}
	cases = append(cases,
		codecCase{"parquet-snappy", "none", parquet("snappy", levelFastest)},
		codecCase{"parquet-zstd-fastest", "none", parquet("zstd", levelFastest)},
		codecCase{"parquet-zstd-default", "none", parquet("zstd", levelDefault)},
		codecCase{"parquet-gzip-fastest", "none", parquet("gzip", levelFastest)})
	benchCodecs(b, cases, hexRecords(10_000, 1024))
}

func benchCodecs(b *testing.B, cases []codecCase, recs []sdk.Record) {
	rates, sizes := map[string]float64{}, map[string]float64{}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			srv := s3test.Start(b)
			m := newTestMetrics()
			o := defaultOptions()
			o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
			o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
			o.MaxFileSize, o.IncludeMetadata = 8<<20, true
			if c.mod != nil {
				c.mod(&o)
			}
			s := newSink(o, sinkEnv("bench", m))
			if err := s.Open(context.Background()); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(recs[0].Payload)))
			b.ResetTimer()
			consumeN(b, s, recs, 1000)
			rate := float64(b.N) / b.Elapsed().Seconds()
			per := m.get("s3_sink_bytes_uploaded_total") / float64(b.N)
			rates[c.name], sizes[c.name] = rate, per
			b.ReportMetric(rate, "rec/s")
			b.ReportMetric(per, "stored_B/rec")
			if c.base != "" && rates[c.base] > 0 {
				b.ReportMetric(rate/rates[c.base], "ratio_vs_"+c.base)
				b.ReportMetric(per/sizes[c.base], "size_vs_"+c.base)
			}
		})
	}
}

// consumeN hands b.N records to s in batches of batchLen, cycling through
// recs with consecutive offsets, then closes s.
func consumeN(b *testing.B, s *Sink, recs []sdk.Record, batchLen int) {
	batch := make([]sdk.Record, batchLen)
	ctx := context.Background()
	for done := 0; done < b.N; {
		k := min(len(batch), b.N-done)
		for j := 0; j < k; j++ {
			batch[j] = recs[(done+j)%len(recs)]
			batch[j].Offset = int64(done + j)
		}
		if err := s.Consume(ctx, batch[:k]); err != nil {
			b.Fatal(err)
		}
		done += k
	}
	if err := s.Close(ctx); err != nil {
		b.Fatal(err)
	}
}
