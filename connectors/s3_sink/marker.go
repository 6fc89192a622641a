package s3sink

import (
	"bytes"
	"context"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The cut marker of a group of several files (exactly_once): an empty
// object <lead dir>/_<partition>-<first>-<last>.group, written before the
// first file of the group uploads and deleted once the lead (the file of
// the group's first record, uploaded last) is in the bucket. After a crash
// the lead's directory tells everything about the group: the lead there
// means every file is; the marker alone means some files may be, and names
// the offset the replay must cut the group at, wherever the first run cut
// it (at a record, or by the wall clock); neither means none is. The
// leading '_' makes Hive, Spark, Trino and Athena skip the marker.

// groupMark is the marker of one group, shared by its files.
type groupMark struct {
	mu      sync.Mutex
	key     string
	written bool
}

// groupMarkerSuffix ends a marker's key.
const groupMarkerSuffix = "group"

// markerKey returns the key of the marker of the group of p in offsets
// first to last whose lead is in dir.
func markerKey(dir string, partition int32, first, last int64) string {
	return fileKey(dir+"_", partition, first, last, groupMarkerSuffix)
}

// markGroup writes f's group marker unless a file of the group did.
func (s *Sink) markGroup(ctx context.Context, f *file) error {
	m := f.mark
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written {
		return nil
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.opts.Bucket), Key: aws.String(m.key), Body: bytes.NewReader(nil),
	})
	m.written = err == nil
	return err
}

// unmarkGroup deletes the marker of the group whose lead f has just been
// uploaded. A failure leaves an empty object behind, which a replay
// ignores (the lead is found first).
func (s *Sink) unmarkGroup(f *file) {
	if f.mark == nil {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.attemptTimeout(0))
	defer cancel()
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.opts.Bucket), Key: aws.String(f.mark.key)}); err != nil {
		s.log.Warn("S3 sink could not delete the cut marker of a group of files; it is an empty object the sink ignores", "key", f.mark.key, "error", err)
	}
}
