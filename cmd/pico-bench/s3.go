package main

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/plugin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/servertest/standalone"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/status"
)

// timedSink notes when the first batch arrives.
type timedSink struct {
	plugin.Sink
	once  sync.Once
	first time.Time
}

func (t *timedSink) Consume(ctx context.Context, batch []plugin.Record) error {
	t.once.Do(func() { t.first = time.Now() })
	return t.Sink.Consume(ctx, batch)
}

// s3Target is where a sink writes.
type s3Target struct{ Endpoint, Bucket, AccessKey, SecretKey string }

func targetOf(srv *s3test.Server) s3Target {
	return s3Target{srv.Endpoint, srv.Bucket, srv.AccessKey, srv.SecretKey}
}

// newS3Sink builds the S3 sink from a plugin_config table.
func newS3Sink(srv s3Target, extra map[string]any) (plugin.Sink, error) {
	cfg := map[string]any{
		"bucket": srv.Bucket, "region": s3test.Region, "endpoint": srv.Endpoint,
		"access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	reg, ok := plugin.Lookup("libpicomq_connector_s3_sink")
	if !ok {
		return nil, fmt.Errorf("the S3 sink is not linked")
	}
	c, err := reg.Load(cfg, "PICO_BENCH_UNUSED_", func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	return reg.NewSink(c, plugin.Env{Key: "bench", Logger: quiet(), Metrics: plugin.DiscardMetrics})
}

// startS3 starts versitygw (or MinIO) through s3test, with a clear error
// naming what to install.
func (b *bench) startS3() *s3test.Server {
	var srv *s3test.Server
	if err := standalone.Catch(func() { srv = s3test.Start(b.h) }); err != nil {
		b.must(fmt.Errorf("%v\n  (versitygw is needed: run `make tools`, or %s)", err, s3test.InstallVersitygw))
	}
	return srv
}

// sinkRun runs the sink loop over topics until n records were consumed,
// then stops it (Close uploads what is buffered) and returns the time from
// the first batch to the end of Close.
func (b *bench) sinkRun(addr string, sink plugin.Sink, pattern string, n int, batch int) time.Duration {
	t, err := sinkRun(addr, sink, pattern, n, batch)
	b.must(err)
	return t
}

func sinkRun(addr string, sink plugin.Sink, pattern string, n int, batch int) (time.Duration, error) {
	ts := &timedSink{Sink: sink}
	tr := status.New("sink", "bench", nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- sinkloop.Run(ctx, sinkloop.Config{Key: "bench", Topics: []definition.Topics{{Pattern: pattern, Schema: "json", BatchLength: batch, PollInterval: "100ms"}},
			Sink: ts, BootstrapServers: addr, GroupID: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Logger: quiet(), Tracker: tr})
	}()
	deadline := time.Now().Add(3 * time.Minute)
	for tr.Counters.Consumed.Load() < int64(n) {
		if time.Now().After(deadline) {
			cancel()
			return 0, fmt.Errorf("sink: %d of %d records consumed after 3 minutes (last error %q)", tr.Counters.Consumed.Load(), n, tr.Snapshot().LastError)
		}
		select {
		case err := <-done:
			return 0, fmt.Errorf("sink loop stopped early: %v", err)
		default:
		}
		time.Sleep(500 * time.Microsecond)
	}
	cancel()
	if err := <-done; err != nil {
		return 0, fmt.Errorf("sink loop: %w", err)
	}
	return time.Since(ts.first), nil
}

// putRate uploads count objects of size bytes one after another, as the
// sink does, and returns MB/s.
func putRate(srv *s3test.Server, prefix string, size, count int) (float64, error) {
	body := bytes.Repeat([]byte(`{"offset":1,"payload":{"id":1}}`+"\n"), size/32+1)[:size]
	start := time.Now()
	for i := 0; i < count; i++ {
		ctx, cancel := bounded(time.Minute)
		_, err := srv.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Bucket),
			Key: aws.String(fmt.Sprintf("%s/%05d.jsonl", prefix, i)), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(size))})
		cancel()
		if err != nil {
			return 0, err
		}
	}
	return float64(size*count) / 1e6 / time.Since(start).Seconds(), nil
}

// s3Rows measures the S3 sink end to end for 100-byte and 1 KiB records.
func (b *bench) s3Rows() []row {
	srv := b.startS3()
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	var rows []row
	for _, c := range []struct{ size, n int }{{100, 400_000}, {1024, 120_000}} {
		topic := fmt.Sprintf("s3bench.r%d", c.size)
		b.logf("s3: writing %d records of %d B to %s", c.n, c.size, topic)
		b.must(fill(br.Addr(), []string{topic}, c.n, c.size))

		// Two interleaved rounds each, so machine noise hits both alike.
		const rounds = 2
		var bareT, sinkT time.Duration
		prefix := fmt.Sprintf("e2e-%d", c.size)
		for i := 0; i < rounds; i++ {
			t, err := bareConsume(br.Addr(), topic, c.n)
			b.must(err)
			bareT += t
			sink, err := newS3Sink(targetOf(srv), map[string]any{"prefix": fmt.Sprintf("%s/%d", prefix, i), "max_file_size": "8MiB", "output_format": "json_lines", "include_metadata": true})
			b.must(err)
			st := b.sinkRun(br.Addr(), sink, `s3bench\.r`+fmt.Sprint(c.size), c.n, 10000)
			sinkT += st
			b.logf("s3: round %d: bare consumer %.0f rec/s, sink %.0f rec/s", i+1, float64(c.n)/t.Seconds(), float64(c.n)/st.Seconds())
		}
		bare := float64(rounds*c.n) / bareT.Seconds()
		rate := float64(rounds*c.n) / sinkT.Seconds()
		ctx, cancel := bounded(time.Minute)
		objs, err := srv.List(ctx, prefix+"/")
		cancel()
		b.must(err)
		var total int64
		for _, o := range objs {
			total += o.Size
		}
		mbs := float64(total) / 1e6 / sinkT.Seconds()
		objs = objs[:len(objs)/rounds]
		b.logf("s3: sink %.0f rec/s, %.1f MB/s into %d objects", rate, mbs, len(objs))

		put, err := putRate(srv, fmt.Sprintf("put-%d", c.size), 8<<20, 12)
		b.must(err)
		b.logf("s3: raw PutObject of 8 MiB objects %.1f MB/s", put)
		label := fmt.Sprintf("%d B", c.size)
		if c.size == 1024 {
			label = "1 KiB"
		}
		rows = append(rows,
			row{Name: "S3 sink end to end, " + label + " records", Value: rate, Unit: "rec/s",
				BaseName: "bare confluent-kafka-go consumer", BaseValue: bare, BaseUnit: "rec/s", Ratio: rate / bare,
				Note: fmt.Sprintf("%dk records x %d rounds, json_lines+metadata, batch_length 10000", c.n/1000, rounds)},
			row{Name: "S3 sink end to end, " + label + " records", Value: mbs, Unit: "MB/s",
				BaseName: "raw PutObject, 8 MiB objects", BaseValue: put, BaseUnit: "MB/s", Ratio: mbs / put,
				Note: fmt.Sprintf("%d objects per round written by the sink", len(objs))})
	}
	return rows
}
