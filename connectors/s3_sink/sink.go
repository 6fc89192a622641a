// Package s3sink is the S3 sink connector: it collects records into files,
// one open file per topic and partition, and uploads each file as a single
// object to Amazon S3 or an S3-compatible store.
//
// Consume returns once a batch is buffered; a file is uploaded when it
// reaches max_file_size or max_messages_per_file, and Close uploads every
// file still open. See the S3 sink reference page for the guarantees.
package s3sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/picomq/pico-connectors/runtime/plugin"
)

// ProbeKey is the object Open writes and deletes to check the bucket.
const ProbeKey = ".picomq-sink-probe"

// LostSuffix ends the key of the marker written for a file that could not
// be uploaded.
const LostSuffix = ".lost"

// Sink is the S3 sink. Consume and Close must not be called concurrently
// with each other; the runtime calls them from one goroutine.
type Sink struct {
	opts   options
	log    *slog.Logger
	fmt    *formatter
	pool   *chunkPool
	client *s3.Client
	retry  retrier
	now    func() time.Time
	// attemptTimeout bounds one PutObject of a file of the given size.
	attemptTimeout func(size int64) time.Duration

	mu      sync.Mutex
	buffers map[bufferKey]*fileBuffer
	last    *fileBuffer // the buffer the previous record went to
	closed  bool
	open    int // buffers holding records

	m sinkMetrics
}

type bufferKey struct {
	topic     string
	partition int32
}

// fileBuffer is the open file of one topic and partition.
type fileBuffer struct {
	topic     string
	partition int32
	tail      []byte   // metaTail(topic, partition)
	chunks    [][]byte // the file; the last chunk is being filled
	size      int64    // bytes in chunks
	count     int
	first     int64
	last      int64
	firstTime time.Time
}

type sinkMetrics struct {
	recordsBuffered plugin.Counter
	recordsUploaded plugin.Counter
	recordsLost     plugin.Counter
	filesUploaded   plugin.Counter
	filesLost       plugin.Counter
	bytesUploaded   plugin.Counter
	retries         plugin.Counter
	uploadSeconds   plugin.Histogram
	openFiles       plugin.Gauge
}

func newMetrics(m plugin.Metrics) sinkMetrics {
	if m == nil {
		m = plugin.DiscardMetrics
	}
	return sinkMetrics{
		recordsBuffered: m.Counter("s3_sink_records_buffered_total", "Records appended to an open file."),
		recordsUploaded: m.Counter("s3_sink_records_uploaded_total", "Records in files uploaded to S3."),
		recordsLost:     m.Counter("s3_sink_records_lost_total", "Records in files dropped after a failed upload."),
		filesUploaded:   m.Counter("s3_sink_files_uploaded_total", "Files uploaded to S3."),
		filesLost:       m.Counter("s3_sink_files_lost_total", "Files dropped after a failed upload; each has a .lost marker."),
		bytesUploaded:   m.Counter("s3_sink_bytes_uploaded_total", "Bytes of files uploaded to S3."),
		retries:         m.Counter("s3_sink_upload_retries_total", "PutObject attempts that failed and were retried."),
		uploadSeconds: m.Histogram("s3_sink_upload_duration_seconds", "Time to upload one file, retries included.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}),
		openFiles: m.Gauge("s3_sink_open_files", "Files open in memory, one per topic and partition with buffered records."),
	}
}

// newSink builds a sink from options; nothing is checked or connected
// until Open.
func newSink(o options, env plugin.Env) *Sink {
	o.Prefix = trimPrefix(o.Prefix)
	log := env.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	chunk := chunkSizeFor(o.MaxFileSize, o.RotateByMessages)
	// Keep enough free chunks to refill one file, so rotation does not
	// allocate; the rest go to the garbage collector.
	maxFree := 4 * chunk
	if !o.RotateByMessages {
		maxFree = int(o.MaxFileSize) + 2*chunk
	}
	s := &Sink{
		pool:           newChunkPool(chunk, maxFree),
		opts:           o,
		log:            log,
		fmt:            newFormatter(&o),
		now:            time.Now,
		attemptTimeout: attemptTimeout,
		buffers:        map[bufferKey]*fileBuffer{},
		m:              newMetrics(env.Metrics),
	}
	s.retry = retrier{
		maxAttempts: o.MaxAttempts,
		base:        o.RetryDelay,
		sleep:       sleepCtx,
		rand:        rand.Float64,
		onRetry: func(attempt int, d time.Duration, err error) {
			s.m.retries.Add(1)
			s.log.Warn("S3 PutObject failed, retrying", "attempt", attempt, "max_attempts", o.MaxAttempts,
				"delay", d, "error", err)
		},
	}
	return s
}

// Open validates the configuration, builds the S3 client and checks the
// bucket by writing and deleting ProbeKey.
func (s *Sink) Open(ctx context.Context) error {
	if err := s.opts.validate(); err != nil {
		return err
	}
	client, err := newClient(ctx, &s.opts)
	if err != nil {
		return err
	}
	s.client = client
	if err := s.probe(ctx); err != nil {
		return fmt.Errorf("S3 bucket '%s' connectivity check failed: %w", s.opts.Bucket, err)
	}
	return nil
}

// newClient builds an SDK client with static credentials or the default
// chain, a custom endpoint and path-style addressing when asked, and the
// SDK's own retries turned off: the sink's policy is the only one.
func newClient(ctx context.Context, o *options) (*s3.Client, error) {
	load := []func(*awsconfig.LoadOptions) error{
		awsconfig.WithRegion(o.Region),
		awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }),
	}
	if o.AccessKeyID != "" {
		load = append(load, awsconfig.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(o.AccessKeyID, o.SecretAccessKey, "")))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("S3 client configuration: %w", err)
	}
	return s3.NewFromConfig(cfg, func(so *s3.Options) {
		if o.Endpoint != "" {
			so.BaseEndpoint = aws.String(o.Endpoint)
		}
		so.UsePathStyle = o.usePathStyle()
		so.Retryer = aws.NopRetryer{}
		so.RetryMaxAttempts = 1
	}), nil
}

func (s *Sink) probe(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout(0))
	defer cancel()
	if _, err := s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.opts.Bucket), Key: aws.String(ProbeKey), Body: bytes.NewReader(nil),
	}); err != nil {
		return fmt.Errorf("writing %s: %w", ProbeKey, err)
	}
	if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.opts.Bucket), Key: aws.String(ProbeKey),
	}); err != nil {
		return fmt.Errorf("deleting %s: %w", ProbeKey, err)
	}
	return nil
}

// Consume appends every record to the open file of its topic and
// partition, uploading files as they reach the rotation threshold. It
// returns the error of an upload that failed for good, after writing that
// file's .lost marker; records of the batch not yet appended are left for
// the redelivery.
func (s *Sink) Consume(ctx context.Context, batch []plugin.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("s3 sink: Consume after Close")
	}
	if s.client == nil {
		return errors.New("s3 sink: Consume before Open")
	}
	appended := 0
	defer func() { s.m.recordsBuffered.Add(float64(appended)) }()
	for i := range batch {
		rec := &batch[i]
		fb := s.last
		if fb == nil || fb.partition != rec.Partition || fb.topic != rec.Topic {
			fb = s.buffer(rec.Topic, rec.Partition)
			s.last = fb
		}
		s.append(fb, rec)
		appended++
		if s.full(fb) {
			if err := s.flush(ctx, fb); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *Sink) buffer(topic string, partition int32) *fileBuffer {
	k := bufferKey{topic, partition}
	fb := s.buffers[k]
	if fb == nil {
		fb = &fileBuffer{topic: topic, partition: partition, tail: metaTail(topic, partition)}
		s.buffers[k] = fb
	}
	return fb
}

// append formats rec into fb's last chunk, starting a new chunk when the
// record might not fit.
func (s *Sink) append(fb *fileBuffer, rec *plugin.Record) {
	if fb.count == 0 {
		fb.first = rec.Offset
		fb.firstTime = rec.Timestamp
		s.open++
		s.m.openFiles.Set(float64(s.open))
	}
	need := s.fmt.estimate(rec, len(fb.topic)) + 1 // + the closing ']'
	n := len(fb.chunks)
	if n == 0 || cap(fb.chunks[n-1])-len(fb.chunks[n-1]) < need {
		fb.chunks = append(fb.chunks, s.pool.get(n, need))
		n++
	}
	c := &fb.chunks[n-1]
	before := len(*c)
	*c = s.fmt.appendRecord(*c, rec, fb.count == 0, fb.tail)
	fb.size += int64(len(*c) - before)
	fb.count++
	fb.last = rec.Offset
}

func (s *Sink) full(fb *fileBuffer) bool {
	if s.opts.RotateByMessages {
		return fb.count >= s.opts.MaxMessages
	}
	return fb.size >= s.opts.MaxFileSize
}

// flush closes fb's file and uploads it, then empties the buffer whatever
// the outcome. A failed upload writes the .lost marker and counts the
// records as lost.
func (s *Sink) flush(ctx context.Context, fb *fileBuffer) error {
	if fb.count == 0 {
		return nil
	}
	count := fb.count
	info := fileInfo{Topic: fb.topic, Partition: fb.partition, FirstOffset: fb.first, LastOffset: fb.last, FirstTime: fb.firstTime}
	if last := len(fb.chunks) - 1; last >= 0 {
		before := len(fb.chunks[last])
		fb.chunks[last] = s.fmt.finish(fb.chunks[last])
		fb.size += int64(len(fb.chunks[last]) - before)
	}
	size := fb.size
	defer func() {
		s.pool.put(fb.chunks)
		clear(fb.chunks)
		fb.chunks = fb.chunks[:0]
		fb.size = 0
		fb.count = 0
		s.open--
		s.m.openFiles.Set(float64(s.open))
	}()

	key, err := objectKey(s.opts.Prefix, s.opts.PathTemplate, info, s.opts.Format.ext())
	if err != nil {
		s.m.recordsLost.Add(float64(count))
		s.m.filesLost.Add(1)
		s.log.Error("S3 sink dropped a file: its object key cannot be rendered", "topic", info.Topic,
			"partition", info.Partition, "first_offset", info.FirstOffset, "last_offset", info.LastOffset,
			"records", count, "error", err)
		return fmt.Errorf("s3 sink: file of topic '%s' partition %d offsets %d-%d (%d records) dropped: %w",
			info.Topic, info.Partition, info.FirstOffset, info.LastOffset, count, err)
	}
	start := s.now()
	attempts, err := s.retry.do(ctx, "s3://"+s.opts.Bucket+"/"+key, func(ctx context.Context) error {
		ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout(size))
		defer cancel()
		_, err := s.client.PutObject(ctx, &s3.PutObjectInput{
			Bucket:        aws.String(s.opts.Bucket),
			Key:           aws.String(key),
			Body:          newChunkReader(fb.chunks),
			ContentLength: aws.Int64(size),
			ContentType:   aws.String(s.contentType()),
		})
		return err
	})
	if err == nil {
		s.m.uploadSeconds.Observe(s.now().Sub(start).Seconds())
		s.m.filesUploaded.Add(1)
		s.m.recordsUploaded.Add(float64(count))
		s.m.bytesUploaded.Add(float64(size))
		s.log.Debug("S3 sink uploaded a file", "key", key, "records", count, "bytes", size, "attempts", attempts)
		return nil
	}
	s.m.recordsLost.Add(float64(count))
	s.m.filesLost.Add(1)
	markErr := s.writeLostMarker(ctx, key, info, count, attempts, err)
	s.log.Error("S3 sink dropped a file after a failed upload", "key", key, "marker", key+LostSuffix,
		"first_offset", info.FirstOffset, "last_offset", info.LastOffset, "records", count,
		"attempts", attempts, "error", err, "marker_error", markErr)
	if markErr != nil {
		return errors.Join(err, fmt.Errorf("writing the marker %s%s also failed: %w", key, LostSuffix, markErr))
	}
	return err
}

func (s *Sink) contentType() string {
	switch s.opts.Format {
	case formatJSONLines:
		return "application/x-ndjson"
	case formatJSONArray:
		return "application/json"
	}
	return "application/octet-stream"
}

// LostMarker is the JSON body of a <key>.lost object.
type LostMarker struct {
	Bucket      string `json:"bucket"`
	Key         string `json:"key"`
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	RecordCount int    `json:"record_count"`
	Attempts    int    `json:"attempts"`
	Error       string `json:"error"`
	Time        string `json:"time"`
}

// writeLostMarker writes <key>.lost once, without retries: the store has
// just refused the file, and the marker is a courtesy next to the error.
func (s *Sink) writeLostMarker(ctx context.Context, key string, info fileInfo, count, attempts int, cause error) error {
	m := LostMarker{
		Bucket: s.opts.Bucket, Key: key, Topic: info.Topic, Partition: info.Partition,
		FirstOffset: info.FirstOffset, LastOffset: info.LastOffset, RecordCount: count,
		Attempts: attempts, Error: cause.Error(), Time: s.now().UTC().Format(time.RFC3339Nano),
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// The marker is how an operator finds the range to recover: write it
	// even when the caller's context has just ended (a stop during the
	// retries), within a bound of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.attemptTimeout(int64(len(body))))
	defer cancel()
	_, err = s.client.PutObject(ctx, &s3.PutObjectInput{
		Bucket:      aws.String(s.opts.Bucket),
		Key:         aws.String(key + LostSuffix),
		Body:        bytes.NewReader(body),
		ContentType: aws.String("application/json"),
	})
	return err
}

// Close uploads every open file, then releases the buffers. It returns
// every upload error; each failed file has its .lost marker.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if s.client == nil {
		return nil
	}
	keys := make([]bufferKey, 0, len(s.buffers))
	for k, fb := range s.buffers {
		if fb.count > 0 {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].topic != keys[j].topic {
			return keys[i].topic < keys[j].topic
		}
		return keys[i].partition < keys[j].partition
	})
	var errs []error
	for _, k := range keys {
		if err := s.flush(ctx, s.buffers[k]); err != nil {
			errs = append(errs, err)
		}
	}
	s.buffers = nil
	s.last = nil
	s.pool.release()
	return errors.Join(errs...)
}

var _ plugin.Sink = (*Sink)(nil)
