package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// timedSink notes when the first batch arrives and how big it was and when
// Close returns, and stops the loop as soon as Consume has taken the n-th
// record.
type timedSink struct {
	sdk.Sink
	n    int
	stop context.CancelFunc

	mu         sync.Mutex
	got        int
	first      time.Time
	firstBatch int
	last       time.Time // when Consume took the n-th record
	closed     time.Time
}

func (t *timedSink) Consume(ctx context.Context, batch []sdk.Record) error {
	t.mu.Lock()
	if t.first.IsZero() {
		t.first, t.firstBatch = time.Now(), len(batch)
	}
	t.mu.Unlock()
	if err := t.Sink.Consume(ctx, batch); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.got += len(batch); t.got >= t.n {
		if t.last.IsZero() {
			t.last = time.Now()
		}
		t.stop()
	}
	return nil
}

func (t *timedSink) Close(ctx context.Context) error {
	err := t.Sink.Close(ctx)
	t.mu.Lock()
	t.closed = time.Now()
	t.mu.Unlock()
	return err
}

// SetTopics hands the blocks on to the sink when it takes them
// (sdk.TopicSchemas: the S3 sink's Parquet from Avro topics).
func (t *timedSink) SetTopics(topics []sdk.TopicSchema) error {
	if s, ok := t.Sink.(sdk.TopicSchemas); ok {
		return s.SetTopics(topics)
	}
	return nil
}

// deferredSink is what the S3 sink is to the loop, which commits what its
// Durable reports and applies its Health.
type deferredSink interface {
	sdk.DeferredSink
	sdk.Health
}

// timedDeferred is a timedSink over a deferredSink that is one too, so the
// loop runs the sink on its own path: a plain timedSink hid Durable, and
// the loop committed each batch as consumed.
type timedDeferred struct {
	*timedSink
	d deferredSink
}

func (t timedDeferred) Durable() map[sdk.TopicPartition]int64 { return t.d.Durable() }
func (t timedDeferred) Release(ctx context.Context, parts []sdk.TopicPartition) error {
	return t.d.Release(ctx, parts)
}
func (t timedDeferred) Health() error { return t.d.Health() }

var _ deferredSink = timedDeferred{}

// s3Target is where a sink writes.
type s3Target struct{ Endpoint, Bucket, AccessKey, SecretKey string }

func targetOf(srv *s3test.Server) s3Target {
	return s3Target{srv.Endpoint, srv.Bucket, srv.AccessKey, srv.SecretKey}
}

// newS3Sink builds the S3 sink from a plugin_config table.
func newS3Sink(srv s3Target, extra map[string]any) (sdk.Sink, error) {
	cfg := map[string]any{
		"bucket": srv.Bucket, "region": s3test.Region, "endpoint": srv.Endpoint,
		"access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey,
	}
	for k, v := range extra {
		cfg[k] = v
	}
	reg, ok := sdk.Lookup("libpicomq_connector_s3_sink")
	if !ok {
		return nil, fmt.Errorf("the S3 sink is not linked")
	}
	c, err := reg.Load(cfg, "PICO_BENCH_UNUSED_", func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	sink, err := reg.NewSink(c, sdk.Env{Key: "bench", Logger: quiet(), Metrics: sdk.DiscardMetrics})
	if err != nil {
		return nil, err
	}
	if _, ok := sink.(deferredSink); !ok {
		return nil, fmt.Errorf("the S3 sink (%T) is no longer a sdk.DeferredSink with Health: timedDeferred no longer matches it, and the bench would time it on the loop's path for plain sinks", sink)
	}
	return sink, nil
}

// startS3 starts versitygw (or MinIO) through s3test, with a clear error
// naming what to install. The server keeps its objects in /dev/shm when
// the machine has it: on disk, the kernel's write-back of one round's
// gigabyte throttled the next round (a 1 KiB sink round after a PutObject
// round ran at half the rate of one before it), so the rows measured the
// disk's state rather than the sink.
func (b *bench) startS3() *s3test.Server {
	parent := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		parent = "/dev/shm"
	}
	srv, err := s3test.New(b.tempDir(parent))
	if err != nil {
		b.must(fmt.Errorf("%v\n  (versitygw is needed: run `make tools`, or %s)", err, s3test.InstallVersitygw))
	}
	b.cleanups.Add(srv.Close)
	return srv
}

// storeOf names where srv keeps its objects: tmpfs or disk.
func storeOf(srv *s3test.Server) string {
	if strings.HasPrefix(srv.Dir, "/dev/shm/") {
		return "tmpfs"
	}
	return "disk"
}

// sinkRun is the function sinkRun; an error ends the bench.
func (b *bench) sinkRun(addr string, sink sdk.Sink, pattern string, n int, batch int) (int, time.Duration) {
	timed, t, err := sinkRun(addr, sink, pattern, n, batch)
	b.must(err)
	return timed, t
}

// sinkRunBlock is the function sinkRunBlock; an error ends the bench.
func (b *bench) sinkRunBlock(addr string, sink sdk.Sink, block definition.Topics, n int) (int, time.Duration) {
	timed, t, err := sinkRunBlock(addr, sink, block, n)
	b.must(err)
	return timed, t
}

// sinkRun runs the sink loop over topics until n records were consumed,
// then stops it (Close uploads what is buffered) and returns how many
// records it timed and the time from the first batch to the end of Close:
// the first batch's records are left out, as they were polled before the
// clock started, and so is the consumer's close after the sink's (its last
// commit and leaving the group). The sink cancels the loop from the
// Consume that takes the n-th record: the loop notices a stop between
// polls, and a bench that cancelled it from outside waited out an idle
// Poll of up to 100 ms after the last record, a tenth of a 100 B round.
func sinkRun(addr string, sink sdk.Sink, pattern string, n int, batch int) (int, time.Duration, error) {
	return sinkRunBlock(addr, sink, definition.Topics{Pattern: pattern, Schema: "json", BatchLength: batch, PollInterval: "100ms"}, n)
}

// sinkRunBlock is sinkRun over one [[topics]] block.
func sinkRunBlock(addr string, sink sdk.Sink, block definition.Topics, n int) (int, time.Duration, error) {
	ts, err := runSink(addr, sink, block, n)
	if err != nil {
		return 0, 0, err
	}
	return n - ts.firstBatch, ts.closed.Sub(ts.first), nil
}

// runSink runs the sink loop as sinkRunBlock does and returns the
// timedSink that timed it.
func runSink(addr string, sink sdk.Sink, block definition.Topics, n int) (*timedSink, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ts := &timedSink{Sink: sink, n: n, stop: cancel}
	var timed sdk.Sink = ts
	if d, ok := sink.(deferredSink); ok {
		timed = timedDeferred{ts, d}
	}
	tr := status.New("sink", "bench", nil)
	done := make(chan error, 1)
	go func() {
		done <- sinkloop.Run(ctx, sinkloop.Config{Key: "bench", Topics: []definition.Topics{block},
			Sink: timed, BootstrapServers: addr, Properties: consumerProps, GroupID: fmt.Sprintf("bench-%d", time.Now().UnixNano()), Logger: quiet(), Tracker: tr})
	}()
	select {
	case err := <-done:
		if ctx.Err() == nil {
			return nil, fmt.Errorf("sink loop stopped early: %v", err)
		}
		if err != nil {
			return nil, fmt.Errorf("sink loop: %w", err)
		}
	case <-time.After(3 * time.Minute):
		cancel()
		return nil, fmt.Errorf("sink: %d of %d records consumed after 3 minutes (last error %q)", tr.Counters.Consumed.Load(), n, tr.Snapshot().LastError)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts, nil
}

// putObjects uploads count objects of size bytes, inFlight at a time as the
// sink's max_in_flight uploads do, and returns the time they took.
func putObjects(srv *s3test.Server, prefix string, size, count, inFlight int) (time.Duration, error) {
	body := bytes.Repeat([]byte(`{"offset":1,"payload":{"id":1}}`+"\n"), size/32+1)[:size]
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	sem := make(chan struct{}, inFlight)
	for i := 0; i < count; i++ {
		sem <- struct{}{}
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			ctx, cancel := bounded(time.Minute)
			defer cancel()
			_, err := srv.Client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(srv.Bucket),
				Key: aws.String(fmt.Sprintf("%s/%05d.jsonl", prefix, i)), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(size))})
			if err != nil {
				mu.Lock()
				firstErr = cmp.Or(firstErr, err)
				mu.Unlock()
			}
		}(i)
	}
	wg.Wait()
	return time.Since(start), firstErr
}

// written sums the sizes of the objects under prefix/.
func (b *bench) written(srv *s3test.Server, prefix string) (size int64, objects int) {
	ctx, cancel := bounded(time.Minute)
	defer cancel()
	objs, err := srv.List(ctx, prefix+"/")
	b.must(err)
	for _, o := range objs {
		size += o.Size
	}
	return size, len(objs)
}

// cpuSeconds returns a clock of the CPU seconds of this process and the S3
// server together.
func (b *bench) cpuSeconds(srv *s3test.Server) func() float64 {
	return func() float64 {
		self, err := procstat.CPUSeconds(0)
		b.must(err)
		server, err := procstat.CPUSeconds(srv.PID())
		b.must(err)
		return self + server
	}
}

// sinkInFlight is the sink's default max_in_flight, the parallelism of the
// raw PutObject baseline.
const sinkInFlight = 4

// s3Rows measures the S3 sink end to end (delivery = "exactly_once", the
// default) for 100-byte and 1 KiB records against the binding limit
// measured in the same run: the lower of a bare consumer's records/s and
// raw PutObject bandwidth over the bytes the sink writes per record.
// s3FormatRows measures compression and Parquet.
func (b *bench) s3Rows() []row {
	srv := b.startS3()
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	var rows []row
	cpuSeconds := b.cpuSeconds(srv)
	// Each round writes more than max_buffer_size (256 MiB: 1.3M records
	// of 100 B, 400k of 1 KiB), so the sink runs as long with its buffer
	// full, paced by its uploads, as it fills it: a 1 KiB round of 120k
	// records (137 MB) fitted in the buffer, and the end of a round (the
	// last batch's poll_interval, the final upload) weighed a tenth of it,
	// as it did in 100 B rounds of 400k.
	for _, c := range []struct{ size, n int }{{100, 1_300_000}, {1024, 400_000}} {
		topic := fmt.Sprintf("s3bench.r%d", c.size)
		pattern := `s3bench\.r` + fmt.Sprint(c.size)
		b.logf("s3: writing %d records of %d B to %s", c.n, c.size, topic)
		b.must(fill(br.Addr(), []string{topic}, c.n, c.size))

		// Two rounds each of the three, interleaved, so machine noise hits
		// all alike; the sink and PutObject take turns to go first, since
		// the second one runs while the kernel writes back what the first
		// one wrote (PutObject measured after the sink's rounds swung from
		// 150 to 290k rec/s of 1 KiB from run to run, the sink's rate the
		// same in each). A PutObject round writes as many bytes as a sink's
		// round (at least 12 objects): a short burst into the store's page
		// cache runs faster than the sink's sustained writes.
		const rounds = 2
		var bareT, sinkT time.Duration
		var bareCPU, sinkCPU, putCPU, putMB, putS float64
		var total int64
		var objects, putObjs, sinkN int
		prefix := fmt.Sprintf("e2e-%d", c.size)
		for i := 0; i < rounds; i++ {
			c0 := cpuSeconds()
			t, err := bareConsume(br.Addr(), topic, c.n)
			b.must(err)
			bareT, bareCPU = bareT+t, bareCPU+cpuSeconds()-c0
			var sinkRate float64
			var size int64
			sinkRound := func() {
				sinkPrefix := fmt.Sprintf("%s/%d", prefix, i)
				sink, err := newS3Sink(targetOf(srv), map[string]any{"prefix": sinkPrefix, "max_file_size": "8MiB", "output_format": "json_lines", "include_metadata": true})
				b.must(err)
				c0 := cpuSeconds()
				timed, t := b.sinkRun(br.Addr(), sink, pattern, c.n, 10000)
				sinkN, sinkT, sinkCPU, sinkRate = sinkN+timed, sinkT+t, sinkCPU+cpuSeconds()-c0, float64(timed)/t.Seconds()
				var objs int
				size, objs = b.written(srv, sinkPrefix)
				total, objects = total+size, objects+objs
			}
			var putRate float64
			putRound := func(size int64) {
				n := max(12, int((size+8<<20-1)/(8<<20)))
				c0 := cpuSeconds()
				pt, err := putObjects(srv, fmt.Sprintf("put-%d/%d", c.size, i), 8<<20, n, sinkInFlight)
				b.must(err)
				putCPU += cpuSeconds() - c0
				mb := float64(n*(8<<20)) / 1e6
				putObjs, putMB, putS, putRate = putObjs+n, putMB+mb, putS+pt.Seconds(), mb/pt.Seconds()
			}
			if i%2 == 0 {
				sinkRound()
				putRound(size)
			} else {
				putRound(total / int64(i)) // the bytes of a sink's round so far
				sinkRound()
			}
			b.logf("s3: round %d: bare consumer %.0f rec/s, sink %.0f rec/s, PutObject %.0f MB/s", i+1, float64(c.n)/t.Seconds(), sinkRate, putRate)
		}
		bare := float64(rounds*c.n) / bareT.Seconds()
		rate := float64(sinkN) / sinkT.Seconds()
		perRec := float64(total) / float64(rounds*c.n)
		put := putMB / putS
		byPut := put * 1e6 / perRec
		// CPU per record, this process and the S3 server together: the
		// sink runs the consumer's work and the uploads' on the same cores,
		// which each baseline has to itself.
		records := float64(rounds * c.n)
		bareUS, sinkUS := bareCPU/records*1e6, sinkCPU/records*1e6
		putUS := putCPU / (putMB * 1e6 / perRec) * 1e6
		ceiling := float64(runtime.NumCPU()) / (bareUS + putUS) * 1e6
		limit, binding := bare, "bare confluent-kafka-go consumer"
		if byPut < bare {
			limit, binding = byPut, "raw PutObject / bytes per record"
		}
		b.logf("s3: sink %.0f rec/s into %d objects (%.0f B per record); bare consumer %.0f rec/s; PutObject %.1f MB/s = %.0f rec/s",
			rate, objects/rounds, perRec, bare, put, byPut)
		b.logf("s3: CPU per record (this process and the S3 server): bare consumer %.2f us, PutObject %.2f us, sink %.2f us; %d cores / (consumer + PutObject) = %.0f rec/s",
			bareUS, putUS, sinkUS, runtime.NumCPU(), ceiling)
		label := fmt.Sprintf("%d B", c.size)
		if c.size == 1024 {
			label = "1 KiB"
		}
		rows = append(rows, row{Name: "S3 sink end to end, " + label + " records", Value: rate, Unit: "rec/s",
			BaseName: "binding limit: " + binding, BaseValue: limit, BaseUnit: "rec/s", Ratio: rate / limit,
			Note: fmt.Sprintf("bare consumer %.0fk rec/s; PutObject %.0f MB/s (%d x 8 MiB in %d rounds, %d at once, S3 server on "+storeOf(srv)+") / %.0f B per record = %.0fk rec/s; %dk records x %d rounds, exactly_once, json_lines+metadata, fetch.queue.backoff.ms=10 for both; "+
				"CPU per record, bench and S3 server: consumer %.2f us + PutObject %.2f us, so %d cores carry both at most %.0fk rec/s (%.2f of the limit); the sink took %.2f us",
				bare/1000, put, putObjs, rounds, sinkInFlight, perRec, byPut/1000, c.n/1000, rounds, bareUS, putUS, runtime.NumCPU(), ceiling/1000, ceiling/limit, sinkUS)})
	}

	return rows
}

// fillHex writes n JSON records of size bytes to topic whose filler is
// random hex (4 bits of entropy per character).
func fillHex(addr, topic string, n, size int) error {
	return fillHexAs(addr, topic, n, size, nil)
}

// fillHexAs is fillHex with each record's JSON turned into the value
// encode returns (nil: the JSON).
func fillHexAs(addr, topic string, n, size int, encode func(json []byte) ([]byte, error)) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ProducerBatchMaxBytes(4<<20), kgo.ProducerLinger(2*time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := bounded(2 * time.Minute)
	defer cancel()
	rng := rand.New(rand.NewPCG(1, 2))
	raw := make([]byte, size/2)
	recs := make([]*kgo.Record, 0, 1000)
	for i := 0; i < n; i++ {
		for j := range raw {
			raw[j] = byte(rng.Uint32())
		}
		v := fmt.Sprintf(`{"id":%d,"event":"page_view","region":"region-%d","user":"user-%d","pad":"%s"}`, i, (i*7)%10, i%977, hex.EncodeToString(raw))
		value := []byte(v[:size-2] + `"}`)
		if encode != nil {
			if value, err = encode(value); err != nil {
				return err
			}
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: value})
		if len(recs) == cap(recs) || i == n-1 {
			if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
				return err
			}
			recs = recs[:0]
		}
	}
	return nil
}
