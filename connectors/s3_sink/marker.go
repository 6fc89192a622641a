package s3sink

import (
	"bytes"
	"context"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The cut marker of a group of several files (exactly_once): an empty
// object <lead dir>/_<partition>-<first>-<last>.group, written before any
// file of the group uploads and deleted once every one is in the bucket,
// before the group counts as durable. The files themselves upload side by
// side. After a crash the lead's directory (the lead is the file of the
// group's first record) tells everything about the group: the marker
// means some of its files may be in the bucket, and names the offset the
// replay must cut the group at, wherever the first run cut it (at a
// record, or by the wall clock); the replay writes every file again, the
// same keys with the same bytes. Without a marker, the lead in the bucket
// means every file is, and no lead means none is. The leading '_' makes
// Hive, Spark, Trino and Athena skip the marker.
//
// Groups upload side by side too: a group's files may start while earlier
// groups of the partition are on their way once each of those has its
// marker in the bucket (mayStart). After a crash, then, every group from
// the committed one on is either found in part by its marker, or whole by
// its lead, or has no file in the bucket (and no later group has: it
// would have waited for this one's marker); the replay looks up the group
// after one it found in part, as it does after one it found whole.

// marked reports whether f is a file of a group whose marker is in the
// bucket.
func (f *closedFile) marked() bool { return f.mark != nil && f.mark.written.Load() }

// groupMarkerSuffix ends a marker's key.
const groupMarkerSuffix = "group"

// markerKey returns the key of the marker of the group of p in offsets
// first to last whose lead is in dir.
func markerKey(dir string, partition int32, first, last int64) string {
	return fileKey(dir+"_", partition, first, last, groupMarkerSuffix)
}

// markGroup writes f's group marker unless a file of the group did.
func (s *Sink) markGroup(ctx context.Context, f *closedFile) error {
	m := f.mark
	if m == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.written.Load() {
		return nil
	}
	in := &s3.PutObjectInput{Bucket: aws.String(s.opts.Bucket), Key: aws.String(m.key), Body: bytes.NewReader(nil)}
	s.opts.Object.putObject(in) // an encryption-only bucket policy accepts the marker too
	_, err := s.client.PutObject(ctx, in)
	m.written.Store(err == nil)
	return err
}

// uploadedInGroup counts f, just uploaded, and deletes the marker of its
// group once every file of it is in the bucket. A failure leaves an empty
// object behind: a replay from before the group then writes the group
// again, with the same bytes.
func (s *Sink) uploadedInGroup(f *closedFile) {
	m := f.mark
	if m == nil {
		return
	}
	m.mu.Lock()
	m.left--
	last := m.left == 0
	m.mu.Unlock()
	if !last {
		return
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.attemptTimeout(0))
	defer cancel()
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(s.opts.Bucket), Key: aws.String(m.key)}); err != nil {
		s.log.Warn("S3 sink could not delete the cut marker of a group of files; a replay from before the group writes the group again", "key", m.key, "error", err)
	}
}
