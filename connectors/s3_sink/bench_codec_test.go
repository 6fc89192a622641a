package s3sink

import (
	"context"
	"encoding/hex"
	"encoding/json"
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
	recs       []sdk.Record      // the records, when not the run's
	topics     []sdk.TopicSchema // handed to SetTopics, when set
}

// BenchmarkCodecs measures the sink alone against versitygw on 1 KiB
// records with random hex filler, with metadata: each compression and
// Parquet setting against its baseline in the same run (ratio), and the
// bytes stored per record. Run with -benchtime 60000x.
func BenchmarkCodecs(b *testing.B) {
	cases := []codecCase{{name: "none"}}
	for _, l := range []struct {
		name  string
		level level
	}{{"fastest", levelFastest}, {"default", levelDefault}, {"best", levelBest}} {
		cases = append(cases,
			codecCase{name: "gzip-" + l.name, base: "none", mod: func(o *options) { o.Compression, o.Level = compressGzip, l.level }},
			codecCase{name: "zstd-" + l.name, base: "none", mod: func(o *options) { o.Compression, o.Level = compressZstd, l.level }})
	}
	parquet := func(codec string, l level) func(*options) {
		return func(o *options) { o.Format, o.Columns, o.ParquetCodec, o.Level = formatParquet, hexColumns, codec, l }
	}
	cases = append(cases,
		codecCase{name: "parquet-snappy", base: "none", mod: parquet("snappy", levelFastest)},
		codecCase{name: "parquet-zstd-fastest", base: "none", mod: parquet("zstd", levelFastest)},
		codecCase{name: "parquet-zstd-default", base: "none", mod: parquet("zstd", levelDefault)},
		codecCase{name: "parquet-gzip-fastest", base: "none", mod: parquet("gzip", levelFastest)})
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
			if c.topics != nil {
				if err := s.SetTopics(c.topics); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Open(context.Background()); err != nil {
				b.Fatal(err)
			}
			rs := recs
			if c.recs != nil {
				rs = c.recs
			}
			b.SetBytes(int64(len(rs[0].Payload)))
			b.ResetTimer()
			consumeN(b, s, rs, 1000)
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

// hexAvro is the Avro schema of hexRecords: the fields of hexColumns.
const hexAvro = `{"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"},
	{"name": "event", "type": "string"}, {"name": "user", "type": "string"}, {"name": "pad", "type": "string"}]}`

// BenchmarkParquetAvro measures Parquet from an Avro topic (no columns:
// the Avro schema's) against Parquet from the same records as JSON with
// the same columns (hexColumns), 1 KiB records, snappy pages, metadata
// columns on: the Avro row is walked from the binary, the JSON one
// scanned. Run with -benchtime 60000x.
func BenchmarkParquetAvro(b *testing.B) {
	js := hexRecords(10_000, 1024)
	av := avroHexRecords(b, js)
	benchCodecs(b, []codecCase{
		{name: "parquet-json", mod: func(o *options) { o.Format, o.Columns, o.ParquetCodec = formatParquet, hexColumns, "snappy" }},
		{name: "parquet-avro", base: "parquet-json", recs: av,
			mod:    func(o *options) { o.Format, o.ParquetCodec = formatParquet, "snappy" },
			topics: []sdk.TopicSchema{{Topic: "events", Schema: sdk.SchemaAvro, AvroSchema: hexAvro}}},
	}, js)
}

// BenchmarkParquetAvroRow measures what Consume does per record for
// Parquet, without S3 or the encoding (the same for both, same columns):
// converting a 1 KiB record into its serialized row, from the Avro binary
// against from JSON. Rounds alternate so that load from other processes
// falls on both alike; the ratio is JSON's time over Avro's.
func BenchmarkParquetAvroRow(b *testing.B) {
	js := hexRecords(1000, 1024)
	av := avroHexRecords(b, js)
	o := defaultOptions()
	o.Format, o.ParquetCodec, o.IncludeMetadata = formatParquet, "snappy", true
	o.Columns = hexColumns
	jl, err := newPQLayout(&o)
	if err != nil {
		b.Fatal(err)
	}
	o.Columns = nil
	base, _ := newPQLayout(&o)
	al, err := newAvroLayout(base, &o, hexAvro)
	if err != nil {
		b.Fatal(err)
	}
	var r pqRow
	var dst []byte
	run := func(l *pqLayout, recs []sdk.Record, n int) time.Duration {
		start := time.Now()
		for i := range n {
			if _, err := l.row(&r, &recs[i%len(recs)]); err != nil {
				b.Fatal(err)
			}
			dst = appendRow(dst[:0], r.row)
		}
		return time.Since(start)
	}
	var tj, ta time.Duration
	b.ResetTimer()
	for done := 0; done < b.N; done += 1000 {
		n := min(1000, b.N-done)
		tj += run(jl, js, n)
		ta += run(al, av, n)
	}
	b.ReportMetric(float64(tj.Nanoseconds())/float64(b.N), "json_ns/rec")
	b.ReportMetric(float64(ta.Nanoseconds())/float64(b.N), "avro_ns/rec")
	b.ReportMetric(float64(tj)/float64(ta), "ratio_avro_vs_json")
}

// avroHexRecords is js (hexRecords) as Avro records of hexAvro.
func avroHexRecords(b *testing.B, js []sdk.Record) []sdk.Record {
	av := make([]sdk.Record, len(js))
	for i, r := range js {
		var v map[string]any
		if err := json.Unmarshal(r.Payload, &v); err != nil {
			b.Fatal(err)
		}
		v["id"] = int64(v["id"].(float64))
		av[i] = r
		av[i].Payload, av[i].Schema = avroEncode(b, hexAvro, v), sdk.SchemaAvro
	}
	return av
}
