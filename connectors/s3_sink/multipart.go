package s3sink

import (
	"context"
	"fmt"
	"net/http"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Multipart uploads: a file whose encoded size is above part_size goes up
// in parts of exactly part_size bytes (the last one smaller), up to
// max_in_flight at once, and appears whole at CompleteMultipartUpload under
// its key, as a PutObject would. The boundaries depend only on the bytes,
// so a replay writes the same object with the same ETag. A failed attempt
// leaves its upload to the next, which sends only the missing parts; a
// dropped file's upload is aborted; one a crash left behind is aborted
// when the partition is assigned again (abortStale in recovery.go), or by
// the bucket's lifecycle rule.

// multipart reports whether a file of size bytes uploads in parts.
func (s *Sink) multipart(size int64) bool {
	return s.opts.PartSize > 0 && size > s.opts.PartSize
}

// putMultipart uploads f, whose body put describes, in parts: it starts
// f's upload, or resumes the one a failed attempt left, sends the parts
// not yet in and completes it. A failed attempt keeps the upload for the
// next one, unless the store no longer has it (404: aborted meanwhile).
func (s *Sink) putMultipart(ctx context.Context, put *s3.PutObjectInput, f *closedFile) error {
	create := createMultipart(put)
	if f.mpu == nil && f.base > 0 {
		// Its first parts' bytes are gone: only a replay can write it.
		return fmt.Errorf("the multipart upload of %s was aborted by someone else after %d bytes of it were sent and freed; its records are written again after a restart replays them", f.key, f.base)
	}
	if f.mpu == nil {
		out, err := s.client.CreateMultipartUpload(ctx, create)
		if err != nil {
			return err
		}
		f.mpu = &mpuState{id: out.UploadId, parts: make([]types.CompletedPart, (f.size+s.opts.PartSize-1)/s.opts.PartSize)}
	}
	err := s.uploadParts(ctx, create, f)
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: put.Bucket, Key: put.Key, UploadId: f.mpu.id,
			MultipartUpload:      &types.CompletedMultipartUpload{Parts: f.mpu.parts},
			SSECustomerAlgorithm: put.SSECustomerAlgorithm, SSECustomerKey: put.SSECustomerKey, SSECustomerKeyMD5: put.SSECustomerKeyMD5,
		})
	}
	if err == nil {
		f.mpu = nil
		return nil
	}
	if _, status := classify(ctx, err); status == http.StatusNotFound {
		f.mpu = nil // NoSuchUpload: the next attempt starts a new one
	}
	return fmt.Errorf("multipart upload of %d bytes in parts of %s: %w", f.size, formatSize(s.opts.PartSize), err)
}

// dropMultipart aborts the upload a file leaves unfinished (dropped after
// failed attempts, or its partition released), in the background. It runs
// in f's upload goroutine, with the lock held.
func (s *Sink) dropMultipart(f *closedFile) {
	m := f.mpu
	if m == nil {
		return
	}
	f.mpu = nil
	key := f.key
	if f.stream != nil {
		key = f.stream.key // a streamed file's parts are under its staging key
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// The sink's context may be over (Close): abort within a bound of
		// its own.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(s.ctx), s.attemptTimeout(0))
		defer cancel()
		if _, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(s.opts.Bucket), Key: aws.String(key), UploadId: m.id}); err != nil {
			s.log.Warn("S3 sink could not abort the multipart upload of a file it dropped; the next assignment of the partition or the bucket's lifecycle rule removes it",
				"key", key, "upload_id", aws.ToString(m.id), "error", err)
		}
	}()
}

// uploadParts sends the parts of f not yet in f.mpu, up to max_in_flight
// at once, and records each. After a failure no part starts; those on
// their way finish, so the next attempt sends only the parts still
// missing. The chunks below the parts in go back to the pool as the parts
// go up (partIn), so an upload holds less and less of its file.
func (s *Sink) uploadParts(ctx context.Context, create *s3.CreateMultipartUploadInput, f *closedFile) error {
	m, size := f.mpu, f.size
	n := len(m.parts)
	return eachPart(ctx, n, s.opts.MaxInFlight, func(i int) bool { return m.parts[i].ETag != nil }, func(i int) error {
		off := int64(i) * s.opts.PartSize
		length := min(s.opts.PartSize, size-off)
		part, err := s.sendPart(ctx, create, m.id, i, s.bodyOf(&f.chunks, &f.base, off, length), length)
		if err != nil {
			return fmt.Errorf("part %d of %d: %w", i+1, n, err)
		}
		s.mu.Lock()
		defer s.mu.Unlock()
		s.partIn(m.parts, i, part, &f.chunks, &f.base)
		return nil
	})
}

// eachPart runs do for each part below n that done does not report,
// up to limit at once. After a failure no part starts; those on their
// way finish. It returns the first failure, or ctx's error when ctx ended
// before every part started.
func eachPart(ctx context.Context, n, limit int, done func(i int) bool, do func(i int) error) error {
	var (
		mu    sync.Mutex
		first error
		wg    sync.WaitGroup
	)
	failed := make(chan struct{})
	next := make(chan int)
	for range min(n, limit) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					mu.Lock()
					if first == nil {
						first = err
						close(failed)
					}
					mu.Unlock()
				}
			}
		}()
	}
feed:
	for i := range n {
		if done(i) {
			continue // in since an earlier attempt
		}
		select {
		case next <- i:
		case <-failed:
			break feed
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// sendPart uploads part i (from 0) of the upload id that create started,
// body its length bytes, and returns it as the completion lists it.
func (s *Sink) sendPart(ctx context.Context, create *s3.CreateMultipartUploadInput, id *string, i int, body [][]byte, length int64) (types.CompletedPart, error) {
	in := &s3.UploadPartInput{
		Bucket: create.Bucket, Key: create.Key, UploadId: id, PartNumber: aws.Int32(int32(i + 1)),
		Body: newChunkReader(body), ContentLength: aws.Int64(length),
		ChecksumAlgorithm:    create.ChecksumAlgorithm,
		SSECustomerAlgorithm: create.SSECustomerAlgorithm, SSECustomerKey: create.SSECustomerKey, SSECustomerKeyMD5: create.SSECustomerKeyMD5,
	}
	out, err := s.client.UploadPart(ctx, in)
	if err != nil {
		return types.CompletedPart{}, err
	}
	return types.CompletedPart{
		PartNumber: in.PartNumber, ETag: out.ETag,
		ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME,
		ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256,
	}, nil
}

// bodyOf returns the bytes [off, off+n) of a file held as chunks, whose
// first base bytes were freed.
func (s *Sink) bodyOf(chunks *[][]byte, base *int64, off, n int64) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return sliceChunks(*chunks, off-*base, n)
}

// partIn records part i of a file's parts as in, and frees the chunks of
// the file that end below its first part not yet in: no part still to
// send reads them. The lock is held.
func (s *Sink) partIn(parts []types.CompletedPart, i int, part types.CompletedPart, chunks *[][]byte, base *int64) {
	parts[i] = part
	in := int64(0)
	for _, p := range parts {
		if p.ETag == nil {
			break
		}
		in += s.opts.PartSize
	}
	k := 0
	for end := *base; k < len(*chunks) && end+int64(len((*chunks)[k])) <= in; k++ {
		end += int64(len((*chunks)[k]))
	}
	if k == 0 {
		return
	}
	for _, c := range (*chunks)[:k] {
		*base += int64(len(c))
	}
	s.free((*chunks)[:k])
	*chunks = (*chunks)[k:]
	s.cond.Broadcast()
}

// sliceChunks returns the bytes [off, off+n) of chunks as slices of them,
// without copying.
func sliceChunks(chunks [][]byte, off, n int64) [][]byte {
	var out [][]byte
	for _, c := range chunks {
		if n <= 0 {
			break
		}
		if off >= int64(len(c)) {
			off -= int64(len(c))
			continue
		}
		k := min(int64(len(c))-off, n)
		out = append(out, c[off:off+k])
		off, n = 0, n-k
	}
	return out
}
