package s3sink

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// TestStreamedGroup: the files of a group (path_template reads each
// record, here {field:region}) stream too. Two regions interleaved record
// by record, 12 MiB each, under max_buffer_size 20MiB: held whole, the
// group would be cut at the buffer's bound (smaller files); streamed,
// each file's parts go up while the other region's file fills, and the
// group is one file per region, cut by Close, each its region's records
// in order. Every record moves the open file into the idle set and back,
// with parts on their way. No staging upload or object is left, and the
// sink never held more than the bound.
func TestStreamedGroup(t *testing.T) {
	const bound = 20 << 20
	h := newHarness(t, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}/{field:region}")
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, bound // streams above 5 MiB
	})
	pad := strings.Repeat("x", 1000)
	var recs []sdk.Record
	for i := range 24_000 {
		region := []string{"eu", "us"}[i%2]
		recs = append(recs, sdk.Record{Topic: "orders.eu", Offset: int64(1000 + i), Schema: sdk.SchemaJSON,
			Payload: []byte(fmt.Sprintf(`{"id":%d,"region":"%s","pad":"%s"}`, i, region, pad))})
	}
	h.consumeClose(recs, 500)
	if h.sink.peakHeld > bound {
		t.Errorf("held %d bytes at most, above max_buffer_size (%d)", h.sink.peakHeld, bound)
	}
	f := newFormatter(&h.sink.opts)
	tail := metaTail("orders.eu", 0)
	var keys []string
	for r, region := range []string{"eu", "us"} {
		var body []byte
		for i := r; i < len(recs); i += 2 {
			body = f.appendRecord(body, &recs[i], len(body) == 0, tail)
		}
		k := key("orders.eu/"+region, 1000, 1000+len(recs)-1, "jsonl")
		keys = append(keys, k)
		defer h.wantBody(k, string(body))
	}
	h.wantKeys(keys...) // one file per region, no marker or staging object left
	if left := h.uploads(""); len(left) > 0 {
		t.Errorf("incomplete uploads left: %v", left)
	}
	// Each file streamed: POSTs (CreateMultipartUpload and
	// CompleteMultipartUpload) on one staging key per region's file, none
	// on the data keys (both are copies).
	staged, direct := map[string]bool{}, 0
	for _, e := range h.proxy.Log() {
		switch {
		case e.Method != http.MethodPost:
		case strings.Contains(e.Path, stagingFolder):
			staged[e.Path] = true
		default:
			direct++
		}
	}
	if len(staged) != 2 || direct != 0 {
		t.Errorf("multipart uploads on staging keys %v and %d POSTs on data keys, want one staging key per region's file", staged, direct)
	}
}

// TestStreamedGroupCrash crashes a sink while both files of a group
// stream and their aborts cannot reach the store, as after a SIGKILL: two
// staging uploads stay. The next sink, resumed from the last Durable (the
// group's first offset: nothing was cut), aborts them before it writes,
// and the bucket ends with every offset in exactly one object, in the
// file of its region, and no incomplete upload.
func TestStreamedGroupCrash(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	mod := func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}/{field:region}")
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 20<<20 // streams above 5 MiB
	}
	pad := strings.Repeat("x", 1000)
	regions := []string{"eu", "us"}
	var recs []sdk.Record
	for i := range 24_000 {
		recs = append(recs, sdk.Record{Topic: "orders.eu", Offset: int64(i), Schema: sdk.SchemaJSON,
			Payload: []byte(fmt.Sprintf(`{"region":"%s","pad":"%s"}`, regions[i%2], pad))})
	}
	incomplete := func() []string { return incompleteUploads(t, srv, "mpu/") }
	isPart := func(r *http.Request) bool { return r.Method == http.MethodPut && r.URL.Query().Has("partNumber") }
	isAbort := func(r *http.Request) bool { return r.Method == http.MethodDelete && r.URL.Query().Has("uploadId") }

	s := openAt(t, srv, proxy.URL, "mpu", mod)
	proxy.InjectMatching(isPart, 100, faultproxy.Fault{Delay: time.Minute})
	proxy.InjectMatching(isAbort, 100, faultproxy.Fault{Status: http.StatusServiceUnavailable})
	feed(t, s, recs[:16_000], 500) // 8 MiB a region: both stream
	testwait.For(t, time.Minute, "both files' staging uploads to start", func() bool { return len(incomplete()) == 2 })
	committed, _ := durableOf(s, "orders.eu")
	s.crash()
	if left := incomplete(); len(left) != 2 {
		t.Fatalf("incomplete uploads after the crash: %v, want the two files in progress", left)
	}
	proxy.Clear()

	s = openAt(t, srv, proxy.URL, "mpu", mod)
	feed(t, s, recs[committed:], 500)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	seen := map[int64]string{}
	for _, o := range readObjects(t, srv, "mpu/") {
		for _, off := range o.offsets {
			if k, dup := seen[off]; dup {
				t.Fatalf("offset %d in %s and in %s", off, k, o.key)
			}
			if want := "orders.eu/" + regions[off%2] + "/"; !strings.HasPrefix(o.key, want) {
				t.Fatalf("offset %d in %s, want it under %s", off, o.key, want)
			}
			seen[off] = o.key
		}
	}
	if len(seen) != len(recs) {
		t.Fatalf("%d offsets in the bucket, want %d", len(seen), len(recs))
	}
	if left := incomplete(); len(left) > 0 {
		t.Fatalf("incomplete uploads after the replay: %v", left)
	}
	t.Logf("resumed from %d; %d offsets, each once", committed, len(seen))
}
