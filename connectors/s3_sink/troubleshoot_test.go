package s3sink

import (
	"context"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// openWith opens a sink against srv (through proxy when not nil) with
// options changed by mod, and returns Open's error.
func openWith(t *testing.T, srv *s3test.Server, proxy *faultproxy.Proxy, mod func(*options)) (*Sink, error) {
	t.Helper()
	o := defaultOptions()
	o.Bucket = srv.Bucket
	o.Region = s3test.Region
	o.Endpoint = srv.Endpoint
	if proxy != nil {
		o.Endpoint = proxy.URL
	}
	o.AccessKeyID = srv.AccessKey
	o.SecretAccessKey = srv.SecretKey
	o.PathStyle = true
	if mod != nil {
		mod(&o)
	}
	s := newSink(o, sinkEnv("t", sdk.DiscardMetrics))
	return s, s.Open(context.Background())
}

func closedPortURL(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return "http://" + addr
}

// TestTroubleshootingAtStart reproduces each row of the spec's
// Troubleshooting table that shows when the sink opens, with its message.
// The rows about the configuration (partial credentials, messages rotation
// without max_messages_per_file, a file too large) are the schema's rules,
// shown when the definition loads: TestTroubleshootingThroughLoad.
func TestTroubleshootingAtStart(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	connFailed := "S3 bucket '" + srv.Bucket + "' connectivity check failed"
	cases := []struct {
		name  string
		proxy bool
		setup func()
		mod   func(*options)
		want  string
	}{
		{name: "wrong bucket", mod: func(o *options) { o.Bucket = "no-such-bucket" },
			want: "S3 bucket 'no-such-bucket' connectivity check failed"},
		{name: "wrong endpoint", mod: func(o *options) { o.Endpoint = closedPortURL(t) }, want: connFailed},
		{name: "wrong credentials", mod: func(o *options) { o.SecretAccessKey = "wrong-secret-0123456789" }, want: connFailed},
		{name: "no PutObject permission", proxy: true,
			setup: func() { proxy.Inject(1, xmlFault(403, "AccessDenied", "Access Denied")) }, want: connFailed},
		{name: "no DeleteObject permission", proxy: true,
			setup: func() {
				proxy.InjectMatching(func(r *http.Request) bool { return r.Method == http.MethodDelete }, 1,
					xmlFault(403, "AccessDenied", "Access Denied"))
			}, want: connFailed + ": deleting .picomq-sink-probe"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var p *faultproxy.Proxy
			if c.proxy {
				p = proxy
				proxy.Clear()
			}
			if c.setup != nil {
				c.setup()
			}
			_, err := openWith(t, srv, p, c.mod)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Open error = %v\nwant it to contain %q", err, c.want)
			}
			if strings.Contains(err.Error(), srv.SecretKey) {
				t.Fatal("secret in the error")
			}
		})
	}
	// A good Open leaves no probe object behind.
	if _, err := openWith(t, srv, nil, nil); err != nil {
		t.Fatal(err)
	}
	if keys := srv.Keys(t); len(keys) != 0 {
		t.Fatalf("objects after Open: %v", keys)
	}
}

// TestTroubleshootingWhileRunning reproduces the rows that show after
// start: a 403 on upload, .lost objects, and an empty bucket before any
// file rotated.
func TestTroubleshootingWhileRunning(t *testing.T) {
	h := newHarness(t, func(o *options) { messages(2)(o); buffered(o) })
	ctx := context.Background()
	// Nothing appears in the bucket: no file has rotated yet.
	if err := h.sink.Consume(ctx, records("t", 0, 1)); err != nil {
		t.Fatal(err)
	}
	h.wantKeys()
	// S3 PutObject returned non-retriable status 403, and a .lost object.
	h.proxy.Inject(1, xmlFault(403, "AccessDenied", "Access Denied"))
	err := h.sink.Consume(ctx, records("t", 1, 1))
	if err == nil || !strings.Contains(err.Error(), "S3 PutObject returned non-retriable status 403") {
		t.Fatalf("err = %v", err)
	}
	k := key("t", 0, 1, "jsonl")
	h.wantKeys(k + LostSuffix)
	if m := h.marker(k); m.FirstOffset != 0 || m.LastOffset != 1 || m.RecordCount != 2 {
		t.Fatalf("marker = %+v", m)
	}
}

// TestReplay reproduces each row of the spec's Replay table, in buffered
// delivery (the spec's); one row changed: a redelivery is skipped.
func TestReplay(t *testing.T) {
	ctx := context.Background()
	messages := func(n int) func(*options) { return func(o *options) { messages(n)(o); buffered(o) } }
	t.Run("crash with records still in the buffer", func(t *testing.T) {
		h := newHarness(t, messages(3))
		if err := h.sink.Consume(ctx, records("t", 0, 2)); err != nil { // confirmed, buffered
			t.Fatal(err)
		}
		// Crash: the sink is dropped without Close. The runtime restarts
		// from the committed offset 2; records 0 and 1 are never redelivered.
		s2, err := openWith(t, h.srv, nil, messages(3))
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.Consume(ctx, records("t", 2, 3)); err != nil {
			t.Fatal(err)
		}
		h.wantKeys(key("t", 2, 4, "jsonl"))
	})
	t.Run("redelivered batch, file still in memory", func(t *testing.T) {
		h := newHarness(t, messages(10))
		batch := records("t", 0, 2)
		if err := h.sink.Consume(ctx, batch); err != nil {
			t.Fatal(err)
		}
		if err := h.sink.Consume(ctx, batch); err != nil { // redelivery
			t.Fatal(err)
		}
		if err := h.sink.Close(ctx); err != nil {
			t.Fatal(err)
		}
		k := key("t", 0, 1, "jsonl")
		h.wantKeys(k)
		h.wantBody(k, lines("t", 0, 2)) // once: records below the next offset are skipped
	})
	t.Run("redelivered batch, file already uploaded", func(t *testing.T) {
		h := newHarness(t, messages(3))
		if err := h.sink.Consume(ctx, records("t", 0, 2)); err != nil {
			t.Fatal(err)
		}
		if err := h.sink.Consume(ctx, records("t", 2, 2)); err != nil { // uploads 0-2
			t.Fatal(err)
		}
		// Crash before the commit of the second batch: it is redelivered.
		s2, err := openWith(t, h.srv, nil, messages(3))
		if err != nil {
			t.Fatal(err)
		}
		if err := s2.Consume(ctx, append(records("t", 2, 2), records("t", 4, 1)...)); err != nil {
			t.Fatal(err)
		}
		h.wantKeys(key("t", 0, 2, "jsonl"), key("t", 2, 4, "jsonl")) // offset 2 in both
		h.wantBody(key("t", 2, 4, "jsonl"), lines("t", 2, 3))
	})
	t.Run("upload failed after max_attempts", func(t *testing.T) {
		h := newHarness(t, func(o *options) { messages(2)(o); o.MaxAttempts = 2 })
		h.proxy.InjectMatching(func(r *http.Request) bool { return !strings.HasSuffix(r.URL.Path, LostSuffix) }, 2,
			xmlFault(500, "InternalError", "boom"))
		batch := records("t", 0, 2)
		if err := h.sink.Consume(ctx, batch); err == nil {
			t.Fatal("want the upload error")
		}
		h.wantKeys(key("t", 0, 1, "jsonl") + LostSuffix)
		if err := h.sink.Consume(ctx, batch); err != nil { // the redelivered batch
			t.Fatal(err)
		}
		h.wantKeys(key("t", 0, 1, "jsonl"), key("t", 0, 1, "jsonl")+LostSuffix)
	})
}

// TestDefaultCredentialChain omits both keys: the sink finds credentials
// in the standard AWS environment variables.
func TestDefaultCredentialChain(t *testing.T) {
	srv := s3test.Start(t)
	t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
	t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
	t.Setenv("AWS_CONFIG_FILE", "/nonexistent")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	s, err := openWith(t, srv, nil, func(o *options) { o.AccessKeyID, o.SecretAccessKey = "", "" })
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Consume(context.Background(), records("t", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if keys := srv.Keys(t); len(keys) != 1 {
		t.Fatalf("keys = %v", keys)
	}
	// Without credentials anywhere, the probe fails with the spec's message.
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	_, err = openWith(t, srv, nil, func(o *options) { o.AccessKeyID, o.SecretAccessKey = "", "" })
	if err == nil || !strings.Contains(err.Error(), "S3 bucket '"+srv.Bucket+"' connectivity check failed") {
		t.Fatalf("err = %v", err)
	}
}
