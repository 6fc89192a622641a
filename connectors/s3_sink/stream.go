package s3sink

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Streamed files: once an open file's bytes pass part_size and a quarter
// of max_buffer_size (streamAt), its parts go up while it fills, so it
// holds at most max_in_flight parts in memory besides the one filling,
// not the whole file. A data object's key names its last offset,
// known only at the cut, and a multipart upload's key is fixed when it
// starts: the parts go into an upload under a staging key,
//
//	<prefix>/_picomq-staging/<topic>/<partition 5d>-<first offset 20d>
//
// completed at the cut (the rest of the parts first), then copied by the
// store to the file's key, with every object setting, and deleted. The
// object appears whole at the copy, so a replay rewrites the same key with
// the same bytes, and recovery finds files by their keys as before. Part
// boundaries depend only on the bytes (parts of exactly part_size from
// the file's start). The staging folder is one per prefix, apart from the
// data (the leading '_' hides it from Hive, Spark, Trino and Athena too):
// on assignment the sink aborts the incomplete staging uploads and deletes
// the staging objects of its partition wherever the file was going, and
// one lifecycle rule on the folder removes what is left elsewhere.
//
// A Parquet file's parts are cut from its encoded bytes, which its writer
// makes as it fills (parquet_stream.go). A compressed file's are cut from
// its compressed bytes: once it streams, its chunks are fed to an encoder
// as each fills (compressFilled), and the encoder's output is the bytes
// compress makes of the whole file at the cut (it does not depend on
// where its writes break), so a replay that streams or not writes the
// same object. Either way the file's size, rotation and the stream
// decision count raw bytes, as for a file held whole.
//
// Only exactly_once files stream. The files of a group (a path_template
// read from each record) stream each on its own: a file moved between the
// open one and the idle ones keeps its stream (moveFile), and its staging
// key is its own, named by its own first offset.

// stagingFolder is the folder, under prefix, of the staging objects.
const stagingFolder = "_picomq-staging"

// copyObjectLimit is the largest object one CopyObject copies (S3: 5 GiB);
// a larger one is copied in parts (UploadPartCopy). A variable for tests.
var copyObjectLimit int64 = 5 << 30

// streamAt is the size above which an open file streams: part_size, and
// a quarter of max_buffer_size, one file's share of the buffer (as the
// chunk pool keeps for one file). Streaming costs the store a copy of the
// object; a file within its share is held whole and goes up at its cut,
// in parts above part_size, as before.
func (s *Sink) streamAt() int64 {
	return max(s.opts.PartSize, s.opts.MaxBufferSize/4)
}

// streams reports whether files above streamAt stream while they fill.
func (s *Sink) streams() bool {
	return s.opts.PartSize > 0 && !s.opts.Buffered
}

// stagingPrefix returns <prefix>/_picomq-staging/<topic>/<partition 5d>-.
func (s *Sink) stagingPrefix(topic string, partition int32) string {
	var b []byte
	if s.opts.Prefix != "" {
		b = append(append(b, s.opts.Prefix...), '/')
	}
	b = append(append(b, stagingFolder...), '/')
	b = append(appendSanitized(b, topic), '/')
	return string(append(appendPadded(b, int64(partition), 5), '-'))
}

// streamOpen streams p's open file once it passes streamAt, and starts
// the uploads of its parts that are full. append calls it after each
// record that does not fill the file, with the lock held.
func (s *Sink) streamOpen(p *partitionState) {
	fb := &p.open
	st := fb.stream
	if st == nil {
		if fb.size <= s.streamAt() || !s.streams() {
			return
		}
		st = &fileStream{key: string(appendPadded([]byte(s.stagingPrefix(p.topic, p.partition)), fb.first, 20)), chunks: &fb.chunks, size: &fb.size}
		if s.pq == nil && s.opts.Compression != compressNone {
			st.enc = s.newEncoder(true)
			st.chunks, st.size = &st.enc.out.chunks, &st.enc.out.size
		}
		st.ctx, st.cancel = context.WithCancel(s.ctx)
		fb.stream = st
	}
	s.encodeOpen(p)      // Parquet: the parts are of the encoded bytes
	s.compressFilled(fb) // compressed: of the compressed bytes
	s.pump(st)
}

// compressFilled feeds the encoder of fb, a streamed compressed file, its
// chunks but the one filling, and frees them: the open file holds one raw
// chunk, and its compressed bytes until their parts are in. The lock is
// held.
func (s *Sink) compressFilled(fb *fileBuffer) {
	n := len(fb.chunks) - 1
	if fb.stream.enc == nil || n <= 0 {
		return
	}
	fb.stream.enc.write(fb.chunks[:n])
	s.free(fb.chunks[:n])
	fb.chunks = append(fb.chunks[:0], fb.chunks[n])
}

// pump starts the uploads of the stream's full parts not yet started, up
// to max_in_flight at once; the first one creates the upload, and the
// others wait for it. The lock is held.
func (s *Sink) pump(st *fileStream) {
	for !st.broken && !st.dropped && !st.cut && st.running < s.opts.MaxInFlight && (st.mpu.id != nil || st.running == 0) {
		i := len(st.mpu.parts)
		off := int64(i) * s.opts.PartSize
		if *st.size-off < s.opts.PartSize {
			return
		}
		st.mpu.parts = append(st.mpu.parts, types.CompletedPart{})
		st.running++
		s.wg.Add(1)
		go s.streamPart(st, i, off)
	}
}

// streamPart uploads part i of an open file, at off, creating the stream's
// upload first when it has none, within max_attempts. A part that fails is
// left for the file's upload at the cut.
func (s *Sink) streamPart(st *fileStream, i int, off int64) {
	defer s.wg.Done()
	length := s.opts.PartSize
	create := createMultipart(s.opts.objectInput(st.key))
	var part types.CompletedPart
	_, err := s.retry.do(st.ctx, "s3://"+s.opts.Bucket+"/"+st.key, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout(length))
		defer cancel()
		s.mu.Lock()
		id := st.mpu.id
		s.mu.Unlock()
		if id == nil {
			// Not cancelled by a drop: an upload the store created must
			// be known to be aborted (abortStream).
			cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), s.attemptTimeout(0))
			out, err := s.client.CreateMultipartUpload(cctx, create)
			ccancel()
			if err != nil {
				return err
			}
			id = out.UploadId
			s.mu.Lock()
			st.mpu.id = id
			s.pump(st) // the next parts waited for the upload
			s.mu.Unlock()
		}
		s.mu.Lock()
		body := sliceChunks(*st.chunks, off-st.base, length)
		s.mu.Unlock()
		var err error
		part, err = s.sendPart(ctx, create, id, i, body, length)
		return err
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	st.running--
	switch {
	case err == nil:
		s.partIn(st.mpu.parts, i, part, st.chunks, &st.base)
	case st.ctx.Err() == nil:
		st.broken = true
		s.log.Warn("S3 sink could not upload a part of a file while it fills; the file is held until its cut, whose upload sends the part again",
			"staging_key", st.key, "part", i+1, "error", err)
	}
	if st.dropped {
		s.abortStream(st)
	} else {
		s.pump(st)
	}
	s.cond.Broadcast()
}

// streamAhead reports whether p's open file streams and holds more than
// max_in_flight parts besides the one filling (compressed bytes, of a
// compressed file): Consume waits for its parts before it appends more.
func (s *Sink) streamAhead(p *partitionState) bool {
	st := p.open.stream
	return st != nil && !st.broken && *st.size-st.base > int64(s.opts.MaxInFlight+1)*s.opts.PartSize
}

// partsRunning reports whether a part of an open file is on its way.
func (s *Sink) partsRunning() bool {
	running := func(fb *fileBuffer) bool { return fb.stream != nil && fb.stream.running > 0 }
	for _, p := range s.parts {
		if running(&p.open) {
			return true
		}
		for _, fb := range p.idle {
			if running(fb) {
				return true
			}
		}
	}
	return false
}

// cutStream hands the stream of fb, just cut into f, to f: its upload
// sends the rest. Should f be dropped before (Release), its staging
// upload is aborted. A Parquet or compressed file first takes its encoded
// bytes; if none of its parts started (they stayed within part_size), f
// goes up as a file held whole, at its key.
func (s *Sink) cutStream(fb *fileBuffer, f *closedFile) {
	st := fb.stream
	if st == nil {
		return
	}
	s.encodeCut(fb, f)   // Parquet: f takes the encoded bytes
	s.compressCut(st, f) // compressed: f takes the compressed bytes
	if len(st.mpu.parts) == 0 {
		// No part started (the encoded bytes stayed within part_size):
		// there is no staging upload, and f goes up as a file held whole.
		st.cancel()
		return
	}
	st.cut, st.chunks, st.size = true, &f.chunks, &f.size
	f.stream = st
	context.AfterFunc(f.ctx, func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		// Closed: Close waits for its goroutines no more (the next
		// assignment cleans up).
		if !st.handed && !s.closed {
			s.dropStream(st, nil)
		}
	})
}

// compressCut ends the compression of st's file, just cut into f: the rest
// of its bytes go through the encoder, whose output becomes f's bytes,
// encoded. The lock is held.
func (s *Sink) compressCut(st *fileStream, f *closedFile) {
	e := st.enc
	if e == nil {
		return
	}
	st.enc = nil
	e.write(f.chunks)
	s.free(f.chunks)
	e.close()
	f.chunks, f.size, f.encoded = e.out.chunks, e.out.size, true
}

// dropStream gives up a stream whose file is dropped: its parts stop, its
// chunks (those of an open file) are freed and its staging upload is
// aborted once no part runs. The lock is held.
func (s *Sink) dropStream(st *fileStream, chunks [][]byte) {
	if st.dropped {
		return
	}
	st.dropped = true
	if e := st.enc; e != nil {
		// An open compressed file: its parts read the encoder's output,
		// not the raw chunks.
		st.enc = nil
		e.drop()
		s.free(chunks)
		chunks = e.out.chunks
	}
	if chunks != nil {
		// The open file's buffer starts over: the stream owns its chunks.
		st.leftover = chunks
		st.chunks = &st.leftover
	}
	st.cancel()
	s.abortStream(st)
}

// abortStream frees a dropped stream's chunks and aborts its upload, once
// no part of it runs, in the background. The lock is held.
func (s *Sink) abortStream(st *fileStream) {
	if st.running > 0 {
		return
	}
	s.free(st.leftover)
	st.leftover = nil
	if st.mpu.id == nil {
		return
	}
	f := &closedFile{key: st.key, mpu: &mpuState{id: st.mpu.id}}
	st.mpu.id = nil
	s.dropMultipart(f)
}

// putStreamed finishes the upload of f, streamed while it was open, as
// an attempt of its round: it sends the parts not yet in and completes
// the staging upload (putMultipart), copies the staging object to f's
// key, with put's settings, and deletes it. A later attempt starts where
// the last one stopped.
func (s *Sink) putStreamed(ctx context.Context, put *s3.PutObjectInput, f *closedFile) error {
	st := f.stream
	s.mu.Lock()
	for st.running > 0 {
		s.cond.Wait()
	}
	if !st.handed {
		st.handed = true
		f.base = st.base
		if st.mpu.id != nil {
			parts := make([]types.CompletedPart, (f.size+s.opts.PartSize-1)/s.opts.PartSize)
			copy(parts, st.mpu.parts)
			f.mpu = &mpuState{id: st.mpu.id, parts: parts}
		}
	}
	staged := st.staged
	s.mu.Unlock()
	if !staged {
		staging := *put
		staging.Key = aws.String(st.key)
		if err := s.putMultipart(ctx, &staging, f); err != nil {
			return err
		}
		s.mu.Lock()
		st.staged = true
		s.mu.Unlock()
	}
	if err := s.copyStaged(ctx, put, st.key, f.size); err != nil {
		if _, status := classify(ctx, err); status == http.StatusNotFound {
			return fmt.Errorf("copying the staging object %s of %s: it is gone (deleted by someone else); its records are written again after a restart replays them: %w", st.key, f.key, err)
		}
		return fmt.Errorf("copying the staging object %s of %d bytes: %w", st.key, f.size, err)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: put.Bucket, Key: aws.String(st.key)}); err != nil {
		s.log.Warn("S3 sink could not delete the staging object of a file it streamed; the next assignment of the partition or the bucket's lifecycle rule removes it",
			"staging_key", st.key, "key", f.key, "error", err)
	}
	return nil
}

// copySource is the x-amz-copy-source of key in bucket: URL-encoded, its
// slashes kept.
func copySource(bucket, key string) *string {
	return aws.String(bucket + "/" + strings.ReplaceAll(url.PathEscape(key), "%2F", "/"))
}

// copyStaged copies the object src, of size bytes, to put's key with
// put's content headers and settings (encryption, with the SSE-C key for
// the source too, storage class, ACL, tags, checksum): in one CopyObject
// up to copyObjectLimit, else in parts of part_size (UploadPartCopy, up
// to max_in_flight at once), then without checksum_algorithm's checksum.
func (s *Sink) copyStaged(ctx context.Context, put *s3.PutObjectInput, src string, size int64) error {
	source := copySource(aws.ToString(put.Bucket), src)
	if size <= copyObjectLimit {
		in := &s3.CopyObjectInput{
			Bucket: put.Bucket, Key: put.Key, CopySource: source,
			MetadataDirective: types.MetadataDirectiveReplace, ContentType: put.ContentType, ContentEncoding: put.ContentEncoding,
			ServerSideEncryption: put.ServerSideEncryption, SSEKMSKeyId: put.SSEKMSKeyId, SSEKMSEncryptionContext: put.SSEKMSEncryptionContext,
			SSECustomerAlgorithm: put.SSECustomerAlgorithm, SSECustomerKey: put.SSECustomerKey, SSECustomerKeyMD5: put.SSECustomerKeyMD5,
			CopySourceSSECustomerAlgorithm: put.SSECustomerAlgorithm, CopySourceSSECustomerKey: put.SSECustomerKey, CopySourceSSECustomerKeyMD5: put.SSECustomerKeyMD5,
			StorageClass: put.StorageClass, ACL: put.ACL, ChecksumAlgorithm: put.ChecksumAlgorithm,
		}
		// REPLACE, tags or none: copying the staging object's tags would
		// need s3:GetObjectTagging.
		in.TaggingDirective, in.Tagging = types.TaggingDirectiveReplace, put.Tagging
		_, err := s.client.CopyObject(ctx, in)
		return err
	}
	// Without a checksum: S3 computes none of a copied part that a
	// completion could name for every store (versitygw reports the
	// source's, MinIO refuses the copy); the parts were checked when they
	// went up to the staging upload.
	create := createMultipart(put)
	create.ChecksumAlgorithm = ""
	out, err := s.client.CreateMultipartUpload(ctx, create)
	if err != nil {
		return err
	}
	n := int((size + s.opts.PartSize - 1) / s.opts.PartSize)
	parts := make([]types.CompletedPart, n)
	err = eachPart(ctx, n, s.opts.MaxInFlight, func(int) bool { return false }, func(i int) error {
		off := int64(i) * s.opts.PartSize
		res, err := s.client.UploadPartCopy(ctx, &s3.UploadPartCopyInput{
			Bucket: put.Bucket, Key: put.Key, UploadId: out.UploadId, PartNumber: aws.Int32(int32(i + 1)),
			CopySource: source, CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", off, min(off+s.opts.PartSize, size)-1)),
			SSECustomerAlgorithm: put.SSECustomerAlgorithm, SSECustomerKey: put.SSECustomerKey, SSECustomerKeyMD5: put.SSECustomerKeyMD5,
			CopySourceSSECustomerAlgorithm: put.SSECustomerAlgorithm, CopySourceSSECustomerKey: put.SSECustomerKey, CopySourceSSECustomerKeyMD5: put.SSECustomerKeyMD5,
		})
		if err != nil {
			return fmt.Errorf("copying part %d of %d: %w", i+1, n, err)
		}
		parts[i] = types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: res.CopyPartResult.ETag}
		return nil
	})
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: put.Bucket, Key: put.Key, UploadId: out.UploadId,
			MultipartUpload:      &types.CompletedMultipartUpload{Parts: parts},
			SSECustomerAlgorithm: put.SSECustomerAlgorithm, SSECustomerKey: put.SSECustomerKey, SSECustomerKeyMD5: put.SSECustomerKeyMD5,
		})
	}
	if err != nil {
		s.dropMultipart(&closedFile{key: aws.ToString(put.Key), mpu: &mpuState{id: out.UploadId}})
	}
	return err
}

// cleanStaging aborts the incomplete staging uploads and deletes the
// staging objects of p: on assignment, nothing else writes them (a
// previous owner's are left over from a crash or a drop). It returns how
// many it removed. The lock is not held.
func (s *Sink) cleanStaging(ctx context.Context, client *s3.Client, p *partitionState) (int, error) {
	bucket, prefix := aws.String(s.opts.Bucket), aws.String(s.stagingPrefix(p.topic, p.partition))
	n := 0
	up := &s3.ListMultipartUploadsInput{Bucket: bucket, Prefix: prefix}
	for {
		page, err := client.ListMultipartUploads(ctx, up)
		if err != nil {
			return n, err
		}
		for _, u := range page.Uploads {
			if _, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: bucket, Key: u.Key, UploadId: u.UploadId}); err != nil {
				return n, err
			}
			n++
		}
		if !aws.ToBool(page.IsTruncated) {
			break
		}
		up.KeyMarker, up.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: bucket, Prefix: prefix})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, o := range page.Contents {
			if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: bucket, Key: o.Key}); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
