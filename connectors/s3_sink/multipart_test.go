package s3sink

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// uploads lists the incomplete multipart uploads under prefix.
func (h *harness) uploads(prefix string) []string { return incompleteUploads(h.t, h.srv, prefix) }

// incompleteUploads lists the keys of the incomplete multipart uploads of
// srv's bucket under prefix.
func incompleteUploads(t testing.TB, srv *s3test.Server, prefix string) []string {
	t.Helper()
	out, err := srv.Client.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{
		Bucket: aws.String(srv.Bucket), Prefix: aws.String(prefix)})
	if err != nil {
		t.Fatalf("ListMultipartUploads: %v", err)
	}
	var keys []string
	for _, u := range out.Uploads {
		keys = append(keys, aws.ToString(u.Key))
	}
	return keys
}

// TestMultipartUpload writes files above part_size: each is one object
// equal to the concatenated records with the object settings, its parts
// of part_size streamed under a staging key while it filled and copied to
// its key at the cut; no upload and no staging object is left.
func TestMultipartUpload(t *testing.T) {
	for _, checksum := range []string{"", "SHA256"} {
		t.Run("checksum="+checksum, func(t *testing.T) {
			h := newHarness(t, func(o *options) {
				o.PathTemplate = mustTemplate(t, "{topic}")
				o.PartSize = 5 << 20
				o.MaxFileSize = 12 << 20   // three parts: 5, 5 and the rest
				o.MaxBufferSize = 32 << 20 // files stream above 8 MiB
				o.Object.Checksum = checksum
				o.Object.Tags = map[string]string{"team": "lake"}
			})
			recs := benchRecords(15_000, 1024)
			h.consumeClose(recs, 500)
			ctx := context.Background()
			parts, singles, copies := 0, 0, 0
			want := h.filesOf(recs, 12<<20, func(k string, body []byte) {
				h.wantBody(k, string(body))
				if len(body) <= 5<<20 {
					singles++
					return
				}
				parts += (len(body) + 5<<20 - 1) / (5 << 20)
				copies++
				tags, err := h.sink.client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(h.srv.Bucket), Key: aws.String(k)})
				if err != nil {
					t.Fatal(err)
				}
				if len(tags.TagSet) != 1 || aws.ToString(tags.TagSet[0].Key) != "team" {
					t.Errorf("%s: tags %v, want team=lake", k, tags.TagSet)
				}
			})
			h.wantKeys(want...)
			if len(want) < 2 || parts < 3 {
				t.Fatalf("%d files, %d parts: the test wants at least one multipart file", len(want), parts)
			}
			// A PUT per part (UploadPart), per single file (PutObject) and
			// per streamed file (CopyObject).
			if got := h.dataPuts(); got != parts+singles+copies {
				t.Errorf("%d PUT requests, want %d parts, %d PutObject and %d CopyObject", got, parts, singles, copies)
			}
			if left := h.uploads(""); len(left) > 0 {
				t.Errorf("incomplete uploads left: %v", left)
			}
		})
	}
}

// TestAbortStaleUploads starts multipart uploads as a killed sink would
// have left them; the partition's next owner aborts those at or after the
// offset it resumes from, before it writes, and leaves the others.
func TestAbortStaleUploads(t *testing.T) {
	h := newHarness(t, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.PartSize = 5 << 20
	})
	ctx := context.Background()
	stale := []string{
		key("t", 10, 20, "jsonl"),             // before the resumed offset: kept
		key("t", 30, 40, "jsonl"),             // at it: aborted
		key("t", 41, 50, "jsonl"),             // after it: aborted
		"t/00001-" + key("t", 30, 40, "")[8:], // another partition: kept
	}
	for _, k := range stale {
		if _, err := h.sink.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{
			Bucket: aws.String(h.srv.Bucket), Key: aws.String(k), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.sink.Consume(ctx, records("t", 30, 5)); err != nil {
		t.Fatal(err)
	}
	got := strings.Join(h.uploads("t/"), " ")
	if want := stale[3] + " " + stale[0]; got != want && got != stale[0]+" "+stale[3] {
		t.Fatalf("incomplete uploads after the assignment: %s\nwant: %s", got, want)
	}
	if err := h.sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	h.wantKeys(key("t", 30, 34, "jsonl"))
}

// TestPartSizeBoundsMaxFileSize: max_file_size above 10,000 parts is
// refused, naming both keys and the part_size that would do.
func TestPartSizeBoundsMaxFileSize(t *testing.T) {
	o := defaultOptions()
	o.MaxFileSize = int64(5 * confkit.TiB)
	err := o.validate()
	if err == nil || !strings.Contains(err.Error(), "max_file_size (5TiB) needs more than S3's 10,000 parts of part_size (16MiB): raise part_size to at least 525MiB") {
		t.Fatalf("validate: %v", err)
	}
	o.PartSize = 525 << 20
	if err := o.validate(); err != nil {
		t.Fatalf("5TiB in parts of 525MiB: %v", err)
	}
	if got := o.objectLimit(); got != maxObjectSize {
		t.Errorf("objectLimit %d, want 5TiB", got)
	}
}

// TestMultipartMemoryBound writes 200 MiB to one partition with
// max_file_size 200MiB, part_size 8MiB and max_buffer_size 64MiB: the file
// streams once it passes 16 MiB (a quarter of the bound), so the sink
// holds at most max_in_flight parts besides the one filling, the process's
// peak RSS grows by less than twice the bound (Go's heap headroom), and
// every record is in exactly one object, the whole file. With gzip too,
// of records (random hex) that compress to about half: the parts are of
// compressed bytes, and the compressed file (about 110 MiB) is not held.
func TestMultipartMemoryBound(t *testing.T) {
	if testing.Short() {
		t.Skip("writes 200 MiB")
	}
	for _, c := range []struct {
		name string
		comp compression
		recs []sdk.Record
	}{{"none", compressNone, benchRecords(1024, 1024)}, {"gzip", compressGzip, streamedRecords(1024)}} {
		t.Run(c.name, func(t *testing.T) { testMultipartMemoryBound(t, c.comp, c.recs) })
	}
}

func testMultipartMemoryBound(t *testing.T, comp compression, recs []sdk.Record) {
	const bound = 64 << 20
	h := newHarness(t, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.PartSize = 8 << 20
		o.MaxFileSize = 200 << 20
		o.MaxBufferSize = bound
		o.Compression = comp
	})
	one := len(h.sink.fmt.appendRecord(nil, &recs[0], true, metaTail("orders.eu", 0)))
	total := (200 << 20) / one
	runtime.GC()
	resetPeakRSS()
	baseRSS := peakRSS()
	feedFrom1000(t, h.sink, recs, total)
	grown := peakRSS() - baseRSS
	t.Logf("%d records, %d MiB; peak held %.1f MiB of %d MiB; peak RSS %.1f MiB above the baseline %.1f MiB",
		total, total*one>>20, float64(h.sink.peakHeld)/(1<<20), bound>>20, float64(grown)/(1<<20), float64(baseRSS)/(1<<20))
	// max_in_flight (4) parts of 8 MiB on their way and the one filling,
	// and the last chunk's slack.
	if most := int64(5*8<<20 + 4<<20); h.sink.peakHeld > most {
		t.Errorf("held %d bytes, above 5 parts of 8 MiB and a few chunks (%d)", h.sink.peakHeld, most)
	}
	// Go's heap grows to about twice what is live between collections
	// (GOGC=100), as max_buffer_size's description says. A sink that held
	// the 200 MiB file would exceed this.
	if grown > 2*bound {
		t.Errorf("peak RSS grew by %.1f MiB, above twice max_buffer_size (%d MiB)", float64(grown)/(1<<20), bound>>20)
	}
	// Every offset in exactly one object, each file in parts.
	next := int64(1000)
	for _, k := range h.keys() {
		first, last, ok := offsetsOf(k, "orders.eu/00000-")
		if !ok || first != next {
			t.Fatalf("object %s: want one starting at offset %d", k, next)
		}
		next = last + 1
	}
	if want := int64(1000 + total); next != want {
		t.Fatalf("objects end at offset %d, want %d", next-1, want-1)
	}
	if keys := h.keys(); len(keys) > 2 {
		t.Errorf("objects %v: want a file of 200 MiB (and the rest), streamed, not cut at max_buffer_size", keys)
	}
	if left := h.uploads(""); len(left) > 0 {
		t.Errorf("incomplete uploads left: %v", left)
	}
}

// feedFrom1000 consumes n records, recs over and over from offset 1000, in batches
// of len(recs), then closes s.
func feedFrom1000(tb testing.TB, s *Sink, recs []sdk.Record, n int) {
	tb.Helper()
	batch := make([]sdk.Record, len(recs))
	ctx := context.Background()
	for off := 0; off < n; off += len(batch) {
		k := min(len(batch), n-off)
		for i := range k {
			batch[i] = recs[i]
			batch[i].Offset = int64(1000 + off + i)
		}
		if err := s.Consume(ctx, batch[:k]); err != nil {
			tb.Fatal(err)
		}
	}
	if err := s.Close(ctx); err != nil {
		tb.Fatal(err)
	}
}

// TestMultipartCrash crashes a sink while a multipart upload is in
// progress and its abort cannot reach the store, as after a SIGKILL: the
// incomplete upload stays. The next sink, resumed from the last Durable,
// aborts it before it writes, and the bucket ends with every offset in
// exactly one object and no incomplete upload under the prefix.
func TestMultipartCrash(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	mod := func(o *options) { o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 12<<20, 32<<20 } // files stream above 8 MiB
	const n = 25_000                                                                               // about 29 MiB: one file uploaded, the next in parts when the sink dies
	recs := benchRecords(n, 1024)
	for i := range recs {
		recs[i].Offset = int64(i)
	}
	incomplete := func() []string { return incompleteUploads(t, srv, "mpu/") }
	isPart := func(r *http.Request) bool { return r.Method == http.MethodPut && r.URL.Query().Has("partNumber") }
	isAbort := func(r *http.Request) bool { return r.Method == http.MethodDelete && r.URL.Query().Has("uploadId") }

	s := openAt(t, srv, proxy.URL, "mpu", mod)
	feed(t, s, recs[:11_000], 500) // the first file (12 MiB) uploads
	s.settle()
	committed, _ := durableOf(s, "orders.eu")
	// The second file's parts hang; its abort fails.
	proxy.InjectMatching(isPart, 100, faultproxy.Fault{Delay: time.Minute})
	proxy.InjectMatching(isAbort, 100, faultproxy.Fault{Status: http.StatusServiceUnavailable})
	feed(t, s, recs[11_000:], 500)
	testwait.For(t, time.Minute, "the second file's multipart upload to start", func() bool { return len(incomplete()) > 0 })
	s.crash()
	left := incomplete()
	if len(left) != 1 {
		t.Fatalf("incomplete uploads after the crash: %v, want the file in progress", left)
	}
	proxy.Clear()

	s = openAt(t, srv, proxy.URL, "mpu", mod)
	feed(t, s, recs[committed:], 500)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readObjects(t, srv, "mpu/")
	wantExactlyOnce(t, got, n)
	if left := incomplete(); len(left) > 0 {
		t.Fatalf("incomplete uploads after the replay: %v", left)
	}
	t.Logf("resumed from %d; the replay aborted %s; %d objects", committed, left, len(got))
}

// TestMultipartObjectSettingsMinio: a file uploaded in parts to MinIO over
// TLS with SSE-C, a storage class, tags and a SHA256 checksum keeps them
// all: HEAD (with the key) shows the class and a SHA256 checksum of the
// parts, GET without the key fails, and GET with it reads the records.
func TestMultipartObjectSettingsMinio(t *testing.T) {
	srv := s3test.StartMinio(t, s3test.MinioOptions{TLS: true})
	sse := sseKey(t)
	s, err := openWith(t, srv, nil, func(o *options) {
		o.CAFile, o.Prefix, o.PathTemplate = srv.CAFile, "mpu", mustTemplate(t, "{topic}")
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 32<<20 // the file streams above 8 MiB
		o.Object.SSECKey, o.Object.StorageClass, o.Object.Checksum = sse, "REDUCED_REDUNDANCY", "SHA256"
		o.Object.Tags = map[string]string{"team": "lake"}
	})
	if err != nil {
		t.Fatalf("Open: %v\n%s", err, srv.Logs())
	}
	recs := benchRecords(10_000, 1024) // about 12 MiB: one file of three parts
	feedFrom1000(t, s, recs, len(recs))
	var k string
	var want []byte
	hs := &harness{t: t, srv: srv, sink: s}
	hs.filesOf(recs, 64<<20, func(key string, body []byte) { k, want = "mpu/"+key, append([]byte(nil), body...) })
	ctx := context.Background()
	if _, err := srv.Get(ctx, k); err == nil {
		t.Fatalf("GET %s without the key read it", k)
	}
	o := objectSettings{SSECKey: sse}
	h := head(t, srv, k, func(in *s3.HeadObjectInput) {
		in.ChecksumMode = types.ChecksumModeEnabled
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = o.sseCustomer()
	})
	if string(h.StorageClass) != "REDUCED_REDUNDANCY" || aws.ToString(h.ChecksumSHA256) == "" {
		t.Fatalf("%s: storage class %q, SHA256 %q; want REDUCED_REDUNDANCY and a checksum", k, h.StorageClass, aws.ToString(h.ChecksumSHA256))
	}
	in := &s3.GetObjectInput{Bucket: aws.String(srv.Bucket), Key: aws.String(k)}
	in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = o.sseCustomer()
	out, err := srv.Client.GetObject(ctx, in)
	if err != nil {
		t.Fatalf("GET %s with the key: %v", k, err)
	}
	defer out.Body.Close()
	if body, err := io.ReadAll(out.Body); err != nil || !bytes.Equal(body, want) {
		t.Fatalf("GET %s with the key: %d bytes, %v; want the %d bytes of the records", k, len(body), err, len(want))
	}
	tags, err := srv.Client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(srv.Bucket), Key: aws.String(k)})
	if err != nil || len(tags.TagSet) != 1 {
		t.Fatalf("%s: tags %v, %v", k, tags, err)
	}
}

// TestMultipartResumesAndAborts: a part the store refuses once is sent
// again alone, in the same upload (one create, one complete, one PUT more
// than the parts); a file dropped after failed attempts (buffered
// delivery) has its upload aborted, so none is left.
func TestMultipartResumesAndAborts(t *testing.T) {
	isPart2 := func(r *http.Request) bool {
		return r.Method == http.MethodPut && r.URL.Query().Get("partNumber") == "2"
	}
	recs := benchRecords(10_000, 1024) // about 12 MiB: one file of three parts
	mod := func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 32<<20 // exactly_once files stream above 8 MiB
	}
	t.Run("resume", func(t *testing.T) {
		h := newHarness(t, mod)
		h.proxy.InjectMatching(isPart2, 1, faultproxy.Fault{Status: http.StatusInternalServerError})
		feedFrom1000(t, h.sink, recs, len(recs))
		want := h.filesOf(recs, 64<<20, func(k string, body []byte) { h.wantBody(k, string(body)) })
		h.wantKeys(want...)
		// The file streams: its parts go up under its staging key, then
		// a copy to its key (a PUT) and the staging object's DELETE.
		if post, put, del := h.proxy.Count(http.MethodPost), h.proxy.Count(http.MethodPut), h.proxy.Count(http.MethodDelete); post != 2 || put != 5 || del != 1 {
			t.Fatalf("%d POST, %d PUT, %d DELETE; want one create and one complete, 3 parts, the refused one and the copy, no abort but the staging object's delete\n%+v", post, put, del, h.proxy.Log())
		}
	})
	t.Run("dropped", func(t *testing.T) {
		h := newHarness(t, func(o *options) { mod(o); buffered(o) })
		h.proxy.InjectMatching(isPart2, 1000, faultproxy.Fault{Status: http.StatusInternalServerError})
		batch := recs
		for i := range batch {
			batch[i].Offset = int64(1000 + i)
		}
		if err := h.sink.Consume(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
		if err := h.sink.Close(context.Background()); err == nil || !strings.Contains(err.Error(), "part 2 of 3") {
			t.Fatalf("Close: %v; want the file reported lost, part 2 refused", err)
		}
		if left := h.uploads(""); len(left) > 0 {
			t.Fatalf("incomplete uploads after the file was dropped: %v", left)
		}
		if keys := h.keys(); len(keys) != 1 || !strings.HasSuffix(keys[0], LostSuffix) {
			t.Fatalf("objects %v, want the .lost marker alone", keys)
		}
	})
}
