package s3sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// Tests of delivery = "exactly_once", the default.

// crash stops s as a SIGKILL would: no Close, no further upload. An
// upload cut off may or may not have landed, as in a real crash.
func (s *Sink) crash() {
	s.mu.Lock()
	s.closing = true
	s.mu.Unlock()
	close(s.stop)
	s.cancel()
	s.wg.Wait()
}

// durable returns the sink's Durable offset of topic t, partition 0, and
// whether it is reported.
func durableOf(s *Sink, topic string) (int64, bool) {
	d, ok := s.Durable()[sdk.TopicPartition{Topic: topic}]
	return d, ok
}

// object is one data object, parsed back.
type object struct {
	key         string
	first, last int64
	body        []byte // decompressed
	offsets     []int64
}

// readObjects reads every data object under prefix (no .lost marker may
// be there), decompressing by extension, and parses the offsets of its
// json_lines records.
func readObjects(t *testing.T, srv *s3test.Server, prefix string) []object {
	t.Helper()
	objs, err := srv.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []object
	for _, o := range objs {
		if strings.HasSuffix(o.Key, LostSuffix) {
			t.Fatalf("a .lost marker in exactly_once: %s", o.Key)
		}
		name := o.Key[strings.LastIndexByte(o.Key, '/')+1:]
		parts := strings.SplitN(name, "-", 3)
		first, _ := strconv.ParseInt(parts[1], 10, 64)
		last, _ := strconv.ParseInt(parts[2][:20], 10, 64)
		body := srv.MustGet(t, o.Key)
		switch {
		case strings.HasSuffix(name, ".gz"):
			r, err := gzip.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
		case strings.HasSuffix(name, ".zst"):
			r, err := zstd.NewReader(bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			if body, err = io.ReadAll(r); err != nil {
				t.Fatal(err)
			}
			r.Close()
		}
		obj := object{key: strings.TrimPrefix(o.Key, prefix), first: first, last: last, body: body}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<26)
		for sc.Scan() {
			var rec struct{ Offset int64 }
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s: %v", o.Key, err)
			}
			obj.offsets = append(obj.offsets, rec.Offset)
		}
		out = append(out, obj)
	}
	return out
}

// wantExactlyOnce checks that every offset from 0 to n-1 is in exactly one
// object, that objects do not overlap, and that each object's key names
// its first and last record.
func wantExactlyOnce(t *testing.T, objs []object, n int) {
	t.Helper()
	seen := map[int64]string{}
	for _, o := range objs {
		if len(o.offsets) == 0 || o.offsets[0] != o.first || o.offsets[len(o.offsets)-1] != o.last {
			t.Fatalf("%s holds offsets %v", o.key, o.offsets)
		}
		for _, off := range o.offsets {
			if k, dup := seen[off]; dup {
				t.Fatalf("offset %d in %s and in %s", off, k, o.key)
			}
			seen[off] = o.key
		}
	}
	for off := int64(0); off < int64(n); off++ {
		if _, ok := seen[off]; !ok {
			t.Fatalf("offset %d missing; objects: %v", off, keysOf(objs))
		}
	}
	if len(seen) != n {
		t.Fatalf("%d offsets, want %d", len(seen), n)
	}
}

func keysOf(objs []object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.key
	}
	return out
}

// openAt opens a sink on srv under prefix with the given options.
func openAt(t *testing.T, srv *s3test.Server, endpoint, prefix string, mod func(*options)) *Sink {
	t.Helper()
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.RetryDelay = time.Millisecond
	o.Prefix = prefix
	o.PathTemplate = mustTemplate(t, "{topic}")
	if mod != nil {
		mod(&o)
	}
	s := newSink(o, sinkEnv("eo", sdk.DiscardMetrics))
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// feed hands recs to s in batches of size b, the way the runtime does:
// a failed batch is handed over again.
func feed(t *testing.T, s *Sink, recs []sdk.Record, b int) {
	t.Helper()
	for i := 0; i < len(recs); {
		j := min(i+b, len(recs))
		if err := s.Consume(context.Background(), recs[i:j]); err != nil {
			t.Fatalf("Consume %d-%d: %v", recs[i].Offset, recs[j-1].Offset, err)
		}
		i = j
	}
}

func TestDurableSkipsRedeliveries(t *testing.T) {
	h := newHarness(t, messages(3))
	ctx := context.Background()
	if _, ok := durableOf(h.sink, "t"); ok {
		t.Fatal("a partition without records is reported")
	}
	if err := h.sink.Consume(ctx, records("t", 0, 5)); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if d, _ := durableOf(h.sink, "t"); d != 3 {
		t.Fatalf("durable = %d after 0-2 uploaded and 3-4 open, want 3", d)
	}
	// A redelivery (seek back after a failure, or a rebalance) is skipped.
	if err := h.sink.Consume(ctx, records("t", 0, 7)); err != nil {
		t.Fatal(err)
	}
	h.settle()
	if d, _ := durableOf(h.sink, "t"); d != 6 {
		t.Fatalf("durable = %d, want 6", d)
	}
	if err := h.sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if d, _ := durableOf(h.sink, "t"); d != 7 {
		t.Fatalf("durable after Close = %d, want 7", d)
	}
	h.wantKeys(key("t", 0, 2, "jsonl"), key("t", 3, 5, "jsonl"), key("t", 6, 6, "jsonl"))
	h.wantBody(key("t", 3, 5, "jsonl"), lines("t", 3, 3))
	if got := h.metrics.get("s3_sink_records_buffered_total"); got != 7 {
		t.Fatalf("buffered %v records, want 7", got)
	}
}

// TestReplayAfterCrash crashes a sink at several points, resumes from an
// offset Durable reported (the latest, or an older one: the runtime's
// commit may lag), and checks that the bucket holds every offset once,
// under the same keys and with the same bytes as a run without a crash.
func TestReplayAfterCrash(t *testing.T) {
	srv := s3test.Start(t)
	const n = 400
	recs := records("t", 0, n)
	for i := range recs {
		recs[i].Payload = []byte(fmt.Sprintf(`{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", i%37)))
	}
	for _, c := range []struct {
		name string
		mod  func(*options)
	}{
		{"size", func(o *options) { o.MaxFileSize = 4000 }},
		{"messages", func(o *options) { o.RotateByMessages, o.MaxMessages = true, 33 }},
		{"rotate_interval", func(o *options) { o.RotateInterval = 25 * time.Millisecond }},
		{"gzip", func(o *options) { o.MaxFileSize = 4000; o.Compression = compressGzip }},
		{"zstd", func(o *options) { o.MaxFileSize = 4000; o.Compression = compressZstd }},
	} {
		t.Run(c.name, func(t *testing.T) {
			ref := openAt(t, srv, srv.Endpoint, c.name+"-ref", c.mod)
			feed(t, ref, recs, 17)
			if err := ref.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := readObjects(t, srv, c.name+"-ref/")
			wantExactlyOnce(t, want, n)
			crashRuns(t, srv, c.name, c.mod, recs, want, func(got []object) { wantExactlyOnce(t, got, n) })
			// Compressed objects are byte for byte the same too.
			if c.name == "gzip" || c.name == "zstd" {
				a := srv.MustGet(t, c.name+"-ref/"+want[1].key)
				b := srv.MustGet(t, c.name+"-crash0/"+want[1].key)
				if !bytes.Equal(a, b) {
					t.Fatal("compressed bytes differ between runs")
				}
			}
		})
	}
}

// crashRuns writes recs under name-crashN/ with two crashes per run, at
// several points, resumed from the latest Durable (even runs, after the
// uploads settled) or from a lagging one (odd runs, uploads cut off), and
// checks the objects with check and against want, the objects of a run
// without a crash: the same keys with the same bytes.
func crashRuns(t *testing.T, srv *s3test.Server, name string, mod func(*options), recs []sdk.Record, want []object, check func([]object)) {
	t.Helper()
	for ci, crashAt := range []int{3, 60, 151, 290} {
		prefix := fmt.Sprintf("%s-crash%d", name, ci)
		from := 0
		s := openAt(t, srv, srv.Endpoint, prefix, mod)
		// Two crashes per run: at crashAt and at crashAt + 80.
		for _, at := range []int{crashAt, crashAt + 80} {
			var lagging int64
			for i := from; i < at; i += 17 {
				lagging, _ = durableOf(s, "t")
				feed(t, s, recs[i:min(i+17, at)], 17)
			}
			if ci%2 == 0 {
				s.settle() // else the crash cuts uploads off
			}
			latest, _ := durableOf(s, "t")
			s.crash()
			// Alternate between the latest and a lagging commit.
			commit := latest
			if ci%2 == 1 {
				commit = max(lagging, int64(from))
			}
			if commit < int64(from) || commit > int64(at) {
				t.Fatalf("durable %d outside the records consumed %d-%d", commit, from, at)
			}
			from = int(commit)
			s = openAt(t, srv, srv.Endpoint, prefix, mod)
		}
		feed(t, s, recs[from:], 17)
		if err := s.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := readObjects(t, srv, prefix+"/")
		check(got)
		if strings.Join(keysOf(got), "\n") != strings.Join(keysOf(want), "\n") {
			t.Fatalf("crash at %d: keys\n%s\nwant\n%s", crashAt, strings.Join(keysOf(got), "\n"), strings.Join(keysOf(want), "\n"))
		}
		for i := range got {
			if !bytes.Equal(got[i].body, want[i].body) {
				t.Fatalf("crash at %d: %s differs from the run without a crash", crashAt, got[i].key)
			}
		}
	}
}

// TestFlushIntervalRecovery: a file uploaded by flush_interval (a wall
// clock cut) before a crash, and not committed, is found in the bucket by
// the next run, which skips its records instead of writing an overlapping
// object.
func TestFlushIntervalRecovery(t *testing.T) {
	srv := s3test.Start(t)
	mod := func(o *options) {
		o.RotateByMessages, o.MaxMessages = true, 100
		o.FlushInterval = 20 * time.Millisecond
	}
	s := openAt(t, srv, srv.Endpoint, "f", mod)
	feed(t, s, records("t", 0, 5), 5)
	sdktest.Eventually(t, 10*time.Second, func() error {
		if d, _ := durableOf(s, "t"); d != 5 {
			return fmt.Errorf("durable %d, the idle file is not uploaded yet", d)
		}
		return nil
	})
	// Two more idle cuts, then a crash before any commit: the runtime
	// resumes from 0.
	feed(t, s, records("t", 5, 3), 3)
	sdktest.Eventually(t, 10*time.Second, func() error {
		if d, _ := durableOf(s, "t"); d != 8 {
			return fmt.Errorf("durable %d", d)
		}
		return nil
	})
	s.crash()
	s2 := openAt(t, srv, srv.Endpoint, "f", func(o *options) { o.RotateByMessages, o.MaxMessages = true, 100 })
	feed(t, s2, records("t", 0, 12), 12)
	if d, _ := durableOf(s2, "t"); d != 8 {
		t.Fatalf("durable after recovery = %d, want 8 (0-4 and 5-7 found in the bucket)", d)
	}
	if err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs := readObjects(t, srv, "f/")
	wantExactlyOnce(t, objs, 12)
	if want := []string{"t/00000-00000000000000000000-00000000000000000004.jsonl",
		"t/00000-00000000000000000005-00000000000000000007.jsonl",
		"t/00000-00000000000000000008-00000000000000000011.jsonl"}; strings.Join(keysOf(objs), " ") != strings.Join(want, " ") {
		t.Fatalf("keys %v, want %v", keysOf(objs), want)
	}
}

// TestFailedUploadsKeepData fails every upload, with a retried status and
// with 403: the file stays in memory, Durable does not move, Consume
// refuses records with the S3 error (so the runtime's status goes Error),
// and once the store recovers the file lands and Consume accepts again.
func TestFailedUploadsKeepData(t *testing.T) {
	for _, fault := range []faultproxy.Fault{
		xmlFault(503, "ServiceUnavailable", "down"),
		xmlFault(403, "AccessDenied", "Access Denied"),
	} {
		t.Run(strconv.Itoa(fault.Status), func(t *testing.T) {
			h := newHarness(t, func(o *options) { messages(2)(o); o.MaxAttempts = 2 })
			h.proxy.InjectMatching(dataPut, -1, fault)
			ctx := context.Background()
			if err := h.sink.Consume(ctx, records("t", 0, 3)); err != nil {
				t.Fatal(err) // accepted: the upload runs in the background
			}
			var err error
			sdktest.Eventually(t, 10*time.Second, func() error {
				if err = h.sink.Consume(ctx, records("t", 3, 2)); err == nil {
					return errors.New("Consume still accepts records while the upload fails")
				}
				return nil
			})
			if !strings.Contains(err.Error(), "no record is accepted until one succeeds") || !strings.Contains(err.Error(), strconv.Itoa(fault.Status)) {
				t.Fatalf("err = %v", err)
			}
			if d, _ := durableOf(h.sink, "t"); d != 0 {
				t.Fatalf("durable = %d while 0-1 is not uploaded", d)
			}
			// 0-1, and 2-3 when the batch that closed it was accepted
			// before 0-1 failed: it uploads beside 0-1 and fails too.
			if f := h.metrics.get("s3_sink_failing_files"); f < 1 || f > 2 || h.metrics.get("s3_sink_upload_failures_total") < 1 ||
				h.metrics.get("s3_sink_records_lost_total") != 0 {
				t.Fatalf("failing %v, failures %v, lost %v", h.metrics.get("s3_sink_failing_files"),
					h.metrics.get("s3_sink_upload_failures_total"), h.metrics.get("s3_sink_records_lost_total"))
			}
			h.proxy.Clear()
			// The kept file is retried with back-off; once it lands Consume
			// accepts the redelivered batch again.
			sdktest.Eventually(t, 10*time.Second, func() error {
				return h.sink.Consume(ctx, records("t", 3, 2))
			})
			if err := h.sink.Close(ctx); err != nil {
				t.Fatal(err)
			}
			h.wantKeys(key("t", 0, 1, "jsonl"), key("t", 2, 3, "jsonl"), key("t", 4, 4, "jsonl"))
			h.wantBody(key("t", 0, 1, "jsonl"), lines("t", 0, 2))
			if d, _ := durableOf(h.sink, "t"); d != 5 {
				t.Fatalf("durable = %d, want 5", d)
			}
		})
	}
}

// TestCloseWhileUploadsFail: Close gives a failing file one last round and
// reports it; nothing is dropped, no marker, and Durable still names its
// first offset, so the next start replays it.
func TestCloseWhileUploadsFail(t *testing.T) {
	h := newHarness(t, func(o *options) { messages(10)(o); o.MaxAttempts = 2 })
	h.proxy.InjectMatching(dataPut, -1, xmlFault(403, "AccessDenied", "Access Denied"))
	if err := h.sink.Consume(context.Background(), records("t", 0, 3)); err != nil {
		t.Fatal(err)
	}
	err := h.sink.Close(context.Background())
	if err == nil || !strings.Contains(err.Error(), "not uploaded; its records are not committed") || !strings.Contains(err.Error(), "403") {
		t.Fatalf("Close = %v", err)
	}
	if d, _ := durableOf(h.sink, "t"); d != 0 {
		t.Fatalf("durable = %d", d)
	}
	h.wantKeys()
}

// TestMemoryBound writes 16 partitions through a slow store with a
// max_buffer_size below 16 x max_file_size: the sink never holds more than
// the bound, closes files early when it must, and still writes every
// offset exactly once.
func TestMemoryBound(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	proxy.SetLatency(5 * time.Millisecond)
	const bound = 1 << 20
	s := openAt(t, srv, proxy.URL, "m", func(o *options) {
		o.MaxFileSize = 256 << 10
		o.MaxBufferSize = bound
		o.MaxInFlight = 2
	})
	recs := benchRecords(1, 1000)[0]
	const parts, per = 16, 600
	consumeWithinBound(t, s, bound, parts, per, func(p int32, j int) sdk.Record {
		r := recs
		r.Topic, r.Partition, r.Offset = "m", p, int64(j)
		return r
	})
	objs, err := srv.List(context.Background(), "m/")
	if err != nil {
		t.Fatal(err)
	}
	byPart := map[string][]string{}
	for _, o := range objs {
		part := o.Key[strings.LastIndexByte(o.Key, '/')+1:][:5]
		byPart[part] = append(byPart[part], o.Key)
	}
	if len(byPart) != parts {
		t.Fatalf("%d partitions in the bucket", len(byPart))
	}
	for dir, keys := range byPart {
		sort.Strings(keys)
		next := int64(0)
		for _, k := range keys {
			name := k[strings.LastIndexByte(k, '/')+1:]
			first, _ := strconv.ParseInt(name[6:26], 10, 64)
			last, _ := strconv.ParseInt(name[27:47], 10, 64)
			if first != next {
				t.Fatalf("%s: %s after offset %d", dir, name, next-1)
			}
			next = last + 1
		}
		if next != per {
			t.Fatalf("%s ends at %d", dir, next-1)
		}
	}
}

// TestPipelinedUploads holds the first uploads in the store: Consume goes
// on meanwhile, max_in_flight partitions upload at once, and Durable moves
// only past files that landed, in offset order.
func TestPipelinedUploads(t *testing.T) {
	h := newHarness(t, func(o *options) { messages(2)(o); o.MaxInFlight = 3 })
	h.proxy.InjectMatching(dataPut, 3, faultproxy.Fault{Delay: time.Second})
	var batch []sdk.Record
	for p := int32(0); p < 4; p++ {
		for _, r := range records("t", 0, 6) {
			r.Partition = p
			batch = append(batch, r)
		}
	}
	if err := h.sink.Consume(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	h.sink.mu.Lock()
	inFlight := h.sink.inFlight
	h.sink.mu.Unlock()
	if inFlight != 3 {
		t.Fatalf("%d uploads in flight, want max_in_flight 3", inFlight)
	}
	// Every partition's files are held in the store or queued behind one
	// that is: nothing is durable yet.
	for tp, d := range h.sink.Durable() {
		if d != 0 {
			t.Fatalf("%v durable at %d before any upload landed", tp, d)
		}
	}
	// Watch Durable while the uploads land: it only ever names a file
	// boundary, and never goes back.
	last := map[sdk.TopicPartition]int64{}
	for {
		h.sink.mu.Lock()
		busy := h.sink.inFlight > 0 || h.sink.queuedFiles()
		h.sink.mu.Unlock()
		for tp, d := range h.sink.Durable() {
			if d%2 != 0 || d < last[tp] {
				t.Fatalf("%v durable %d after %d", tp, d, last[tp])
			}
			last[tp] = d
		}
		if !busy {
			break
		}
		time.Sleep(time.Millisecond)
	}
	for tp, d := range h.sink.Durable() {
		if d != 6 {
			t.Fatalf("%v durable %d, want 6", tp, d)
		}
	}
	if got := h.metrics.get("s3_sink_uploads_in_flight_max"); got != 3 {
		t.Fatalf("in-flight gauge peaked at %v", got)
	}
}

func TestRotateInterval(t *testing.T) {
	// Records are 1 ms apart: a 4 ms interval cuts at 0, 4, 8, ...; the
	// record that reaches the interval starts the next file.
	h := newHarness(t, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.RotateInterval = 4 * time.Millisecond
	})
	recs := records("t", 0, 10)
	recs[9].Timestamp = recs[8].Timestamp.Add(time.Hour)
	if err := h.sink.Consume(context.Background(), recs); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(key("t", 0, 3, "jsonl"), key("t", 4, 7, "jsonl"), key("t", 8, 8, "jsonl"), key("t", 9, 9, "jsonl"))
}

func TestCompressionRoundTrip(t *testing.T) {
	for _, c := range []struct {
		comp     compression
		ext, enc string
	}{{compressGzip, "jsonl.gz", "gzip"}, {compressZstd, "jsonl.zst", "zstd"}} {
		t.Run(c.enc, func(t *testing.T) {
			h := newHarness(t, func(o *options) { messages(5)(o); o.Compression = c.comp })
			if err := h.sink.Consume(context.Background(), records("t", 0, 7)); err != nil {
				t.Fatal(err)
			}
			if err := h.sink.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			h.wantKeys(key("t", 0, 4, c.ext), key("t", 5, 6, c.ext))
			objs := readObjects(t, h.srv, "")
			if string(objs[0].body) != lines("t", 0, 5) || string(objs[1].body) != lines("t", 5, 2) {
				t.Fatalf("decompressed:\n%s\n%s", objs[0].body, objs[1].body)
			}
			head, err := h.srv.Client.HeadObject(context.Background(), &s3.HeadObjectInput{
				Bucket: aws.String(h.srv.Bucket), Key: aws.String(key("t", 0, 4, c.ext))})
			if err != nil {
				t.Fatal(err)
			}
			if got := aws.ToString(head.ContentEncoding); got != c.enc {
				t.Fatalf("Content-Encoding %q, want %q", got, c.enc)
			}
			if raw := h.srv.MustGet(t, key("t", 0, 4, c.ext)); bytes.Contains(raw, []byte(`"offset"`)) {
				t.Fatal("object is not compressed")
			}
		})
	}
}

// TestRelease gives up a partition while its first file uploads: the
// upload finishes, the open file is dropped, Durable reports the final
// offset once, and the next owner (here the same sink, reassigned) resumes
// there.
func TestRelease(t *testing.T) {
	h := newHarness(t, messages(3))
	h.proxy.InjectMatching(dataPut, 1, faultproxy.Fault{Delay: 300 * time.Millisecond})
	ctx := context.Background()
	if err := h.sink.Consume(ctx, append(records("t", 0, 5), records("u", 0, 1)...)); err != nil {
		t.Fatal(err)
	}
	tp := sdk.TopicPartition{Topic: "t"}
	if err := h.sink.Release(ctx, []sdk.TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	d := h.sink.Durable()
	if d[tp] != 3 || d[sdk.TopicPartition{Topic: "u"}] != 0 {
		t.Fatalf("durable after Release = %v, want t:3 (0-2 uploaded, 3-4 dropped)", d)
	}
	if _, ok := h.sink.Durable()[tp]; ok {
		t.Fatal("a released partition is reported twice")
	}
	h.wantKeys(key("t", 0, 2, "jsonl"))
	// Reassigned: the runtime resumes from the commit, 3.
	if err := h.sink.Consume(ctx, records("t", 3, 3)); err != nil {
		t.Fatal(err)
	}
	if err := h.sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(key("t", 0, 2, "jsonl"), key("t", 3, 5, "jsonl"), key("u", 0, 0, "jsonl"))
	if h.metrics.get("s3_sink_buffered_bytes") != 0 || h.metrics.get("s3_sink_open_files") != 0 {
		t.Fatalf("buffered bytes %v, open files %v after Close", h.metrics.get("s3_sink_buffered_bytes"), h.metrics.get("s3_sink_open_files"))
	}
}

func TestReleaseBufferedUploads(t *testing.T) {
	h := newHarness(t, func(o *options) { messages(3)(o); buffered(o) })
	ctx := context.Background()
	if err := h.sink.Consume(ctx, records("t", 0, 2)); err != nil {
		t.Fatal(err)
	}
	tp := sdk.TopicPartition{Topic: "t"}
	if err := h.sink.Release(ctx, []sdk.TopicPartition{tp}); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(key("t", 0, 1, "jsonl"))
	if d := h.sink.Durable()[tp]; d != 2 {
		t.Fatalf("durable %d", d)
	}
}

// TestPathStyleFalseKept: an explicit path_style = false with an endpoint
// reaches the client (it was overridden to true).
func TestPathStyleFalseKept(t *testing.T) {
	for _, c := range []struct {
		raw  map[string]any
		want bool
	}{
		{map[string]any{"endpoint": "http://127.0.0.1:9000", "path_style": false}, false},
		{map[string]any{"endpoint": "http://127.0.0.1:9000"}, true},
		{map[string]any{}, false},
		{map[string]any{"path_style": true}, true},
	} {
		raw := map[string]any{"bucket": "picomq-archive", "region": "eu-west-1"}
		for k, v := range c.raw {
			raw[k] = v
		}
		cfg, err := s3sinkconfig.Load(raw, "P_", noEnv)
		if err != nil {
			t.Fatal(err)
		}
		o := fromConfig(cfg)
		client, err := newClient(context.Background(), &o)
		if err != nil {
			t.Fatal(err)
		}
		if got := client.Options().UsePathStyle; got != c.want {
			t.Errorf("%v: UsePathStyle %v, want %v", c.raw, got, c.want)
		}
	}
}

// TestRotationBeforeThePutObjectLimit: a record that would take a file
// past 5 GiB starts the next file, whatever max_file_size says.
func TestRotationBeforeThePutObjectLimit(t *testing.T) {
	for _, comp := range []compression{compressNone, compressGzip} {
		o := defaultOptions()
		o.MaxFileSize, o.Compression = maxPutObjectSize, comp
		s := newSink(o, sinkEnv("test", sdk.DiscardMetrics))
		p := &partitionState{bufferKey: bufferKey{"t", 0}}
		p.open.count = 1
		r := rec(sdk.SchemaRaw, strings.Repeat("a", 1000))
		p.open.size = s.maxObjectBytes() - 1000
		if !s.rotateBefore(p, &r, 0) {
			t.Errorf("%v: a 1000-byte record fits in the %d bytes left", comp, s.maxObjectBytes()-p.open.size)
		}
		p.open.size = s.maxObjectBytes() - 100_000
		if s.rotateBefore(p, &r, 0) {
			t.Errorf("%v: rotated with 100 KB left", comp)
		}
	}
}

// TestLargeTextRecordReservesItsSize: a 1 MiB text record reserves about
// its size, not six times.
func TestLargeTextRecordReservesItsSize(t *testing.T) {
	o := defaultOptions()
	f := newFormatter(&o)
	for _, schema := range []sdk.Schema{sdk.SchemaText, sdk.SchemaProto} {
		r := rec(schema, strings.Repeat("é", 1<<19)+"\n\x01")
		got := f.estimate(&r, 1)
		if n := len(f.appendRecord(nil, &r, true, metaTail("t", 0))); got < n || got > n+256 {
			t.Fatalf("%s: estimate %d for %d bytes", schema, got, n)
		}
	}
}

// consumeWithinBound hands the sink parts partitions of per records each,
// 50 per partition and batch, built by rec, closes it, and fails when the
// bytes it held ever passed bound, or never came near it.
func consumeWithinBound(t *testing.T, s *Sink, bound int64, parts int32, per int, rec func(p int32, j int) sdk.Record) {
	t.Helper()
	var batch []sdk.Record
	for i := 0; i < per; i += 50 {
		batch = batch[:0]
		for p := int32(0); p < parts; p++ {
			for j := i; j < i+50; j++ {
				batch = append(batch, rec(p, j))
			}
		}
		if err := s.Consume(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		if s.peakHeld > bound {
			t.Fatalf("held %d bytes, above max_buffer_size %d", s.peakHeld, bound)
		}
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.peakHeld > bound || s.peakHeld < bound/2 {
		t.Fatalf("peak held %d bytes, bound %d", s.peakHeld, bound)
	}
}

// TestHoleReplay: the files of one partition upload side by side, so a
// crash can leave files in the bucket beyond one that is not (here the
// first file's uploads fail). The next run, resumed from the commit before
// the hole, writes the hole again, cut right before the first file found
// beyond it even when its own rotation would cut elsewhere, skips the
// files found, and goes on: every offset in exactly one object.
func TestHoleReplay(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	const n = 60
	recs := records("t", 0, n)
	ref := openAt(t, srv, srv.Endpoint, "ref", messages(10))
	feed(t, ref, recs, 13)
	if err := ref.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := readObjects(t, srv, "ref/")
	for _, c := range []struct {
		name string
		mod  func(*options)
	}{
		{"same rotation", messages(10)},
		{"other rotation", messages(7)},
		{"flush_interval", func(o *options) { messages(7)(o); o.FlushInterval = time.Millisecond }},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix := strings.ReplaceAll(c.name, " ", "-")
			first := func(r *http.Request) bool {
				return dataPut(r) && strings.Contains(r.URL.Path, "/"+prefix+"/") && strings.Contains(r.URL.Path, "-00000000000000000000-")
			}
			proxy.InjectMatching(first, -1, xmlFault(503, "ServiceUnavailable", "down"))
			defer proxy.Clear()
			s := openAt(t, srv, proxy.URL, prefix, func(o *options) { messages(10)(o); o.MaxInFlight = 4; o.MaxAttempts = 1 })
			if err := s.Consume(context.Background(), recs[:55]); err != nil {
				t.Fatal(err)
			}
			// 10-19, 20-29 and 30-39 land beside the failing 0-9; 40-49
			// waits (max_in_flight files of a partition from its oldest).
			sdktest.Eventually(t, 10*time.Second, func() error {
				if got := readObjects(t, srv, prefix+"/"); len(got) != 3 {
					return fmt.Errorf("objects %v", keysOf(got))
				}
				return nil
			})
			if d, _ := durableOf(s, "t"); d != 0 {
				t.Fatalf("durable %d with 0-9 not uploaded", d)
			}
			s.crash()
			s = openAt(t, srv, srv.Endpoint, prefix, c.mod)
			feed(t, s, recs, 13)
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d, _ := durableOf(s, "t"); d != n {
				t.Fatalf("durable %d, want %d", d, n)
			}
			got := readObjects(t, srv, prefix+"/")
			wantExactlyOnce(t, got, n)
			if c.name == "same rotation" && strings.Join(keysOf(got), " ") != strings.Join(keysOf(want), " ") {
				t.Fatalf("keys %v, want %v", keysOf(got), keysOf(want))
			}
			if c.name == "other rotation" && (got[0].last != 6 || got[1].first != 7 || got[1].last != 9) {
				t.Fatalf("the hole 0-9 written as %v, want 0-6 and 7-9 (cut before 10-19)", keysOf(got))
			}
		})
	}
}

// TestResumeInsideAFile: the runtime commits min(Durable, the next offset
// consumed), so a commit can land inside a file in the bucket: a new owner
// finds 10-19 at its commit 10 and skips it, Durable says 20, and the
// runtime, having consumed only record 10, commits 11 before a crash. The
// next owner, resumed inside 10-19, skips the rest of it and of the files
// after it (a hole among them is written again) instead of writing 11-19
// as a second object. The same when the partition is revoked (Release)
// instead.
func TestResumeInsideAFile(t *testing.T) {
	srv := s3test.Start(t)
	const n = 60
	recs := records("t", 0, n)
	for _, c := range []struct {
		name    string
		hole    bool // 30-39 is not in the bucket
		release bool // revoked rather than killed
		mod     func(*options)
	}{
		{"all there", false, false, messages(10)},
		{"hole", true, false, messages(10)},
		{"hole other rotation", true, false, messages(7)},
		{"released", true, true, messages(10)},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix := strings.ReplaceAll(c.name, " ", "-")
			s := openAt(t, srv, srv.Endpoint, prefix, messages(10))
			feed(t, s, recs, 13)
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if c.hole {
				client := s3test.NewClient(srv.Endpoint, srv.AccessKey, srv.SecretKey)
				if _, err := client.DeleteObject(context.Background(), &s3.DeleteObjectInput{
					Bucket: aws.String(srv.Bucket), Key: aws.String(prefix + "/" + key("t", 30, 39, "jsonl")),
				}); err != nil {
					t.Fatal(err)
				}
			}
			// The new owner, at commit 10, is handed record 10 alone.
			s = openAt(t, srv, srv.Endpoint, prefix, c.mod)
			feed(t, s, recs[10:11], 1)
			if c.release {
				if err := s.Release(context.Background(), []sdk.TopicPartition{{Topic: "t"}}); err != nil {
					t.Fatal(err)
				}
			}
			if d, _ := durableOf(s, "t"); d != 20 {
				t.Fatalf("durable %d after 10-19 was found, want 20", d)
			}
			s.crash()
			// The runtime committed min(20, 11).
			s = openAt(t, srv, srv.Endpoint, prefix, c.mod)
			feed(t, s, recs[11:], 13)
			if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if d, _ := durableOf(s, "t"); d != n {
				t.Fatalf("durable %d, want %d", d, n)
			}
			got := readObjects(t, srv, prefix+"/")
			wantExactlyOnce(t, got, n)
			if !c.hole && len(got) != 6 {
				t.Fatalf("objects %v, want the 6 of the first run", keysOf(got))
			}
		})
	}
}
