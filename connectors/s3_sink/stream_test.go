package s3sink

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/klauspost/compress/zstd"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// TestStreamedCopyKeepsSettings: a file streamed under its staging key
// reaches its own key with every object setting, whether the store copies
// it in one CopyObject or in parts (UploadPartCopy, above copyObjectLimit,
// here lowered): its bytes, tags, SHA256 checksum (in one copy), and
// against MinIO its storage class and SSE-KMS key; no upload and no
// staging object is left.
func TestStreamedCopyKeepsSettings(t *testing.T) {
	for _, c := range []struct {
		name  string
		minio bool
		parts bool
	}{{"versitygw", false, false}, {"versitygw-parts", false, true}, {"minio-kms", true, false}, {"minio-kms-parts", true, true}} {
		t.Run(c.name, func(t *testing.T) {
			var srv *s3test.Server
			if c.minio {
				srv = s3test.StartMinio(t, s3test.MinioOptions{KMS: true})
			} else {
				srv = s3test.Start(t)
			}
			if c.parts {
				limit := copyObjectLimit
				copyObjectLimit = 1
				t.Cleanup(func() { copyObjectLimit = limit })
			}
			s, err := openWith(t, srv, nil, func(o *options) {
				o.Prefix, o.PathTemplate = "mpu", mustTemplate(t, "{topic}")
				o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 20<<20 // streams above 5 MiB
				o.Object.Tags = map[string]string{"team": "lake"}
				o.Object.Checksum = "SHA256"
				if c.minio {
					o.Object.StorageClass = "REDUCED_REDUNDANCY"
					o.Object.SSE, o.Object.KMSKeyID = "aws:kms", srv.KMSKeyID
				}
			})
			if err != nil {
				t.Fatalf("Open: %v\n%s", err, srv.Logs())
			}
			recs := benchRecords(10_000, 1024) // about 12 MiB: one file of three parts
			feedFrom1000(t, s, recs, len(recs))
			h := &harness{t: t, srv: srv, sink: s}
			var keys []string
			h.filesOf(recs, 64<<20, func(k string, body []byte) {
				keys = append(keys, "mpu/"+k)
				h.wantBody("mpu/"+k, string(body))
			})
			h.wantKeys(keys...) // the staging object is gone
			if len(keys) != 1 {
				t.Fatalf("files %v, want one", keys)
			}
			ctx := context.Background()
			k := keys[0]
			tags, err := srv.Client.GetObjectTagging(ctx, &s3.GetObjectTaggingInput{Bucket: aws.String(srv.Bucket), Key: aws.String(k)})
			if err != nil || len(tags.TagSet) != 1 || aws.ToString(tags.TagSet[0].Key) != "team" || aws.ToString(tags.TagSet[0].Value) != "lake" {
				t.Fatalf("%s: tags %v, %v; want team=lake", k, tags, err)
			}
			// Copied in parts, the object has no checksum of its own (see
			// copyStaged).
			hd := head(t, srv, k, func(in *s3.HeadObjectInput) { in.ChecksumMode = types.ChecksumModeEnabled })
			if sum := aws.ToString(hd.ChecksumSHA256); (sum == "") != c.parts {
				t.Errorf("%s: SHA256 checksum %q, want one unless copied in parts", k, sum)
			}
			if c.parts && !strings.HasSuffix(aws.ToString(hd.ETag), `-3"`) {
				t.Errorf("%s: ETag %s, want one of 3 copied parts", k, aws.ToString(hd.ETag))
			}
			if c.minio {
				if string(hd.StorageClass) != "REDUCED_REDUNDANCY" {
					t.Errorf("%s: storage class %q", k, hd.StorageClass)
				}
				if hd.ServerSideEncryption != types.ServerSideEncryptionAwsKms || !strings.HasSuffix(aws.ToString(hd.SSEKMSKeyId), srv.KMSKeyID) {
					t.Errorf("%s: encryption %q, key %q; want aws:kms with %s", k, hd.ServerSideEncryption, aws.ToString(hd.SSEKMSKeyId), srv.KMSKeyID)
				}
			}
			if left := h.uploads(""); len(left) > 0 {
				t.Errorf("incomplete uploads left: %v", left)
			}
		})
	}
}

// TestReleaseStreamedFile: a partition revoked while its open file
// streams drops the file: its staging upload is aborted once its parts
// stop, nothing is written under the file's key, Durable stays at the
// file's first offset (the next owner replays it), and its chunks are
// freed, and a compressed file's (raw, and compressed) too.
func TestReleaseStreamedFile(t *testing.T) {
	for _, c := range []struct {
		name string
		comp compression
		recs []sdk.Record
	}{
		{"none", compressNone, benchRecords(12_000, 1024)}, // about 14 MiB: two parts go up while it fills
		{"gzip", compressGzip, streamedRecords(12_000)},    // about 7 MiB compressed: one part
	} {
		t.Run(c.name, func(t *testing.T) {
			h := newHarness(t, func(o *options) {
				o.PathTemplate = mustTemplate(t, "{topic}")
				o.Compression = c.comp
				o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 20<<20 // streams above 5 MiB
			})
			recs := c.recs
			for i := range recs {
				recs[i].Topic, recs[i].Offset = "orders.eu", int64(1000+i)
			}
			ctx := context.Background()
			if err := h.sink.Consume(ctx, recs); err != nil {
				t.Fatal(err)
			}
			h.sink.mu.Lock()
			st := h.sink.parts[bufferKey{"orders.eu", 0}].open.stream
			h.sink.mu.Unlock()
			if st == nil || (st.enc != nil) != (c.comp != compressNone) {
				t.Fatal("the open file does not stream (through an encoder when compressed)")
			}
			tp := sdk.TopicPartition{Topic: "orders.eu"}
			if err := h.sink.Release(ctx, []sdk.TopicPartition{tp}); err != nil {
				t.Fatal(err)
			}
			if d := h.sink.Durable()[tp]; d != 1000 {
				t.Fatalf("Durable after the release: %d, want 1000", d)
			}
			if err := h.sink.Close(ctx); err != nil { // waits for the abort
				t.Fatal(err)
			}
			if left := h.uploads(""); len(left) > 0 {
				t.Fatalf("uploads left after the release: %v", left)
			}
			h.wantKeys()
			if h.sink.held != 0 {
				t.Fatalf("%d bytes still held after the release", h.sink.held)
			}
			if st.enc != nil {
				t.Fatal("the dropped file's encoder was not given back")
			}
		})
	}
}

// TestStreamedWholeBeforeTheCut: a streamed json_array file whose every
// byte is up in parts before it is cut (records sized to end at exactly
// two parts, cut by Close) completes with its closing ']' as a last part
// of one byte, and the object is its records.
func TestStreamedWholeBeforeTheCut(t *testing.T) {
	h := newHarness(t, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}")
		o.Format = formatJSONArray
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 20<<20 // streams above 5 MiB
	})
	tail := metaTail("t", 0)
	rec := func(off, pad int) sdk.Record {
		return sdk.Record{Topic: "t", Offset: int64(off), Schema: sdk.SchemaJSON,
			Payload: []byte(`{"pad":"` + strings.Repeat("x", pad) + `"}`)}
	}
	var recs []sdk.Record
	var body []byte
	for i := range 9 {
		recs = append(recs, rec(i, 1<<20))
		body = h.sink.fmt.appendRecord(body, &recs[i], i == 0, tail)
	}
	last := rec(9, 0)
	pad := 10<<20 - len(body) - len(h.sink.fmt.appendRecord(nil, &last, false, tail))
	recs = append(recs, rec(9, pad))
	if body = h.sink.fmt.appendRecord(body, &recs[9], false, tail); len(body) != 10<<20 {
		t.Fatalf("records of %d bytes, want 10 MiB", len(body))
	}
	ctx := context.Background()
	if err := h.sink.Consume(ctx, recs); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "both parts to be in", func() bool {
		h.sink.mu.Lock()
		defer h.sink.mu.Unlock()
		st := h.sink.parts[bufferKey{"t", 0}].open.stream
		return st != nil && st.running == 0 && len(st.mpu.parts) == 2 && st.mpu.parts[1].ETag != nil
	})
	if err := h.sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	k := key("t", 0, 9, "json")
	h.wantKeys(k)
	if got := h.srv.MustGet(t, k); !bytes.Equal(got, append(body, ']')) {
		t.Fatalf("%s: %d bytes ending %q, want the %d bytes of the records and ']'", k, len(got), got[max(len(got)-8, 0):], len(body)+1)
	}
	if put := h.proxy.Count(http.MethodPut); put != 4 {
		t.Errorf("%d PUT requests, want 3 parts (the last one ']') and the copy", put)
	}
}

// TestStreamCompressorBoundaries: the pooled encoders (compress.go) give
// the same bytes whatever the sizes of the writes they are fed, and when
// an encoder is reused from its pool: the premise for compressing a file
// as it fills (its appends are record-sized) and for today's compression
// of a file's chunks, whose sizes depend on the chunk pool. Replays must
// write the same object, so no Flush may come between the writes.
func TestStreamCompressorBoundaries(t *testing.T) {
	var in []byte
	for i := 0; len(in) < 3<<20; i++ {
		in = fmt.Appendf(in, `{"offset":%d,"key":"k-%d","value":"%x"}`+"\n", i, i%97, i*2654435761)
	}
	encode := func(c compression, l level, size int) []byte {
		pool := &compressors[c][l]
		enc := pool.Get().(compressor)
		defer func() { enc.Reset(io.Discard); pool.Put(enc) }()
		var out bytes.Buffer
		enc.Reset(&out)
		for b := in; len(b) > 0; {
			k := min(size, len(b))
			if _, err := enc.Write(b[:k]); err != nil {
				t.Fatal(err)
			}
			b = b[k:]
		}
		if err := enc.Close(); err != nil {
			t.Fatal(err)
		}
		return out.Bytes()
	}
	for _, c := range []compression{compressGzip, compressZstd} {
		for l := levelFastest; l <= levelBest; l++ {
			whole := encode(c, l, len(in))
			if len(whole) == 0 || len(whole) >= len(in) {
				t.Fatalf("compression %d level %d: %d bytes from %d", c, l, len(whole), len(in))
			}
			for _, size := range []int{1, 61, 4096, 65537, 1 << 20, len(in)} {
				if got := encode(c, l, size); !bytes.Equal(got, whole) {
					t.Errorf("compression %d level %d: writes of %d bytes give %d bytes, not the %d of one write", c, l, size, len(got), len(whole))
				}
			}
		}
	}
}

// decompressed returns body decompressed with c.
func decompressed(t *testing.T, c compression, body []byte) []byte {
	t.Helper()
	var r io.Reader
	switch c {
	case compressGzip:
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	case compressZstd:
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	default:
		return body
	}
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatalf("decompressing %d bytes: %v", len(body), err)
	}
	return out
}

// streamedRecords returns n records of orders.eu from offset 1000 with
// 1 KiB payloads of random hex, which compress to about half.
func streamedRecords(n int) []sdk.Record {
	recs := hexRecords(n, 1024)
	for i := range recs {
		recs[i].Topic, recs[i].Offset = "orders.eu", int64(1000+i)
	}
	return recs
}

// TestStreamCompressed: a gzip or zstd file (JSON lines, or a json_array
// whose closing ']' goes through the encoder at the cut) whose raw bytes pass
// streamAt streams: its parts, cut from the compressed bytes, go up under
// the staging key while it fills, and the object decompresses to its
// records in order. Its bytes are those of the same records held whole
// and compressed at the cut (a sink whose streamAt is above the file), so
// a replay that streams or not writes the same object. A file that
// streams but whose compressed bytes stay within part_size (small: highly
// compressible records) starts no part and goes up at its key, the same
// bytes again.
func TestStreamCompressed(t *testing.T) {
	for _, c := range []struct {
		name   string
		comp   compression
		format format
		recs   []sdk.Record
		parts  bool
	}{
		{"gzip", compressGzip, formatJSONLines, streamedRecords(24_000), true}, // about 27 MB, 12 MB compressed
		{"zstd", compressZstd, formatJSONLines, streamedRecords(24_000), true},
		{"zstd-json_array", compressZstd, formatJSONArray, streamedRecords(24_000), true},
		{"gzip-small", compressGzip, formatJSONLines, benchRecords(12_000, 1024), false}, // about 14 MB, within a part compressed
	} {
		t.Run(c.name, func(t *testing.T) {
			mod := func(o *options) {
				o.PathTemplate = mustTemplate(t, "{topic}")
				o.Compression, o.Format = c.comp, c.format
				o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, 20<<20 // streams above 5 MiB, raw
			}
			h := newHarness(t, mod)
			ctx := context.Background()
			for i := 0; i < len(c.recs); i += 500 {
				if err := h.sink.Consume(ctx, c.recs[i:min(i+500, len(c.recs))]); err != nil {
					t.Fatal(err)
				}
			}
			h.sink.mu.Lock()
			st := h.sink.parts[bufferKey{"orders.eu", 0}].open.stream
			streamed := st != nil && st.enc != nil
			h.sink.mu.Unlock()
			if !streamed {
				t.Fatal("the open file does not stream through an encoder")
			}
			// Staging requests before the cut: the upload's creation and
			// parts went up while the file filled.
			staged := func() (creates, parts int) {
				for _, e := range h.proxy.Log() {
					if !strings.Contains(e.Path, "/"+stagingFolder+"/") {
						continue
					}
					switch e.Method {
					case http.MethodPost:
						creates++
					case http.MethodPut:
						parts++
					}
				}
				return creates, parts
			}
			testwait.For(t, time.Minute, "the parts started to finish", func() bool {
				h.sink.mu.Lock()
				defer h.sink.mu.Unlock()
				return st.running == 0
			})
			creates, parts := staged()
			if c.parts && (creates != 1 || parts < 2) {
				t.Fatalf("before the cut: %d staging CreateMultipartUpload and %d part requests, want 1 and at least 2", creates, parts)
			}
			if !c.parts && creates+parts > 0 {
				t.Fatalf("before the cut: %d staging CreateMultipartUpload and %d part requests, want none", creates, parts)
			}
			if err := h.sink.Close(ctx); err != nil {
				t.Fatal(err)
			}
			if h.sink.held != 0 {
				t.Errorf("%d bytes still held after Close", h.sink.held)
			}
			var raw []byte
			f := newFormatter(&h.sink.opts)
			for i := range c.recs {
				raw = f.appendRecord(raw, &c.recs[i], i == 0, metaTail("orders.eu", 0))
			}
			raw = f.finish(raw)
			k := key("orders.eu", 1000, 1000+len(c.recs)-1, c.format.ext()+c.comp.ext())
			h.wantKeys(k) // the staging object is gone
			got := h.srv.MustGet(t, k)
			if back := decompressed(t, c.comp, got); !bytes.Equal(back, raw) {
				t.Fatalf("%s: %d bytes decompress to %d bytes, not the %d of the records", k, len(got), len(back), len(raw))
			}
			if c.parts && len(got) <= 10<<20 {
				t.Fatalf("%s: %d bytes, want more than two parts", k, len(got))
			}
			if left := h.uploads(""); len(left) > 0 {
				t.Errorf("incomplete uploads left: %v", left)
			}

			// The same records, held whole (streamAt above the file).
			whole, err := openWith(t, h.srv, nil, func(o *options) {
				mod(o)
				o.Prefix, o.MaxBufferSize = "whole", 256<<20
			})
			if err != nil {
				t.Fatal(err)
			}
			if at := whole.streamAt(); at <= int64(len(raw)) {
				t.Fatalf("streamAt %d: the file of %d bytes would stream", at, len(raw))
			}
			feedFrom1000(t, whole, c.recs, len(c.recs))
			if held := h.srv.MustGet(t, "whole/"+k); !bytes.Equal(held, got) {
				t.Fatalf("%s: the streamed file has %d bytes, the file held whole %d other ones", k, len(got), len(held))
			}
			t.Logf("%s: %d bytes, %d compressed, %d part requests while it filled", k, len(raw), len(got), parts)
		})
	}
}

// TestStreamedGroupCompressed: the files of a group stream compressed
// too, each through its own encoder while the open file moves in and out
// of the idle set record by record: two regions interleaved, about 13 MB
// raw and 7 MB of gzip each, under max_buffer_size 20MiB. Each region's
// object decompresses to its records in order, each went up through a
// staging upload, and the sink never held more than the bound.
func TestStreamedGroupCompressed(t *testing.T) {
	const bound = 20 << 20
	h := newHarness(t, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}/{field:region}")
		o.Compression = compressGzip
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 64<<20, bound // streams above 5 MiB, raw
	})
	regions := []string{"eu", "us"}
	recs := streamedRecords(24_000)
	for i := range recs {
		p := recs[i].Payload
		recs[i].Payload = fmt.Appendf(nil, `{"region":"%s",%s`, regions[i%2], p[1:])
	}
	h.consumeClose(recs, 500)
	if h.sink.peakHeld > bound {
		t.Errorf("held %d bytes at most, above max_buffer_size (%d)", h.sink.peakHeld, bound)
	}
	f := newFormatter(&h.sink.opts)
	var keys []string
	for r, region := range regions {
		var body []byte
		for i := r; i < len(recs); i += 2 {
			body = f.appendRecord(body, &recs[i], len(body) == 0, metaTail("orders.eu", 0))
		}
		k := key("orders.eu/"+region, 1000, 1000+len(recs)-1, "jsonl.gz")
		keys = append(keys, k)
		if got := decompressed(t, compressGzip, h.srv.MustGet(t, k)); !bytes.Equal(got, body) {
			t.Errorf("%s: decompresses to %d bytes, not the %d of its region's records", k, len(got), len(body))
		}
	}
	h.wantKeys(keys...)
	if left := h.uploads(""); len(left) > 0 {
		t.Errorf("incomplete uploads left: %v", left)
	}
	staged := map[string]bool{}
	for _, e := range h.proxy.Log() {
		if e.Method == http.MethodPost && strings.Contains(e.Path, stagingFolder) {
			staged[e.Path] = true
		}
	}
	if len(staged) != 2 {
		t.Errorf("multipart uploads on staging keys %v, want one per region's file", staged)
	}
}

// TestStreamCompressedCrash crashes a sink while its second gzip file
// streams, its first one in, with aborts failing as after a SIGKILL, so staging uploads stay. The
// next sink, resumed from the last Durable, cleans them up and writes the
// rest: every offset is in exactly one object, no upload is left, and
// every object is byte for byte the one a sink that never crashed and
// held its files whole writes under the same key.
func TestStreamCompressedCrash(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	mod := func(o *options) {
		o.Compression = compressGzip
		o.PartSize, o.MaxFileSize, o.MaxBufferSize = 5<<20, 12<<20, 20<<20 // streams above 5 MiB, raw
	}
	recs := streamedRecords(30_000) // about 34 MB raw: three files of 12 MiB, 6.5 MB of gzip each
	for i := range recs {
		recs[i].Offset = int64(i)
	}
	isAbort := func(r *http.Request) bool { return r.Method == http.MethodDelete && r.URL.Query().Has("uploadId") }
	incomplete := func() int { return len(incompleteUploads(t, srv, "crash/")) }

	s := openAt(t, srv, proxy.URL, "crash", mod)
	proxy.InjectMatching(isAbort, 100, faultproxy.Fault{Status: http.StatusServiceUnavailable})
	feed(t, s, recs[:22_000], 500) // the second file streams
	testwait.For(t, time.Minute, "the first file to be in and the second's staging upload to start", func() bool {
		d, _ := durableOf(s, "orders.eu")
		return d > 0 && incomplete() > 0
	})
	committed, _ := durableOf(s, "orders.eu")
	s.crash()
	if n := incomplete(); n == 0 {
		t.Fatal("no incomplete upload after the crash")
	}
	proxy.Clear()

	s = openAt(t, srv, proxy.URL, "crash", mod)
	feed(t, s, recs[committed:], 500)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	wantExactlyOnce(t, readObjects(t, srv, "crash/"), len(recs))
	if n := incomplete(); n > 0 {
		t.Fatalf("%d incomplete uploads after the replay", n)
	}

	whole := openAt(t, srv, srv.Endpoint, "whole", func(o *options) { mod(o); o.MaxBufferSize = 256 << 20 })
	feed(t, whole, recs, 500)
	if err := whole.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	keys := srv.Keys(t)
	n := 0
	for _, k := range keys {
		if rest, ok := strings.CutPrefix(k, "whole/"); ok {
			n++
			if got, want := srv.MustGet(t, "crash/"+rest), srv.MustGet(t, k); !bytes.Equal(got, want) {
				t.Errorf("crash/%s: %d bytes, the file held whole %d other ones", rest, len(got), len(want))
			}
		}
	}
	if n < 3 || len(keys) != 2*n {
		t.Fatalf("objects %v: want the same files under both prefixes, at least three", keys)
	}
	t.Logf("resumed from %d; %d offsets, each once; %d files, the same bytes as held whole", committed, len(recs), n)
}
