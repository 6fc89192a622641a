package s3sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// dataPut matches PutObject requests for data files: not the probe, not a
// marker.
func dataPut(r *http.Request) bool {
	return r.Method == http.MethodPut && !strings.HasSuffix(r.URL.Path, LostSuffix) &&
		!strings.HasSuffix(r.URL.Path, "/"+ProbeKey)
}

// payloads reads every json_lines object in the bucket, in key order, and
// returns each line's payload.
func payloads(t testing.TB, srv *s3test.Server, bucket string) [][]byte {
	t.Helper()
	ctx := context.Background()
	objs, err := srv.ListIn(ctx, bucket, "")
	if err != nil {
		t.Fatal(err)
	}
	var out [][]byte
	for _, o := range objs {
		k := o.Key
		if strings.HasSuffix(k, LostSuffix) {
			continue
		}
		body, err := srv.GetIn(ctx, bucket, k)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<26)
		for sc.Scan() {
			var obj struct {
				Payload json.RawMessage `json:"payload"`
			}
			if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
				t.Fatalf("%s: %v: %s", k, err, sc.Bytes())
			}
			out = append(out, obj.Payload)
		}
	}
	return out
}

// TestConformance runs the shared sink conformance suite against the S3
// sink (exactly_once, a DeferredSink) and a real server, breaking the
// server with the fault proxy. Files hold three records, so a failed file
// holds records of earlier batches: they are kept, not lost.
func TestConformance(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	bucket := srv.Bucket
	n := 0
	sdktest.TestSink(t, sdktest.SinkHarness{
		Setup: func(t *testing.T) {
			n++
			bucket = fmt.Sprintf("%s-%d", srv.Bucket, n)
			if err := srv.CreateBucket(context.Background(), bucket); err != nil {
				t.Fatal(err)
			}
			proxy.Clear()
		},
		New: func(t *testing.T) (sdk.Sink, error) {
			o := defaultOptions()
			o.Bucket, o.Region, o.Endpoint, o.PathStyle = bucket, s3test.Region, proxy.URL, true
			o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
			o.RotateByMessages, o.MaxMessages = true, 3
			o.MaxAttempts, o.RetryDelay = 2, time.Millisecond
			return newSink(o, sdktest.Env(t)), nil
		},
		Written: func(t *testing.T) [][]byte {
			return payloads(t, srv, bucket)
		},
		Break: func(t *testing.T) func() {
			proxy.InjectMatching(dataPut, -1, xmlFault(503, "ServiceUnavailable", "down"))
			return proxy.Clear
		},
	})
}

func produceJSON(t *testing.T, addr, topic string, from, n, size int) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, n)
	for i := range recs {
		v := fmt.Sprintf(`{"n":%d,"pad":"`, from+i)
		v += strings.Repeat("x", max(0, size-len(v)-2)) + `"}`
		recs[i] = &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(from + i)), Value: []byte(v),
			Timestamp: time.Date(2026, 9, 3, 21, 0, 0, 0, time.UTC).Add(time.Duration(from+i) * time.Second)}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
}

// runSinkLoop runs the runtime's sink loop with sink over topics until ctx
// ends.
func runSinkLoop(ctx context.Context, addr string, topics []definition.Topics, sink sdk.Sink, tr *status.Tracker) error {
	return sinkloop.Run(ctx, sinkloop.Config{
		Key: "bench", Topics: topics, Sink: sink, BootstrapServers: addr, Tracker: tr,
		GroupID:    fmt.Sprintf("bench-%d", time.Now().UnixNano()),
		Properties: map[string]string{"auto.offset.reset": "earliest"},
	})
}

// runLoop runs the runtime's sink loop with sink until stop is called.
func runLoop(t *testing.T, b *broker.Broker, topics []definition.Topics, sink sdk.Sink, tr *status.Tracker) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sinkloop.Run(ctx, sinkloop.Config{
			Key: "orders_s3", Topics: topics, Sink: sink, BootstrapServers: b.Addr(), Tracker: tr,
			Logger: sdktest.Env(t).Logger, RetryDelay: 10 * time.Millisecond, MaxRetryDelay: 100 * time.Millisecond,
			Properties: map[string]string{"auto.offset.reset": "earliest"},
		})
	}()
	stopped := false
	stop = func() error {
		if stopped {
			return nil
		}
		stopped = true
		cancel()
		select {
		case err := <-done:
			if errors.Is(err, context.Canceled) {
				return nil
			}
			return err
		case <-time.After(60 * time.Second):
			return errors.New("the sink loop did not stop")
		}
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// watchSink records the highest offset per topic of successful Consume
// calls.
type watchSink struct {
	*Sink // a DeferredSink to the loop
	mu    sync.Mutex
	upTo  map[string]int64
}

func (w *watchSink) Consume(ctx context.Context, batch []sdk.Record) error {
	if err := w.Sink.Consume(ctx, batch); err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, r := range batch {
		if o, ok := w.upTo[r.Topic]; !ok || r.Offset > o {
			w.upTo[r.Topic] = r.Offset
		}
	}
	return nil
}

func (w *watchSink) done(topic string, last int64) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	o, ok := w.upTo[topic]
	return ok && o >= last
}

// TestEndToEnd produces to the embedded broker, runs the runtime's sink
// loop with the S3 sink, and checks the objects: keys, bodies, the
// graceful stop flushing, and a failed upload kept and retried.
func TestEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs librdkafka through the sink loop; skipped with -short")
	}
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true, SeedTopics: []string{"orders.eu", "orders.us"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	produceJSON(t, b.Addr(), "orders.eu", 0, 25, 40)
	produceJSON(t, b.Addr(), "orders.us", 0, 3, 40)

	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, proxy.URL, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.Prefix = "raw"
	o.RotateByMessages, o.MaxMessages = true, 10
	o.MaxAttempts, o.RetryDelay = 2, time.Millisecond
	m := newTestMetrics()
	sink := newSink(o, sdk.Env{Key: "orders_s3", Metrics: m, Logger: sdktest.Env(t).Logger})
	tr := status.New(string(sdk.KindSink), "orders_s3", nil)
	topics := []definition.Topics{{Pattern: `orders\..*`, Schema: "json", BatchLength: 7, PollInterval: "20ms"}}

	// The upload of orders.eu's first file fails a whole round: the file
	// is kept and retried (the files after it upload beside it).
	firstEU := func(r *http.Request) bool {
		return dataPut(r) && strings.Contains(r.URL.Path, "/orders.eu/") && strings.Contains(r.URL.Path, "-00000000000000000000-")
	}
	proxy.InjectMatching(firstEU, 2, xmlFault(500, "InternalError", "boom"))
	w := &watchSink{Sink: sink, upTo: map[string]int64{}}
	stop := runLoop(t, b, topics, w, tr)
	sdktest.WaitFor(t, time.Minute, "every record consumed", func() bool { return w.done("orders.eu", 24) && w.done("orders.us", 2) })
	if err := stop(); err != nil { // graceful stop: Close flushes
		t.Fatal(err)
	}
	keys := srv.Keys(t)
	var eu, us, lost []string
	for _, k := range keys {
		switch {
		case strings.HasSuffix(k, LostSuffix):
			lost = append(lost, k)
		case strings.HasPrefix(k, "raw/orders.eu/2026-09-03/21/"):
			eu = append(eu, k)
		case strings.HasPrefix(k, "raw/orders.us/2026-09-03/21/"):
			us = append(us, k)
		default:
			t.Errorf("unexpected object %s", k)
		}
	}
	if len(lost) != 0 {
		t.Fatalf("lost markers in exactly_once: %v", lost)
	}
	if len(us) != 1 || !strings.HasSuffix(us[0], "/00000-00000000000000000000-00000000000000000002.jsonl") {
		t.Fatalf("orders.us objects: %v", us)
	}
	// The failed file was kept and retried: every orders.eu record is in
	// exactly one object.
	got := map[int]int{}
	for _, k := range eu {
		sc := bufio.NewScanner(bytes.NewReader(srv.MustGet(t, k)))
		for sc.Scan() {
			var obj struct {
				Offset  int64 `json:"offset"`
				Payload struct {
					N int `json:"n"`
				} `json:"payload"`
			}
			if err := json.Unmarshal(sc.Bytes(), &obj); err != nil {
				t.Fatal(err)
			}
			if int64(obj.Payload.N) != obj.Offset {
				t.Fatalf("offset %d carries record %d", obj.Offset, obj.Payload.N)
			}
			got[obj.Payload.N]++
		}
	}
	for i := 0; i < 25; i++ {
		if got[i] != 1 {
			t.Errorf("orders.eu record %d is in %d objects", i, got[i])
		}
	}
	if m.get("s3_sink_upload_failures_total") < 1 {
		t.Fatal("the injected failure did not fail an upload")
	}
	t.Logf("objects: %v", keys)
}
