package s3sink

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// testMetrics records what the sink reports, by metric name.
type testMetrics struct {
	mu     sync.Mutex
	values map[string]float64
	counts map[string]int
}

func newTestMetrics() *testMetrics {
	return &testMetrics{values: map[string]float64{}, counts: map[string]int{}}
}

type testMetric struct {
	m    *testMetrics
	name string
}

func (t testMetric) Add(d float64) {
	t.m.mu.Lock()
	t.m.values[t.name] += d
	t.m.mu.Unlock()
}
func (t testMetric) Set(v float64) {
	t.m.mu.Lock()
	t.m.values[t.name] = v
	t.m.values[t.name+"_max"] = max(t.m.values[t.name+"_max"], v)
	t.m.mu.Unlock()
}
func (t testMetric) Observe(v float64) {
	t.m.mu.Lock()
	t.m.counts[t.name]++
	t.m.values[t.name+"_sum"] += v
	t.m.mu.Unlock()
}
func (m *testMetrics) Counter(name, _ string) sdk.Counter { return testMetric{m, name} }
func (m *testMetrics) Gauge(name, _ string) sdk.Gauge     { return testMetric{m, name} }
func (m *testMetrics) Histogram(name, _ string, _ []float64) sdk.Histogram {
	return testMetric{m, name}
}
func (m *testMetrics) get(name string) float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.values[name]
}

type harness struct {
	t       *testing.T
	srv     *s3test.Server
	proxy   *faultproxy.Proxy
	sink    *Sink
	metrics *testMetrics
}

// newHarness starts a real S3 server, a fault proxy in front of it, and an
// open sink that talks through the proxy.
func newHarness(t *testing.T, mod func(*options)) *harness {
	t.Helper()
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	o := defaultOptions()
	o.Bucket = srv.Bucket
	o.Region = s3test.Region
	o.Endpoint = proxy.URL
	o.AccessKeyID = srv.AccessKey
	o.SecretAccessKey = srv.SecretKey
	o.PathStyle = true
	o.RetryDelay = time.Millisecond
	if mod != nil {
		mod(&o)
	}
	h := &harness{t: t, srv: srv, proxy: proxy, metrics: newTestMetrics()}
	h.sink = newSink(o, sinkEnv("s3test", h.metrics))
	if err := h.sink.Open(context.Background()); err != nil {
		t.Fatalf("Open: %v\n%s", err, srv.Logs())
	}
	proxy.ResetLog()
	return h
}

// settle waits until no upload is queued or running.
func (h *harness) settle() { h.sink.settle() }

func (s *Sink) settle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for s.inFlight > 0 || s.queuedFiles() {
		s.cond.Wait()
	}
}

func (s *Sink) queuedFiles() bool {
	for _, p := range s.parts {
		for _, f := range p.pending {
			if f.state == fileQueued {
				return true
			}
		}
	}
	return false
}

// buffered is delivery = "buffered", the original spec's behaviour.
func buffered(o *options) { o.Buffered = true }

// dataPuts counts PUTs of data objects (not markers, not the probe).
func (h *harness) dataPuts() int {
	n := 0
	for _, e := range h.proxy.Log() {
		if e.Method == http.MethodPut && !strings.HasSuffix(e.Path, LostSuffix) && !strings.HasSuffix(e.Path, ProbeKey) {
			n++
		}
	}
	return n
}

func records(topic string, from, n int) []sdk.Record {
	out := make([]sdk.Record, n)
	for i := range out {
		off := int64(from + i)
		out[i] = sdk.Record{
			Topic: topic, Offset: off,
			Timestamp: stamp(int(off)),
			Key:       []byte(fmt.Sprintf("k%d", off)),
			Payload:   []byte(fmt.Sprintf(`{"n": %d}`, off)),
			Schema:    sdk.SchemaJSON,
		}
	}
	return out
}

// stamp is the timestamp of the record at offset off: 21:15:04 plus off
// milliseconds.
func stamp(off int) time.Time {
	return time.Date(2026, 9, 3, 21, 15, 4, 0, time.UTC).Add(time.Duration(off) * time.Millisecond)
}

func line(topic string, off int) string {
	return fmt.Sprintf(`{"offset":%d,"timestamp":"%s","topic":"%s","partition":0,"key":"%s","payload":{"n":%d}}`+"\n",
		off, stamp(off).Format("2006-01-02T15:04:05.000Z"), topic, b64(fmt.Sprintf("k%d", off)), off)
}

func lines(topic string, from, n int) string {
	var b strings.Builder
	for i := from; i < from+n; i++ {
		b.WriteString(line(topic, i))
	}
	return b.String()
}

func b64(s string) string { return strings.Trim(string(appendBase64(nil, []byte(s))), `"`) }

func key(dir string, first, last int, ext string) string {
	return fmt.Sprintf("%s/00000-%020d-%020d.%s", dir, first, last, ext)
}

func (h *harness) keys() []string { return h.srv.Keys(h.t) }

func (h *harness) wantKeys(want ...string) {
	h.t.Helper()
	got := h.keys()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		h.t.Fatalf("objects:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func (h *harness) wantBody(key, want string) {
	h.t.Helper()
	if got := string(h.srv.MustGet(h.t, key)); got != want {
		h.t.Fatalf("%s:\n%s\nwant:\n%s", key, got, want)
	}
}

func TestMessagesRotationAndCloseFlush(t *testing.T) {
	h := newHarness(t, func(o *options) {
		o.Prefix = "/raw/"
		o.RotateByMessages = true
		o.MaxMessages = 3
	})
	ctx := context.Background()
	if err := h.sink.Consume(ctx, records("orders.eu", 1000, 4)); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.Consume(ctx, records("orders.eu", 1004, 3)); err != nil {
		t.Fatal(err)
	}
	h.settle()
	dir := "raw/orders.eu/2026-09-03/21"
	h.wantKeys(key(dir, 1000, 1002, "jsonl"), key(dir, 1003, 1005, "jsonl"))
	h.wantBody(key(dir, 1000, 1002, "jsonl"), lines("orders.eu", 1000, 3))
	h.wantBody(key(dir, 1003, 1005, "jsonl"), lines("orders.eu", 1003, 3))
	if err := h.sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(key(dir, 1000, 1002, "jsonl"), key(dir, 1003, 1005, "jsonl"), key(dir, 1006, 1006, "jsonl"))
	h.wantBody(key(dir, 1006, 1006, "jsonl"), lines("orders.eu", 1006, 1))
	if got := h.dataPuts(); got != 3 {
		t.Fatalf("%d PutObject requests, want 3 (one per file)", got)
	}
	for name, want := range map[string]float64{
		"s3_sink_records_buffered_total": 7, "s3_sink_records_uploaded_total": 7, "s3_sink_files_uploaded_total": 3,
		"s3_sink_records_lost_total": 0, "s3_sink_open_files": 0,
		"s3_sink_bytes_uploaded_total": float64(len(lines("orders.eu", 1000, 7))),
	} {
		if got := h.metrics.get(name); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if n := h.metrics.counts["s3_sink_upload_duration_seconds"]; n != 3 {
		t.Errorf("upload latency observed %d times", n)
	}
}

func TestSizeRotation(t *testing.T) {
	one := len(line("t", 10))
	h := newHarness(t, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.MaxFileSize = int64(2*one + 1) // a file rotates at its third record
	})
	ctx := context.Background()
	if err := h.sink.Consume(ctx, records("t", 10, 8)); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.wantKeys(key("t", 10, 12, "jsonl"), key("t", 13, 15, "jsonl"))
	h.wantBody(key("t", 13, 15, "jsonl"), lines("t", 13, 3))
	// Nothing appears until a file rotates (Troubleshooting: "Nothing
	// appears in the bucket"); Close uploads the rest.
	if err := h.sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(key("t", 10, 12, "jsonl"), key("t", 13, 15, "jsonl"), key("t", 16, 17, "jsonl"))
	// Bounded buffers: capacity never beyond max_file_size plus a record.
}

func TestFormatsEndToEnd(t *testing.T) {
	for _, c := range []struct {
		fm   format
		ext  string
		body string
	}{
		{formatJSONArray, "json", `[{"payload":{"n":1}},{"payload":{"n":2}}]`},
		{formatRaw, "bin", `{"n": 1}{"n": 2}`},
		{formatJSONLines, "jsonl", "{\"payload\":{\"n\":1}}\n{\"payload\":{\"n\":2}}\n"},
	} {
		t.Run(c.ext, func(t *testing.T) {
			h := newHarness(t, func(o *options) {
				o.Format = c.fm
				o.IncludeMetadata = false
				o.PathTemplate = mustTemplate(t, "{topic_segment[-1]}/p{partition}")
			})
			if err := h.sink.Consume(context.Background(), records("a.b", 1, 2)); err != nil {
				t.Fatal(err)
			}
			if err := h.sink.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			k := key("b/p0", 1, 2, c.ext)
			h.wantKeys(k)
			h.wantBody(k, c.body)
		})
	}
}

func TestCloseFlushesEveryBuffer(t *testing.T) {
	h := newHarness(t, func(o *options) { o.PathTemplate = mustTemplate(t, "{topic}/{partition}") })
	batch := append(records("a", 0, 2), records("b", 5, 1)...)
	p1 := records("a", 7, 2)
	for i := range p1 {
		p1[i].Partition = 1
	}
	batch = append(batch, p1...)
	if err := h.sink.Consume(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if len(h.keys()) != 0 {
		t.Fatal("uploaded before rotation")
	}
	if err := h.sink.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.wantKeys("a/0/00000-00000000000000000000-00000000000000000001.jsonl",
		"a/1/00001-00000000000000000007-00000000000000000008.jsonl",
		"b/0/00000-00000000000000000005-00000000000000000005.jsonl")
	if err := h.sink.Consume(context.Background(), batch); err == nil {
		t.Fatal("Consume after Close accepted")
	}
}

func messages(n int) func(*options) {
	return func(o *options) {
		o.RotateByMessages = true
		o.MaxMessages = n
		o.PathTemplate = pathTemplate{Source: "{topic}", Parts: []templatePart{{Name: "topic"}}}
	}
}

const s3Error = `<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>%s</Message></Error>`

func xmlFault(status int, code, msg string) faultproxy.Fault {
	return faultproxy.Fault{Status: status, Header: http.Header{"Content-Type": {"application/xml"}},
		Body: []byte(fmt.Sprintf(s3Error, code, msg))}
}

func TestRetriedFaults(t *testing.T) {
	for _, c := range []struct {
		name  string
		fault faultproxy.Fault
	}{
		{"503", xmlFault(503, "SlowDown", "Please reduce your request rate.")},
		{"500", xmlFault(500, "InternalError", "We encountered an internal error.")},
		{"429", xmlFault(429, "TooManyRequests", "Too many requests")},
		{"408", xmlFault(408, "RequestTimeout", "Request timeout")},
		{"reset", faultproxy.Fault{Reset: true}},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, messages(2))
			h.proxy.InjectMatching(dataPut, 1, c.fault)
			if err := h.sink.Consume(context.Background(), records("t", 0, 2)); err != nil {
				t.Fatalf("Consume: %v", err)
			}
			h.settle()
			k := key("t", 0, 1, "jsonl")
			h.wantKeys(k)
			h.wantBody(k, lines("t", 0, 2))
			if got := h.dataPuts(); got != 2 {
				t.Fatalf("%d PutObject requests, want 2", got)
			}
			if got := h.metrics.get("s3_sink_upload_retries_total"); got != 1 {
				t.Fatalf("retries = %v", got)
			}
		})
	}
}

func (h *harness) marker(k string) LostMarker {
	h.t.Helper()
	var m LostMarker
	body := h.srv.MustGet(h.t, k+LostSuffix)
	if err := json.Unmarshal(body, &m); err != nil {
		h.t.Fatalf("marker %s: %v: %s", k, err, body)
	}
	return m
}

func TestForbiddenIsNotRetried(t *testing.T) {
	h := newHarness(t, func(o *options) { messages(3)(o); buffered(o) })
	h.proxy.Inject(1, xmlFault(403, "AccessDenied", "Access Denied"))
	err := h.sink.Consume(context.Background(), records("t", 40, 3))
	if err == nil || !strings.Contains(err.Error(), "S3 PutObject returned non-retriable status 403") {
		t.Fatalf("Consume error = %v", err)
	}
	if got := h.dataPuts(); got != 1 {
		t.Fatalf("%d PutObject requests, want 1", got)
	}
	k := key("t", 40, 42, "jsonl")
	h.wantKeys(k + LostSuffix)
	m := h.marker(k)
	if m.Key != k || m.Bucket != h.srv.Bucket || m.Topic != "t" || m.FirstOffset != 40 || m.LastOffset != 42 ||
		m.RecordCount != 3 || m.Attempts != 1 || !strings.Contains(m.Error, "non-retriable status 403") {
		t.Fatalf("marker = %+v", m)
	}
	if got := h.metrics.get("s3_sink_records_lost_total"); got != 3 {
		t.Fatalf("lost = %v", got)
	}
	// The file is gone from memory: Close uploads nothing more.
	if err := h.sink.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(k + LostSuffix)
}

func TestAllAttemptsFail(t *testing.T) {
	h := newHarness(t, func(o *options) {
		messages(4)(o)
		buffered(o)
		o.MaxAttempts = 3
	})
	data := func(r *http.Request) bool {
		return r.Method == http.MethodPut && !strings.HasSuffix(r.URL.Path, LostSuffix)
	}
	h.proxy.InjectMatching(data, -1, xmlFault(503, "ServiceUnavailable", "down"))
	ctx := context.Background()
	// The first batch stays buffered; the second crosses the threshold.
	if err := h.sink.Consume(ctx, records("t", 0, 2)); err != nil {
		t.Fatal(err)
	}
	second := records("t", 2, 3)
	err := h.sink.Consume(ctx, second)
	if err == nil || !strings.Contains(err.Error(), "failed after 3 attempt(s)") {
		t.Fatalf("Consume error = %v", err)
	}
	if got := h.dataPuts(); got != 3 {
		t.Fatalf("%d PutObject requests, want 3", got)
	}
	k := key("t", 0, 3, "jsonl")
	h.wantKeys(k + LostSuffix)
	m := h.marker(k)
	if m.FirstOffset != 0 || m.LastOffset != 3 || m.RecordCount != 4 || m.Attempts != 3 {
		t.Fatalf("marker = %+v", m)
	}
	if got := h.metrics.get("s3_sink_records_lost_total"); got != 4 {
		t.Fatalf("lost = %v", got)
	}
	if got := h.metrics.get("s3_sink_files_lost_total"); got != 1 {
		t.Fatalf("files lost = %v", got)
	}
	// The runtime redelivers the current batch: records 2-4 land, 0-1
	// (committed with the first batch) do not come back.
	h.proxy.Clear()
	if err := h.sink.Consume(ctx, second); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(k+LostSuffix, key("t", 2, 4, "jsonl"))
	h.wantBody(key("t", 2, 4, "jsonl"), lines("t", 2, 3))
}

// TestTooFewSegmentsRefused: a record whose topic lacks the segment path_template
// asks for is refused before it is buffered, so nothing is lost; the other
// topics go on.
func TestTooFewSegmentsRefused(t *testing.T) {
	for _, b := range []bool{false, true} {
		h := newHarness(t, func(o *options) {
			messages(2)(o)
			o.Buffered = b
			o.PathTemplate = mustTemplate(t, "{topic_segment[1]}")
		})
		ctx := context.Background()
		err := h.sink.Consume(ctx, records("orders", 0, 1))
		if err == nil || !strings.Contains(err.Error(), "topic 'orders' has 1 segment(s)") ||
			!strings.Contains(err.Error(), "record orders/0@0 cannot be written") {
			t.Fatalf("err = %v", err)
		}
		if got := h.metrics.get("s3_sink_records_lost_total") + h.metrics.get("s3_sink_records_buffered_total"); got != 0 {
			t.Fatalf("lost + buffered = %v", got)
		}
		if d := h.sink.Durable()[sdk.TopicPartition{Topic: "orders"}]; d != 0 {
			t.Fatalf("durable = %d, want 0", d)
		}
		if err := h.sink.Consume(ctx, records("orders.eu", 0, 2)); err != nil {
			t.Fatal(err)
		}
		h.settle()
		h.wantKeys(key("eu", 0, 1, "jsonl"))
	}
}

// TestFilesAcrossChunks uploads files that span many chunks, including a
// record larger than a chunk, and checks the bodies byte for byte.
func TestFilesAcrossChunks(t *testing.T) {
	h := newHarness(t, func(o *options) {
		o.MaxFileSize = 64 << 10 // 16 KiB chunks
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.IncludeHeaders = true
	})
	recs := benchRecords(300, 1000)
	recs[150].Payload = []byte(`"` + strings.Repeat("é", 20000) + `"`) // 40 KB, bigger than a chunk
	recs[151].Schema = sdk.SchemaText
	recs[152].Headers = []sdk.Header{{Key: "h", Value: []byte{0xff}}}
	h.consumeClose(recs, 7)
	want := h.filesOf(recs, 64<<10, func(k string, body []byte) { h.wantBody(k, string(body)) })
	h.wantKeys(want...)
	if len(want) < 5 {
		t.Fatalf("only %d files", len(want))
	}
}

// consumeClose consumes recs (of orders.eu, from offset 1000) in batches
// of n, then closes the sink.
func (h *harness) consumeClose(recs []sdk.Record, n int) {
	h.t.Helper()
	ctx := context.Background()
	for i := 0; i < len(recs); i += n {
		if err := h.sink.Consume(ctx, recs[i:min(i+n, len(recs))]); err != nil {
			h.t.Fatal(err)
		}
	}
	if err := h.sink.Close(ctx); err != nil {
		h.t.Fatal(err)
	}
}

// filesOf rebuilds the JSON-lines files of recs (of orders.eu, from offset
// 1000) cut at maxSize bytes, with one contiguous buffer, calls each with
// every key and body, and returns the keys.
func (h *harness) filesOf(recs []sdk.Record, maxSize int, each func(key string, body []byte)) []string {
	f := newFormatter(&h.sink.opts)
	var keys []string
	var cur []byte
	first := 0
	for i := range recs {
		cur = f.appendRecord(cur, &recs[i], len(cur) == 0, metaTail("orders.eu", 0))
		if len(cur) >= maxSize || i == len(recs)-1 {
			keys = append(keys, key("orders.eu", 1000+first, 1000+i, "jsonl"))
			each(keys[len(keys)-1], cur)
			cur, first = nil, i+1
		}
	}
	return keys
}

// TestSlowServerTimesOutAndRetries delays the first PutObject past the
// attempt timeout: the attempt is abandoned and retried.
func TestSlowServerTimesOutAndRetries(t *testing.T) {
	h := newHarness(t, messages(2))
	h.sink.attemptTimeout = func(int64) time.Duration { return 300 * time.Millisecond }
	h.proxy.InjectMatching(dataPut, 1, faultproxy.Fault{Delay: 3 * time.Second})
	if err := h.sink.Consume(context.Background(), records("t", 0, 2)); err != nil {
		t.Fatal(err)
	}
	h.settle()
	h.wantKeys(key("t", 0, 1, "jsonl"))
	if got := h.metrics.get("s3_sink_upload_retries_total"); got != 1 {
		t.Fatalf("retries = %v", got)
	}
}

// TestStopDuringRetriesStillWritesMarker (buffered) ends the uploads'
// context, as Close does when its deadline passes, while the sink waits to
// retry: the upload stops, the marker is still written.
func TestStopDuringRetriesStillWritesMarker(t *testing.T) {
	h := newHarness(t, func(o *options) { messages(1)(o); buffered(o); o.RetryDelay = time.Hour })
	h.proxy.InjectMatching(dataPut, -1, xmlFault(503, "SlowDown", "slow down"))
	h.sink.retry.sleep = func(ctx context.Context, d time.Duration) error {
		h.sink.cancel() // the runtime stops while the sink waits an hour
		return sleepCtx(ctx, d)
	}
	err := h.sink.Consume(context.Background(), records("t", 0, 1))
	if err == nil || !strings.Contains(err.Error(), "stopped while waiting to retry") {
		t.Fatalf("err = %v", err)
	}
	k := key("t", 0, 0, "jsonl")
	h.wantKeys(k + LostSuffix)
	if m := h.marker(k); m.Attempts != 1 || m.RecordCount != 1 {
		t.Fatalf("marker = %+v", m)
	}
}

// TestOnlyTheSinkRetries checks that the SDK's own retryer is off: with
// max_attempts = 1 a 503 is sent once, and path-style addressing puts the
// bucket in the path.
func TestOnlyTheSinkRetries(t *testing.T) {
	h := newHarness(t, func(o *options) { messages(1)(o); buffered(o); o.MaxAttempts = 1 })
	h.proxy.InjectMatching(dataPut, 1, xmlFault(503, "SlowDown", "slow down"))
	err := h.sink.Consume(context.Background(), records("t", 0, 1))
	if err == nil || !strings.Contains(err.Error(), "failed after 1 attempt(s)") {
		t.Fatalf("err = %v", err)
	}
	if got := h.dataPuts(); got != 1 {
		t.Fatalf("%d PutObject requests for one attempt: the SDK retried", got)
	}
	for _, e := range h.proxy.Log() {
		if !strings.HasPrefix(e.Path, "/"+h.srv.Bucket+"/") {
			t.Fatalf("request path %s is not path-style", e.Path)
		}
	}
}
