package s3sink

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/picomq/pico-connectors/sdk"
)

// Replay recovery: after an assignment, the files a partition is about to
// write may already be in the bucket. They are looked up and listed, and
// their records skipped (see the package doc).

// lookUp lists the bucket for an object of the file that would start at
// first, and returns its last offset. The lock is released meanwhile.
func (s *Sink) lookUp(p *partitionState, dir string, first int64) (bool, int64, error) {
	prefix := filePrefix(dir, p.partition, first)
	client := s.client
	s.mu.Unlock()
	found, last, err := listLast(s.ctx, client, s.opts.Bucket, prefix, s.attemptTimeout(0))
	s.mu.Lock()
	if err != nil {
		return false, 0, fmt.Errorf("s3 sink: listing s3://%s/%s* to find files uploaded before the last commit (the sink needs s3:ListBucket): %w", s.opts.Bucket, prefix, err)
	}
	if s.parts[p.bufferKey] != p || p.released {
		return false, 0, errReleased
	}
	if found {
		s.log.Info("S3 sink found a file uploaded before the last commit; its records are skipped",
			"topic", p.topic, "partition", p.partition, "first_offset", first, "last_offset", last)
	}
	return found, last, nil
}

// listDir lists the files of p in dir that end at from or later, sorted by
// first offset (the largest last offset of several with one first offset).
// The lock is released meanwhile.
func (s *Sink) listDir(p *partitionState, dir string, from int64) ([]span, error) {
	client := s.client
	s.mu.Unlock()
	spans, err := listSpans(s.ctx, client, s.opts.Bucket, dir, p.partition, from, s.attemptTimeout(0))
	s.mu.Lock()
	if err != nil {
		return nil, fmt.Errorf("s3 sink: listing s3://%s/%s to find files uploaded before the last commit (the sink needs s3:ListBucket): %w", s.opts.Bucket, dir, err)
	}
	if s.parts[p.bufferKey] != p || p.released {
		return nil, errReleased
	}
	return spans, nil
}

// covering returns the file of spans that holds offset off, the one that
// reaches furthest when several do.
func covering(spans []span, off int64) (span, bool) {
	var c span
	ok := false
	for _, sp := range spans {
		if sp.first <= off && off <= sp.last && (!ok || sp.last > c.last) {
			c, ok = sp, true
		}
	}
	return c, ok
}

// lookAhead keeps in p.ahead the files of spans that start after first
// (the first file not found after an assignment).
func (s *Sink) lookAhead(p *partitionState, spans []span, first int64) {
	i := sort.Search(len(spans), func(i int) bool { return spans[i].first > first })
	if len(spans) > i {
		s.log.Info("S3 sink found files uploaded before the last commit beyond one that was not; the records before each are written again and its own skipped",
			"topic", p.topic, "partition", p.partition, "from_offset", first, "files", len(spans)-i)
		p.ahead = spans[i:]
	}
}

// skipAhead, when rec reaches the next file of p.ahead, cuts p's open file
// right before it and moves p.next past it, so that rec and the rest of
// that file's records are skipped.
func (s *Sink) skipAhead(p *partitionState, rec *sdk.Record, batch []sdk.Record) error {
	for len(p.ahead) > 0 && p.ahead[0].last < rec.Offset {
		p.ahead = p.ahead[1:]
	}
	if len(p.ahead) == 0 || rec.Offset < p.ahead[0].first {
		return nil
	}
	a := p.ahead[0]
	if p.group.count > 0 {
		if err := s.close(p, batch); err != nil {
			return err
		}
	}
	p.ahead = p.ahead[1:]
	p.next = max(p.next, a.last+1)
	s.log.Info("S3 sink found a file uploaded before the last commit; its records are skipped",
		"topic", p.topic, "partition", p.partition, "first_offset", a.first, "last_offset", a.last)
	return nil
}

// listSpans returns the data objects of partition in dir whose last offset
// is from or above, sorted by first offset (the largest last offset of
// several with one first offset).
func listSpans(ctx context.Context, client *s3.Client, bucket, dir string, partition int32, from int64, timeout time.Duration) ([]span, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prefix := string(append(appendPadded([]byte(dir), int64(partition), 5), '-'))
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	var out []span
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			f, l, ok := offsetsOf(aws.ToString(o.Key), prefix)
			switch {
			case !ok || l < from:
			case len(out) > 0 && out[len(out)-1].first == f:
				out[len(out)-1].last = max(out[len(out)-1].last, l)
			default:
				out = append(out, span{f, l})
			}
		}
	}
	slices.SortFunc(out, func(a, b span) int { return cmp.Compare(a.first, b.first) })
	return out, nil
}

// listLast returns the largest last offset of the data objects whose keys
// start with prefix.
func listLast(ctx context.Context, client *s3.Client, bucket, prefix string, timeout time.Duration) (found bool, last int64, err error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pages := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return false, 0, err
		}
		for _, o := range page.Contents {
			if n, ok := lastOffsetOf(aws.ToString(o.Key), prefix); ok && (!found || n > last) {
				found, last = true, n
			}
		}
	}
	return found, last, nil
}

// abortStale aborts the incomplete multipart uploads of p in dir that
// start at first or later, which a crash during their upload left: the
// replay from first writes them again. When files stream, it also removes
// p's staging uploads and objects (cleanStaging), wherever their files
// were going. It runs once per assignment, before the partition's first
// file, with the lock released. A failure (no
// s3:ListBucketMultipartUploads, say) is logged, not returned: the bucket's
// lifecycle rule removes what is left.
func (s *Sink) abortStale(p *partitionState, dir string, first int64) error {
	if s.opts.PartSize <= 0 || p.aborted {
		return nil
	}
	p.aborted = true
	client, streams := s.client, s.streams()
	s.mu.Unlock()
	n, err := abortUploads(s.ctx, client, s.opts.Bucket, dir, p.partition, first, s.attemptTimeout(0))
	staged := 0
	if err == nil && streams {
		ctx, cancel := context.WithTimeout(s.ctx, s.attemptTimeout(0))
		staged, err = s.cleanStaging(ctx, client, p)
		cancel()
	}
	s.mu.Lock()
	if err != nil {
		s.log.Warn("S3 sink could not abort the incomplete multipart uploads, or delete the staging objects, a crash may have left (it needs s3:ListBucketMultipartUploads, s3:AbortMultipartUpload and s3:DeleteObject); the bucket's lifecycle rule has to remove them",
			"bucket", s.opts.Bucket, "prefix", dir, "staging_prefix", s.stagingPrefix(p.topic, p.partition), "topic", p.topic, "partition", p.partition, "error", err)
	} else if n+staged > 0 {
		s.log.Info("S3 sink aborted incomplete multipart uploads, or deleted staging objects, left before the last commit; the replay writes them again",
			"prefix", dir, "topic", p.topic, "partition", p.partition, "uploads", n, "staging", staged, "first_offset", first)
	}
	if s.parts[p.bufferKey] != p || p.released {
		return errReleased
	}
	return nil
}

// abortUploads aborts the incomplete multipart uploads of the data
// objects of partition in dir whose first offset is from or above, and
// returns how many it aborted.
func abortUploads(ctx context.Context, client *s3.Client, bucket, dir string, partition int32, from int64, timeout time.Duration) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	prefix := string(append(appendPadded([]byte(dir), int64(partition), 5), '-'))
	pages := s3.NewListMultipartUploadsPaginator(client, &s3.ListMultipartUploadsInput{Bucket: aws.String(bucket), Prefix: aws.String(prefix)})
	n := 0
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return n, err
		}
		for _, u := range page.Uploads {
			if f, _, ok := offsetsOf(aws.ToString(u.Key), prefix); !ok || f < from {
				continue
			}
			if _, err := client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(bucket), Key: u.Key, UploadId: u.UploadId}); err != nil {
				return n, err
			}
			n++
		}
	}
	return n, nil
}
