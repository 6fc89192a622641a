package s3sink

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// layoutRecords returns n records of 1 KiB JSON payloads whose region
// field takes 10 values.
func layoutRecords(n int) []sdk.Record {
	recs := benchRecords(n, 1024)
	for i := range recs {
		p := recs[i].Payload
		field := fmt.Appendf(nil, `{"region":"region-%d",`, (i*7)%10)
		recs[i].Payload = append(append(field, p[1:len(p)-2-(len(field)-1)]...), `"}`...)
	}
	return recs
}

// layoutRun writes recs through a sink with path_template tmpl into srv,
// uploads included, and returns the time it took.
func layoutRun(b *testing.B, srv *s3test.Server, tmpl string, recs []sdk.Record) time.Duration {
	return layoutRunAt(b, srv, srv.Endpoint, 0, tmpl, recs)
}

// layoutRunAt is layoutRun through endpoint, with max_file_size fileSize
// (0: the default).
func layoutRunAt(b *testing.B, srv *s3test.Server, endpoint string, fileSize int64, tmpl string, recs []sdk.Record) time.Duration {
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, endpoint, true
	if fileSize > 0 {
		o.MaxFileSize = fileSize
	}
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.Prefix = fmt.Sprintf("bench-%d", time.Now().UnixNano())
	t, err := parsePathTemplate(tmpl)
	if err != nil {
		b.Fatal(err)
	}
	o.PathTemplate = t
	s := newSink(o, sinkEnv("bench", sdk.DiscardMetrics))
	if err := s.Open(context.Background()); err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for i := 0; i < len(recs); i += 1000 {
		if err := s.Consume(context.Background(), recs[i:min(i+1000, len(recs))]); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// BenchmarkLayout compares, in one run, a sink that lays 1 KiB records out
// by {field:region} (10 values: ten files per group) and the local date
// with one that writes {topic} only, uploads to versitygw included; the
// target is field_%_of_topic >= 85. Set PICO_BENCH_RECORDS to change the
// record count. The default, 200k records, cuts two groups of 10 x 8 MiB
// (the default max_file_size) and part of a third: with 40k the field
// run never cut a group (its ten 4 MiB files went up together at Close),
// and measured 0.96 to 1.14 where pico-bench's row, whose rounds cut
// groups, measured 0.78.
func BenchmarkLayout(b *testing.B) {
	srv := s3test.Start(b)
	recs := layoutRecords(benchCount(200_000))
	if !strings.HasPrefix(string(recs[0].Payload), `{"region":"region-0",`) || len(recs[0].Payload) != 1024 {
		b.Fatalf("payload %.40s... of %d bytes", recs[0].Payload, len(recs[0].Payload))
	}
	layoutRun(b, srv, "{topic}", recs[:2000]) // warm up
	var topic, field time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		topic += layoutRun(b, srv, "{topic}", recs)
		field += layoutRun(b, srv, "{topic}/dt={yyyy}-{MM}-{dd}/region={field:region}", recs)
	}
	n := float64(len(recs) * b.N)
	b.ReportMetric(n/topic.Seconds(), "topic_rec/s")
	b.ReportMetric(n/field.Seconds(), "field_rec/s")
	b.ReportMetric(100*topic.Seconds()/field.Seconds(), "field_%_of_topic")
}

// BenchmarkLayoutLatency is BenchmarkLayout against a store whose every
// request takes 40 ms more (a proxy's latency), as small PUTs to S3 do,
// with 1 MiB files: 60k records make six groups of ten files and sixty
// {topic} files, and the time is the upload schedule's, whatever the
// machine's load. field_%_of_topic measures how well a group's uploads
// fill max_in_flight (4) against single files'.
func BenchmarkLayoutLatency(b *testing.B) {
	srv := s3test.Start(b)
	proxy := faultproxy.Start(b, srv.Endpoint)
	proxy.SetLatency(40 * time.Millisecond)
	recs := layoutRecords(benchCount(60_000))
	var topic, field time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		topic += layoutRunAt(b, srv, proxy.URL, 1<<20, "{topic}", recs)
		field += layoutRunAt(b, srv, proxy.URL, 1<<20, "{topic}/dt={yyyy}-{MM}-{dd}/region={field:region}", recs)
	}
	n := float64(len(recs) * b.N)
	b.ReportMetric(n/topic.Seconds(), "topic_rec/s")
	b.ReportMetric(n/field.Seconds(), "field_rec/s")
	b.ReportMetric(100*topic.Seconds()/field.Seconds(), "field_%_of_topic")
}

// BenchmarkLayoutConsume is BenchmarkLayout's CPU part alone: the records
// formatted into their files (no upload: the files are dropped by a
// Release after each pass).
func BenchmarkLayoutConsume(b *testing.B) {
	recs := layoutRecords(10_000)
	for _, c := range []struct{ name, tmpl string }{
		{"topic", "{topic}"},
		{"field10", "{topic}/dt={yyyy}-{MM}-{dd}/region={field:region}"},
	} {
		b.Run(c.name, func(b *testing.B) {
			o := defaultOptions()
			o.PathTemplate, _ = parsePathTemplate(c.tmpl)
			o.MaxFileSize = 1 << 30
			o.MaxBufferSize = 1 << 30
			s := newSink(o, sinkEnv("bench", sdk.DiscardMetrics))
			s.client = nil
			b.SetBytes(1024)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rec := &recs[i%len(recs)]
				s.mu.Lock()
				p := s.partition(rec.Topic, rec.Partition)
				p.started = true
				if s.layout.perRecord && p.group.count > 0 {
					if err := s.place(p, rec, nil); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.append(p, rec); err != nil {
					b.Fatal(err)
				}
				if i%len(recs) == len(recs)-1 {
					s.dropGroup(p)
				}
				s.mu.Unlock()
			}
		})
	}
}
