package s3sink

import (
	"context"
	"fmt"
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
// aborts its upload; one a crash left behind is aborted when the partition
// is assigned again (abortStale in recovery.go), or by the bucket's
// lifecycle rule.

// multipart reports whether a file of size bytes uploads in parts.
func (s *Sink) multipart(size int64) bool {
	return s.opts.PartSize > 0 && size > s.opts.PartSize
}

// putMultipart uploads the body put describes, the chunks of size bytes,
// in parts. It aborts the upload when any step fails.
func (s *Sink) putMultipart(ctx context.Context, put *s3.PutObjectInput, chunks [][]byte, size int64) error {
	create := createMultipart(put)
	out, err := s.client.CreateMultipartUpload(ctx, create)
	if err != nil {
		return err
	}
	id := out.UploadId
	parts, err := s.uploadParts(ctx, create, id, chunks, size)
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{
			Bucket: put.Bucket, Key: put.Key, UploadId: id,
			MultipartUpload:      &types.CompletedMultipartUpload{Parts: parts},
			SSECustomerAlgorithm: put.SSECustomerAlgorithm, SSECustomerKey: put.SSECustomerKey, SSECustomerKeyMD5: put.SSECustomerKeyMD5,
		})
	}
	if err != nil {
		// The attempt's context may be over: abort within a bound of its own.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.attemptTimeout(0))
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: put.Bucket, Key: put.Key, UploadId: id}); aerr != nil {
			s.log.Warn("S3 sink could not abort a failed multipart upload; the next assignment of the partition or the bucket's lifecycle rule removes it",
				"key", aws.ToString(put.Key), "upload_id", aws.ToString(id), "error", aerr)
		}
		return fmt.Errorf("multipart upload of %d bytes in parts of %s: %w", size, formatSize(s.opts.PartSize), err)
	}
	return nil
}

// uploadParts sends the parts of the chunks, up to max_in_flight at once,
// and returns them in order for CompleteMultipartUpload. The first failure
// cancels the others.
func (s *Sink) uploadParts(ctx context.Context, create *s3.CreateMultipartUploadInput, id *string, chunks [][]byte, size int64) ([]types.CompletedPart, error) {
	n := int((size + s.opts.PartSize - 1) / s.opts.PartSize)
	parts := make([]types.CompletedPart, n)
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, s.opts.MaxInFlight) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				off := int64(i) * s.opts.PartSize
				body := sliceChunks(chunks, off, min(s.opts.PartSize, size-off))
				in := &s3.UploadPartInput{
					Bucket: create.Bucket, Key: create.Key, UploadId: id, PartNumber: aws.Int32(int32(i + 1)),
					Body: newChunkReader(body), ContentLength: aws.Int64(min(s.opts.PartSize, size-off)),
					ChecksumAlgorithm:    create.ChecksumAlgorithm,
					SSECustomerAlgorithm: create.SSECustomerAlgorithm, SSECustomerKey: create.SSECustomerKey, SSECustomerKeyMD5: create.SSECustomerKeyMD5,
				}
				out, err := s.client.UploadPart(ctx, in)
				if err != nil {
					cancel(fmt.Errorf("part %d of %d: %w", i+1, n, err))
					continue
				}
				parts[i] = types.CompletedPart{
					PartNumber: in.PartNumber, ETag: out.ETag,
					ChecksumCRC32: out.ChecksumCRC32, ChecksumCRC32C: out.ChecksumCRC32C, ChecksumCRC64NVME: out.ChecksumCRC64NVME,
					ChecksumSHA1: out.ChecksumSHA1, ChecksumSHA256: out.ChecksumSHA256,
				}
			}
		}()
	}
feed:
	for i := range n {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if ctx.Err() != nil {
		return nil, context.Cause(ctx)
	}
	return parts, nil
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
