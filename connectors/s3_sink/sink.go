// Package s3sink is the S3 sink connector: it collects records into files,
// one open file per topic and partition, and uploads each file as a single
// object to Amazon S3 or an S3-compatible store.
//
// With delivery = "exactly_once" (the default) the sink is a
// sdk.DeferredSink: Consume accepts records, closed files upload in the
// background (up to max_in_flight at once, several files of one partition
// side by side), and Durable reports per partition the first offset not
// yet in the bucket, so commits advance in offset order whatever order the
// uploads finish in. A file starts at the offset the runtime resumes from
// and is cut at the same record on every replay, and a partition's first
// files after an assignment are looked up in the bucket, so a replay writes
// the same keys and never puts a record into two objects. The runtime may
// commit inside a file found in the bucket (it commits the next offset
// consumed when that is below Durable): when the file at the offset resumed
// from is not found, the sink lists that record's directory, and a file
// there holding the offset counts as found. A file whose first record maps
// to another directory (a time placeholder of path_template changes inside
// the file) is not seen by that listing: resumed inside such a file, the
// rest of it is written again as a second object.
//
// Side-by-side uploads can leave, after a crash, a file in the bucket
// beyond one that is not (a hole). At the first file not found after an
// assignment the sink lists what lies beyond it in the same directory, and
// cuts the replayed files right before each file found there, and skips
// it. Two rules keep that listing complete: a file starts uploading beside
// earlier files of its partition only when those were cut at a replayable
// record (size, messages, rotate_interval) and share its directory, so a
// hole is always followed in the bucket by files of its own directory only;
// and while a partition replays a hole, no wall-clock cut (flush_interval,
// the max_buffer_size early upload when another file can go instead, the
// final upload of Close) is made in it. With delivery = "buffered" a batch
// is durable once buffered, as the original spec says.
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

	"github.com/picomq/pico-connectors/sdk"
)

// ProbeKey is the object Open writes and deletes to check the bucket.
const ProbeKey = ".picomq-sink-probe"

// LostSuffix ends the key of the marker written, in buffered delivery, for
// a file that could not be uploaded.
const LostSuffix = ".lost"

// maxObjectBytes is the most bytes a file may hold before it is closed:
// S3's single PutObject limit, less room for compression's overhead.
func (s *Sink) maxObjectBytes() int64 {
	if s.opts.Compression != compressNone {
		return maxPutObjectSize - 64<<20
	}
	return maxPutObjectSize
}

// Sink is the S3 sink. Consume and Close are called from one goroutine;
// Durable and Release may be called from any.
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
	// ctx is the uploads' context: Close cancels it when its own context
	// ends, and stop ends the flush timer.
	ctx    context.Context
	cancel context.CancelFunc
	stop   chan struct{}
	wg     sync.WaitGroup

	mu       sync.Mutex
	cond     *sync.Cond // broadcast when a file's state changes
	parts    map[bufferKey]*partition
	last     *partition // the partition the previous record went to
	closed   bool
	closing  bool
	open     int   // partitions with an open file holding records
	held     int64 // capacity of every chunk of open and pending files
	peakHeld int64
	inFlight int
	failing  int   // exactly_once: files whose last upload failed
	lastErr  error // the last upload failure; nil after a success
	bgErr    error // buffered: a file lost outside Consume, reported by the next

	m sinkMetrics

	// parquet output: the layout, and the scratch row of Consume.
	pq  *pqLayout
	row pqRow
}

type bufferKey struct {
	topic     string
	partition int32
}

// partition is the state of one topic and partition.
type partition struct {
	bufferKey
	tail []byte // metaTail(topic, partition)
	// next is the offset the next record must reach to be taken; records
	// below it were accepted already and are skipped.
	next    int64
	started bool
	// recovering: the next file to start may already be in the bucket.
	recovering bool
	// released: Release gave the partition up; Durable reports next once.
	released bool
	// stuck (released): a file not uploaded came off pending; next stops
	// there.
	stuck bool
	// ahead: files found in the bucket beyond the first one that was not,
	// by first offset; the records before each are replayed and cut right
	// before it, its own are skipped.
	ahead      []span
	open       fileBuffer
	lastAppend time.Time // wall clock, for flush_interval
	pending    []*file   // closed files not yet uploaded, in offset order
}

// fileBuffer is the open file of one partition.
type fileBuffer struct {
	dir       string   // rendered key directory
	chunks    [][]byte // the file; the last chunk is being filled
	size      int64    // bytes in chunks
	count     int
	first     int64
	last      int64
	firstTime time.Time
	pq        *pqFile // parquet output: the file's writer
}

type fileState int

const (
	queued fileState = iota
	uploading
	failed // exactly_once: waiting for its next round of attempts
	done   // uploaded, or (buffered) lost
)

// file is a closed file on its way to the bucket.
type file struct {
	p      *partition
	info   fileInfo
	key    string
	dir    string
	count  int
	chunks [][]byte
	size   int64
	state  fileState
	// replayable: cut at a record every replay cuts at too (size,
	// messages, rotate_interval, or right before a file in the bucket),
	// not by the wall clock or memory; a later file of the partition may
	// upload beside it.
	replayable bool
	uploaded   bool  // done: in the bucket
	rounds     int   // failed rounds of max_attempts
	err        error // buffered: why the file was lost
	// ctx ends the retry waits of the file (Release, Close).
	ctx    context.Context
	cancel context.CancelFunc
}

type sinkMetrics struct {
	recordsBuffered sdk.Counter
	recordsUploaded sdk.Counter
	recordsLost     sdk.Counter
	filesUploaded   sdk.Counter
	filesLost       sdk.Counter
	bytesUploaded   sdk.Counter
	retries         sdk.Counter
	uploadFailures  sdk.Counter
	uploadSeconds   sdk.Histogram
	openFiles       sdk.Gauge
	bufferedBytes   sdk.Gauge
	inFlight        sdk.Gauge
	failingFiles    sdk.Gauge
}

func newMetrics(m sdk.Metrics) sinkMetrics {
	return sinkMetrics{
		recordsBuffered: m.Counter("s3_sink_records_buffered_total", "Records appended to an open file."),
		recordsUploaded: m.Counter("s3_sink_records_uploaded_total", "Records in files uploaded to S3."),
		recordsLost:     m.Counter("s3_sink_records_lost_total", "Records in files dropped after a failed upload (buffered delivery only)."),
		filesUploaded:   m.Counter("s3_sink_files_uploaded_total", "Files uploaded to S3."),
		filesLost:       m.Counter("s3_sink_files_lost_total", "Files dropped after a failed upload; each has a .lost marker (buffered delivery only)."),
		bytesUploaded:   m.Counter("s3_sink_bytes_uploaded_total", "Bytes of files uploaded to S3, after compression."),
		retries:         m.Counter("s3_sink_upload_retries_total", "PutObject attempts that failed and were retried."),
		uploadFailures:  m.Counter("s3_sink_upload_failures_total", "Uploads that failed after max_attempts (or at once, on a status that is not retried)."),
		uploadSeconds: m.Histogram("s3_sink_upload_duration_seconds", "Time to upload one file, retries included.",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}),
		openFiles:     m.Gauge("s3_sink_open_files", "Files open in memory, one per topic and partition with buffered records."),
		bufferedBytes: m.Gauge("s3_sink_buffered_bytes", "Bytes held by open and uploading files, bounded by max_buffer_size."),
		inFlight:      m.Gauge("s3_sink_uploads_in_flight", "Uploads running now."),
		failingFiles:  m.Gauge("s3_sink_failing_files", "Files kept for retry after a failed upload (exactly_once); the sink refuses records while above 0."),
	}
}

// newSink builds a sink from options; nothing is checked or connected
// until Open.
func newSink(o options, env sdk.Env) *Sink {
	o.Prefix = trimPrefix(o.Prefix)
	log := env.Logger
	chunk := chunkSizeFor(o.MaxFileSize, o.RotateByMessages)
	// Keep enough free chunks to refill one file, so rotation does not
	// allocate; the rest go to the garbage collector.
	maxFree := 4 * chunk
	if !o.RotateByMessages {
		maxFree = int(min(o.MaxFileSize, max(o.MaxBufferSize/4, 0))) + 2*chunk
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &Sink{
		pool:           newChunkPool(chunk, maxFree),
		opts:           o,
		log:            log,
		fmt:            newFormatter(&o),
		now:            time.Now,
		attemptTimeout: attemptTimeout,
		ctx:            ctx,
		cancel:         cancel,
		stop:           make(chan struct{}),
		parts:          map[bufferKey]*partition{},
		m:              newMetrics(env.Metrics),
	}
	s.cond = sync.NewCond(&s.mu)
	if o.Format == formatParquet {
		s.pq, _ = newPQLayout(&o) // Open reports its error
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
	if err := s.probe(ctx, client); err != nil {
		return fmt.Errorf("S3 bucket '%s' connectivity check failed: %w", s.opts.Bucket, err)
	}
	s.mu.Lock()
	s.client = client
	s.mu.Unlock()
	if s.opts.FlushInterval > 0 {
		s.wg.Add(1)
		go s.flushTimer()
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
		// The generated config already defaults path_style to true when
		// endpoint is set; an explicit false is kept.
		so.UsePathStyle = o.PathStyle
		so.Retryer = aws.NopRetryer{}
		so.RetryMaxAttempts = 1
	}), nil
}

func (s *Sink) probe(ctx context.Context, client *s3.Client) error {
	ctx, cancel := context.WithTimeout(ctx, s.attemptTimeout(0))
	defer cancel()
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(s.opts.Bucket), Key: aws.String(ProbeKey), Body: bytes.NewReader(nil),
	}); err != nil {
		return fmt.Errorf("writing %s: %w", ProbeKey, err)
	}
	if _, err := client.DeleteObject(ctx, &s3.DeleteObjectInput{
		Bucket: aws.String(s.opts.Bucket), Key: aws.String(ProbeKey),
	}); err != nil {
		return fmt.Errorf("deleting %s: %w", ProbeKey, err)
	}
	return nil
}

// yieldEvery is how many records Consume appends between two releases of
// the lock. Holding it for a whole batch (10,000 records of 1 KiB take
// 20-70 ms) kept finished uploads from recording it, and so the next
// uploads from starting, until the batch was in.
const yieldEvery = 128

// errReleased stops a Consume whose partition was released while it waited.
var errReleased = errors.New("s3 sink: the partition was released during Consume; the batch is redelivered to its next owner")

// Consume appends every record to the open file of its partition, skipping
// records below the partition's next offset (a redelivery), and closes
// files as they reach a rotation threshold.
//
// In exactly_once it returns once the records are accepted: uploads run in
// the background. It accepts nothing and returns the last S3 error while a
// file's upload is failing, and at max_buffer_size it waits for uploads.
// In buffered delivery it uploads each closed file before it goes on, and
// returns the error of a file lost after its attempts, after writing the
// file's .lost marker.
//
// On an error, the records already accepted stay accepted; the redelivered
// batch skips them.
func (s *Sink) Consume(ctx context.Context, batch []sdk.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.closing {
		return errors.New("s3 sink: Consume after Close")
	}
	if s.client == nil {
		return errors.New("s3 sink: Consume before Open")
	}
	if err := s.bgErr; err != nil {
		s.bgErr = nil
		return err
	}
	if err := s.refuse(); err != nil {
		return err
	}
	appended := 0
	var rejected []sdk.Rejection
	defer func() {
		s.m.recordsBuffered.Add(float64(appended))
		s.m.bufferedBytes.Set(float64(s.held))
	}()
	now := s.now()
	for i := range batch {
		if i > 0 && i%yieldEvery == 0 {
			// Let the uploads that finished meanwhile record it and start
			// the next ones: they wait for the lock.
			s.mu.Unlock()
			s.mu.Lock()
			if s.closing {
				return errors.New("s3 sink: closed during Consume")
			}
			if l := s.last; l != nil && (s.parts[l.bufferKey] != l || l.released) {
				return errReleased
			}
		}
		rec := &batch[i]
		p := s.last
		if p == nil || p.partition != rec.Partition || p.topic != rec.Topic || p.released {
			p = s.partition(rec.Topic, rec.Partition)
			s.last = p
		}
		if len(p.ahead) > 0 {
			if err := s.skipAhead(p, rec, batch); err != nil {
				return err
			}
		}
		if p.started && rec.Offset < p.next {
			// Accepted before, or in a file found in the bucket; a record that does not convert was
			// rejected, and is rejected again (it may not have reached the
			// dead-letter topic, and nothing else holds it).
			if s.pq != nil {
				if _, err := s.pq.row(&s.row, rec); err != nil {
					rejected = append(rejected, sdk.Rejection{Record: *rec, Err: err})
				}
			}
			continue
		}
		if !p.started {
			p.started = true
			p.next = rec.Offset
			p.recovering = !s.opts.Buffered
		}
		rowSize := 0
		if s.pq != nil {
			n, err := s.pq.row(&s.row, rec)
			if err != nil {
				rejected = append(rejected, sdk.Rejection{Record: *rec, Err: err})
				p.next = rec.Offset + 1
				continue
			}
			rowSize = n
		}
		if p.open.count > 0 && s.rotateBefore(p, rec, rowSize) {
			if err := s.close(p, batch); err != nil {
				return err
			}
		}
		if p.open.count == 0 && p.recovering {
			dir, err := s.dirOf(rec)
			if err != nil {
				return err
			}
			found, last, err := s.lookUp(p, dir, rec.Offset)
			if err != nil {
				return err
			}
			if found {
				p.next = max(last+1, rec.Offset+1)
				continue
			}
			// The commit may also lie inside a file in the bucket (the
			// runtime commits the next offset consumed when it is below
			// Durable): list the directory once.
			spans, err := s.listDir(p, dir, rec.Offset)
			if err != nil {
				return err
			}
			if c, ok := covering(spans, rec.Offset); ok {
				s.log.Info("S3 sink resumed inside a file uploaded before the last commit; the rest of its records are skipped",
					"topic", p.topic, "partition", p.partition, "offset", rec.Offset, "first_offset", c.first, "last_offset", c.last)
				p.next = max(c.last+1, rec.Offset+1)
				continue
			}
			p.recovering = false
			s.lookAhead(p, spans, rec.Offset)
		}
		if s.pq != nil {
			if err := s.appendParquet(p, rec, rowSize); err != nil {
				return err
			}
		} else if err := s.append(p, rec); err != nil {
			return err
		}
		appended++
		p.lastAppend = now
		if s.full(p) {
			if err := s.close(p, batch); err != nil {
				return err
			}
		}
	}
	if len(rejected) > 0 {
		return &sdk.Rejected{Records: rejected}
	}
	return nil
}

// refuse returns the error Consume fails with while uploads fail
// (exactly_once), so the runtime's status shows it.
func (s *Sink) refuse() error {
	if s.opts.Buffered || s.failing == 0 {
		return nil
	}
	return fmt.Errorf("s3 sink: %d file(s) kept in memory after failed uploads and retried with back-off; no record is accepted until one succeeds: %w", s.failing, s.lastErr)
}

// partition returns the state of a partition, fresh after a Release.
func (s *Sink) partition(topic string, part int32) *partition {
	k := bufferKey{topic, part}
	p := s.parts[k]
	if p == nil || p.released {
		p = &partition{bufferKey: k, tail: metaTail(topic, part)}
		s.parts[k] = p
	}
	return p
}

// lookUp lists the bucket for an object of the file that would start at
// first, and returns its last offset. The lock is released meanwhile.
func (s *Sink) lookUp(p *partition, dir string, first int64) (bool, int64, error) {
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

// span is the offsets of a file in the bucket.
type span struct{ first, last int64 }

// listDir lists the files of p in dir that end at from or later, sorted by
// first offset (the largest last offset of several with one first offset).
// The lock is released meanwhile.
func (s *Sink) listDir(p *partition, dir string, from int64) ([]span, error) {
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
func (s *Sink) lookAhead(p *partition, spans []span, first int64) {
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
func (s *Sink) skipAhead(p *partition, rec *sdk.Record, batch []sdk.Record) error {
	for len(p.ahead) > 0 && p.ahead[0].last < rec.Offset {
		p.ahead = p.ahead[1:]
	}
	if len(p.ahead) == 0 || rec.Offset < p.ahead[0].first {
		return nil
	}
	a := p.ahead[0]
	if p.open.count > 0 {
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
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	var out []span
	for {
		page, err := client.ListObjectsV2(ctx, in)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			if f, l, ok := offsetsOf(aws.ToString(o.Key), prefix); ok && l >= from {
				if n := len(out); n > 0 && out[n-1].first == f {
					out[n-1].last = max(out[n-1].last, l)
				} else {
					out = append(out, span{f, l})
				}
			}
		}
		if !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			sort.Slice(out, func(i, j int) bool { return out[i].first < out[j].first })
			return out, nil
		}
		in.ContinuationToken = page.NextContinuationToken
	}
}

// listLast returns the largest last offset of the data objects whose keys
// start with prefix.
func listLast(ctx context.Context, client *s3.Client, bucket, prefix string, timeout time.Duration) (bool, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
	found, last := false, int64(0)
	for {
		out, err := client.ListObjectsV2(ctx, in)
		if err != nil {
			return false, 0, err
		}
		for _, o := range out.Contents {
			if n, ok := lastOffsetOf(aws.ToString(o.Key), prefix); ok && (!found || n > last) {
				found, last = true, n
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return found, last, nil
		}
		in.ContinuationToken = out.NextContinuationToken
	}
}

// rotateBefore reports whether rec must start a new file: it reaches the
// first record's time plus rotate_interval, or it would take the file past
// what one PutObject takes.
func (s *Sink) rotateBefore(p *partition, rec *sdk.Record, rowSize int) bool {
	if s.opts.RotateInterval > 0 && !rec.Timestamp.Before(p.open.firstTime.Add(s.opts.RotateInterval)) {
		return true
	}
	if pf := p.open.pq; pf != nil {
		return p.open.size+pf.pending+int64(rowSize)+pqFooterBound > s.maxObjectBytes()
	}
	// A cheap bound first; the estimate only near the limit.
	crude := int64(len(rec.Payload)+len(rec.Key)+len(p.topic))*8 + 4096
	for _, h := range rec.Headers {
		crude += int64(len(h.Key)+len(h.Value)+8) * 8
	}
	if p.open.size+crude <= s.maxObjectBytes() {
		return false
	}
	return p.open.size+int64(s.fmt.estimate(rec, len(p.topic))+1) > s.maxObjectBytes()
}

// dirOf renders the key directory of a file whose first record is rec.
func (s *Sink) dirOf(rec *sdk.Record) (string, error) {
	dir, err := renderDir(s.opts.Prefix, s.opts.PathTemplate, rec.Topic, rec.Partition, rec.Timestamp)
	if err != nil {
		return "", fmt.Errorf("s3 sink: record %s/%d@%d cannot be written: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	return dir, nil
}

// append formats rec into p's open file, starting a new chunk when the
// record might not fit; a new chunk waits for room under max_buffer_size.
func (s *Sink) append(p *partition, rec *sdk.Record) error {
	need := s.fmt.estimate(rec, len(p.topic)) + 1 // + the closing ']'
	fb := &p.open
	n := len(fb.chunks)
	if n == 0 || cap(fb.chunks[n-1])-len(fb.chunks[n-1]) < need {
		if err := s.room(p, s.pool.capFor(n, need)); err != nil {
			return err
		}
		n = len(fb.chunks) // room may have closed p's file
		c := s.pool.get(n, need)
		s.grow(cap(c))
		fb.chunks = append(fb.chunks, c)
		n++
	}
	if fb.count == 0 {
		dir, err := s.dirOf(rec)
		if err != nil {
			s.free(fb.chunks)
			fb.chunks = fb.chunks[:0]
			return err
		}
		fb.dir = dir
		fb.first = rec.Offset
		fb.firstTime = rec.Timestamp
		s.open++
		s.m.openFiles.Set(float64(s.open))
	}
	c := &fb.chunks[n-1]
	before := len(*c)
	*c = s.fmt.appendRecord(*c, rec, fb.count == 0, p.tail)
	fb.size += int64(len(*c) - before)
	fb.count++
	fb.last = rec.Offset
	p.next = rec.Offset + 1
	return nil
}

// room waits until n more bytes fit under max_buffer_size. It waits for
// uploads; when every held byte is in open files it closes the largest one
// early (safe: its successors wait for it, and a replay finds it in the
// bucket). It fails while uploads fail (exactly_once), or when p is
// released meanwhile.
func (s *Sink) room(p *partition, n int) error {
	for s.held > 0 && s.held+int64(n) > s.opts.MaxBufferSize {
		if err := s.refuse(); err != nil {
			return fmt.Errorf("s3 sink: max_buffer_size (%s) reached: %w", formatSize(s.opts.MaxBufferSize), err)
		}
		if s.pendingFiles() == 0 {
			if big := s.largestOpen(); big != nil {
				s.log.Debug("S3 sink at max_buffer_size: uploading the largest open file early",
					"topic", big.topic, "partition", big.partition, "bytes", big.open.size)
				s.closeFile(big)
				continue
			}
		}
		s.m.bufferedBytes.Set(float64(s.held))
		s.cond.Wait()
		if s.parts[p.bufferKey] != p || p.released {
			return errReleased
		}
		if s.closing {
			return errors.New("s3 sink: closed during Consume")
		}
	}
	return nil
}

func (s *Sink) pendingFiles() int {
	n := 0
	for _, p := range s.parts {
		n += len(p.pending)
	}
	return n
}

// largestOpen returns the partition with the largest open file, one that
// replays a hole (p.ahead) only when no other has an open file: cutting
// there early is the one cut a hole's replay may not make (see the package
// doc), taken only so as not to wait forever.
func (s *Sink) largestOpen() *partition {
	var big *partition
	for _, p := range s.parts {
		if p.open.count == 0 {
			continue
		}
		free, bigFree := len(p.ahead) == 0, big != nil && len(big.ahead) == 0
		if big == nil || free && !bigFree || free == bigFree && p.open.size > big.open.size {
			big = p
		}
	}
	return big
}

func (s *Sink) full(p *partition) bool {
	if s.opts.RotateByMessages && p.open.count >= s.opts.MaxMessages {
		return true
	}
	return p.open.size >= s.opts.MaxFileSize
}

// close closes p's open file. In buffered delivery it waits for the
// upload, and on a loss it rewinds p to the first record of batch the
// lost file held, so the redelivered batch writes those again.
func (s *Sink) close(p *partition, batch []sdk.Record) error {
	f := s.cutFile(p, true)
	if f == nil || !s.opts.Buffered {
		return nil
	}
	for f.state != done {
		s.cond.Wait()
	}
	if f.err == nil {
		return nil
	}
	for i := range batch {
		if r := &batch[i]; r.Topic == p.topic && r.Partition == p.partition {
			p.next = max(f.info.FirstOffset, r.Offset)
			break
		}
	}
	return f.err
}

// closeFile finishes p's open file at a record a replay may not cut at
// (the wall clock, memory, a stop), queues it for upload and starts what
// max_in_flight allows.
func (s *Sink) closeFile(p *partition) *file { return s.cutFile(p, false) }

// cutFile finishes p's open file, queues it for upload and starts what
// max_in_flight allows. replayable: every replay cuts at the same record.
func (s *Sink) cutFile(p *partition, replayable bool) *file {
	fb := &p.open
	if fb.count == 0 {
		return nil
	}
	if fb.pq != nil {
		s.finishParquet(fb)
	} else if last := len(fb.chunks) - 1; last >= 0 {
		c := &fb.chunks[last]
		before, capBefore := len(*c), cap(*c)
		*c = s.fmt.finish(*c)
		fb.size += int64(len(*c) - before)
		s.grow(cap(*c) - capBefore)
	}
	info := fileInfo{Topic: p.topic, Partition: p.partition, FirstOffset: fb.first, LastOffset: fb.last, FirstTime: fb.firstTime}
	f := &file{
		p: p, info: info, count: fb.count, chunks: fb.chunks, size: fb.size, dir: fb.dir, replayable: replayable,
		key: fileKey(fb.dir, p.partition, fb.first, fb.last, s.opts.Format.ext()+s.opts.Compression.ext()),
	}
	f.ctx, f.cancel = context.WithCancel(s.ctx)
	p.pending = append(p.pending, f)
	p.open = fileBuffer{}
	s.open--
	s.m.openFiles.Set(float64(s.open))
	s.kick()
	return f
}

// kick starts uploads up to max_in_flight, the oldest files of every
// partition first. A file uploads beside the earlier files of its
// partition still on their way only when each of those was cut at a
// replayable record and has its directory (see the package doc); in
// buffered delivery only the oldest file of a partition uploads.
func (s *Sink) kick() {
	for depth := 0; depth < s.opts.MaxInFlight && s.inFlight < s.opts.MaxInFlight; depth++ {
		for _, p := range s.parts {
			if s.inFlight >= s.opts.MaxInFlight {
				break
			}
			if depth >= len(p.pending) || p.pending[depth].state != queued || !s.mayStart(p, depth) {
				continue
			}
			f := p.pending[depth]
			f.state = uploading
			s.inFlight++
			s.wg.Add(1)
			go s.upload(f)
		}
	}
	s.m.inFlight.Set(float64(s.inFlight))
}

// mayStart reports whether p.pending[i] may upload now.
func (s *Sink) mayStart(p *partition, i int) bool {
	if i > 0 && s.opts.Buffered {
		return false
	}
	f := p.pending[i]
	for _, g := range p.pending[:i] {
		if g.state != done && (!g.replayable || g.dir != f.dir) {
			return false
		}
	}
	return true
}

// upload runs one round of max_attempts for f, then records the outcome.
func (s *Sink) upload(f *file) {
	defer s.wg.Done()
	if f.rounds == 0 && s.opts.Compression != compressNone {
		s.compress(f)
	}
	start := s.now()
	target := "s3://" + s.opts.Bucket + "/" + f.key
	attempts, err := s.retry.do(f.ctx, target, func(context.Context) error {
		ctx, cancel := context.WithTimeout(s.ctx, s.attemptTimeout(f.size))
		defer cancel()
		in := &s3.PutObjectInput{
			Bucket:        aws.String(s.opts.Bucket),
			Key:           aws.String(f.key),
			Body:          newChunkReader(f.chunks),
			ContentLength: aws.Int64(f.size),
			ContentType:   aws.String(s.contentType()),
		}
		if enc := s.opts.Compression.encoding(); enc != "" {
			in.ContentEncoding = aws.String(enc)
		}
		_, err := s.client.PutObject(ctx, in)
		return err
	})
	var markErr error
	if err != nil && s.opts.Buffered {
		markErr = s.writeLostMarker(f.ctx, f.key, f.info, f.count, attempts, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cond.Broadcast()
	s.inFlight--
	p := f.p
	if err == nil {
		s.m.uploadSeconds.Observe(s.now().Sub(start).Seconds())
		s.m.filesUploaded.Add(1)
		s.m.recordsUploaded.Add(float64(f.count))
		s.m.bytesUploaded.Add(float64(f.size))
		s.log.Debug("S3 sink uploaded a file", "key", f.key, "records", f.count, "bytes", f.size, "attempts", attempts)
		if f.rounds > 0 {
			s.failing--
			s.log.Info("S3 sink uploaded a file after failed rounds", "key", f.key, "rounds", f.rounds)
		}
		s.lastErr = nil
		f.uploaded = true
		s.finish(f)
	} else {
		s.m.uploadFailures.Add(1)
		s.lastErr = err
		switch {
		case s.opts.Buffered:
			s.m.recordsLost.Add(float64(f.count))
			s.m.filesLost.Add(1)
			s.log.Error("S3 sink dropped a file after a failed upload", "key", f.key, "marker", f.key+LostSuffix,
				"first_offset", f.info.FirstOffset, "last_offset", f.info.LastOffset, "records", f.count,
				"attempts", attempts, "error", err, "marker_error", markErr)
			f.err = err
			if markErr != nil {
				f.err = errors.Join(err, fmt.Errorf("writing the marker %s%s also failed: %w", f.key, LostSuffix, markErr))
			}
			s.finish(f)
		case p.released:
			if f.rounds > 0 {
				s.failing--
			}
			s.finish(f)
		default:
			if f.rounds == 0 {
				s.failing++
			}
			f.rounds++
			f.state = failed
			level := slog.LevelWarn
			if f.rounds == 1 {
				level = slog.LevelError
			}
			s.log.Log(context.Background(), level, "S3 sink could not upload a file; it stays in memory and is retried, and the partition's commit waits",
				"key", f.key, "records", f.count, "rounds", f.rounds, "attempts", attempts, "error", err)
			if !s.closing {
				d := backoff(s.opts.RetryDelay, f.rounds+1, rand.Float64())
				time.AfterFunc(d, func() { s.requeue(f) })
			}
		}
	}
	s.m.failingFiles.Set(float64(s.failing))
	s.kick()
	s.m.bufferedBytes.Set(float64(s.held))
}

// requeue puts a failed file back in the queue for its next round.
func (s *Sink) requeue(f *file) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.state == failed && !s.closing && !f.p.released {
		f.state = queued
		s.kick()
	}
}

// finish marks f done and frees its chunks; then takes the done files at
// the front of its partition's queue off it, so a file leaves the queue
// only after every earlier one, whatever order uploads finish in.
func (s *Sink) finish(f *file) {
	f.state = done
	f.cancel()
	s.free(f.chunks)
	f.chunks = nil
	s.pop(f.p)
}

// pop takes the done files at the front of p's queue off it. For a
// released partition it moves next past each uploaded one, up to the first
// that was not.
func (s *Sink) pop(p *partition) {
	n := 0
	for ; n < len(p.pending) && p.pending[n].state == done; n++ {
		if g := p.pending[n]; p.released && !p.stuck {
			if g.uploaded {
				p.next = max(p.next, g.info.LastOffset+1)
			} else {
				p.stuck = true
			}
		}
	}
	if n > 0 {
		rest := copy(p.pending, p.pending[n:])
		clear(p.pending[rest:])
		p.pending = p.pending[:rest]
	}
}

// grow counts n more bytes held.
func (s *Sink) grow(n int) {
	s.held += int64(n)
	s.peakHeld = max(s.peakHeld, s.held)
}

// free gives chunks back to the pool.
func (s *Sink) free(chunks [][]byte) {
	for _, c := range chunks {
		s.held -= int64(cap(c))
	}
	s.pool.put(chunks)
	clear(chunks)
}

func (s *Sink) contentType() string {
	switch s.opts.Format {
	case formatJSONLines:
		return "application/x-ndjson"
	case formatJSONArray:
		return "application/json"
	case formatParquet:
		return "application/vnd.apache.parquet"
	}
	return "application/octet-stream"
}

// Durable returns, for each partition, the first offset not yet in the
// bucket: the first record of its oldest file not uploaded, or of its open
// file, or the next offset when everything is uploaded. In buffered
// delivery every accepted record counts. A released partition is reported
// once more, then forgotten.
func (s *Sink) Durable() map[sdk.TopicPartition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[sdk.TopicPartition]int64, len(s.parts))
	for k, p := range s.parts {
		if !p.started || (p.released && len(p.pending) > 0) {
			continue
		}
		out[sdk.TopicPartition{Topic: p.topic, Partition: p.partition}] = s.durable(p)
		if p.released {
			delete(s.parts, k)
			if s.last == p {
				s.last = nil
			}
		}
	}
	return out
}

func (s *Sink) durable(p *partition) int64 {
	switch {
	case s.opts.Buffered:
		return p.next
	case len(p.pending) > 0:
		return p.pending[0].info.FirstOffset
	case p.open.count > 0:
		return p.open.first
	}
	return p.next
}

// Release gives up partitions. In exactly_once their open and queued files
// are dropped (they were not committed: the next owner replays them) and an
// upload in progress finishes its attempt; in buffered delivery their open
// files are uploaded first. Durable then reports each partition's final
// offset once.
func (s *Sink) Release(ctx context.Context, partitions []sdk.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var mine []*partition
	for _, tp := range partitions {
		p := s.parts[bufferKey{tp.Topic, tp.Partition}]
		if p == nil || p.released {
			continue
		}
		mine = append(mine, p)
		if s.opts.Buffered {
			s.closeFile(p)
			continue
		}
		p.next = s.durable(p)
		if p.open.count > 0 {
			s.open--
			s.m.openFiles.Set(float64(s.open))
		}
		s.dropParquet(&p.open)
		s.free(p.open.chunks)
		p.open = fileBuffer{}
		for _, f := range p.pending {
			switch f.state {
			case uploading:
				f.cancel() // no further attempt after this one
			case queued, failed:
				if f.rounds > 0 {
					s.failing--
				}
				f.state = done
				f.cancel()
				s.free(f.chunks)
				f.chunks = nil
			}
		}
		p.ahead = nil
		p.released = true
		s.pop(p)
	}
	s.m.failingFiles.Set(float64(s.failing))
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	for _, p := range mine {
		for len(p.pending) > 0 {
			if ctx.Err() != nil {
				return fmt.Errorf("s3 sink: release of %s/%d: %w", p.topic, p.partition, ctx.Err())
			}
			s.cond.Wait()
		}
		p.released = true
		s.log.Info("S3 sink released a partition", "topic", p.topic, "partition", p.partition, "durable", p.next)
	}
	s.m.bufferedBytes.Set(float64(s.held))
	return nil
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

// flushTimer closes the open files of partitions that received no record
// for flush_interval.
func (s *Sink) flushTimer() {
	defer s.wg.Done()
	tick := min(max(s.opts.FlushInterval/4, 10*time.Millisecond), time.Second)
	t := time.NewTicker(tick)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		s.mu.Lock()
		now := s.now()
		for _, p := range s.parts {
			// A partition replaying a hole waits for the file beyond it.
			if p.open.count > 0 && !p.released && len(p.ahead) == 0 && now.Sub(p.lastAppend) >= s.opts.FlushInterval {
				if f := s.closeFile(p); f != nil && s.opts.Buffered {
					go s.reportLoss(f)
				}
			}
		}
		s.mu.Unlock()
	}
}

// reportLoss keeps the error of a file lost outside Consume (buffered
// delivery) for the next Consume to return.
func (s *Sink) reportLoss(f *file) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f.state != done {
		s.cond.Wait()
	}
	if f.err != nil && s.bgErr == nil {
		s.bgErr = f.err
	}
}

// Close uploads every open file and waits for every upload. A file that
// still fails after its attempts is reported in the error: in exactly_once
// its records were not committed and are redelivered on the next start; in
// buffered delivery it has its .lost marker. When ctx ends first, uploads
// are abandoned. Durable still answers after Close.
func (s *Sink) Close(ctx context.Context) error {
	s.mu.Lock()
	if s.closed || s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	close(s.stop)
	var files []*file
	if s.client != nil {
		keys := make([]bufferKey, 0, len(s.parts))
		for k := range s.parts {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool {
			if keys[i].topic != keys[j].topic {
				return keys[i].topic < keys[j].topic
			}
			return keys[i].partition < keys[j].partition
		})
		for _, k := range keys {
			p := s.parts[k]
			if len(p.ahead) > 0 && p.open.count > 0 {
				// Replaying a hole: the open file is not uploaded (a cut
				// here could put records into two objects after the next
				// start); it is not committed, and the next start writes
				// it again.
				p.next = p.open.first
				s.dropParquet(&p.open)
				s.free(p.open.chunks)
				p.open = fileBuffer{}
				s.open--
			}
			s.closeFile(p)
			for _, f := range p.pending {
				if f.state == failed {
					f.state = queued // one last round
				}
				files = append(files, f)
			}
		}
		s.kick()
	}
	stop := context.AfterFunc(ctx, func() { s.cancel(); s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	for s.busy() {
		s.cond.Wait()
	}
	var errs []error
	for _, f := range files {
		switch {
		case f.err != nil:
			errs = append(errs, f.err)
		case f.state != done:
			errs = append(errs, fmt.Errorf("s3 sink: %s (%d records) not uploaded; its records are not committed and are redelivered on the next start: %w", f.key, f.count, s.lastErr))
		}
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	s.mu.Lock()
	s.pool.release()
	s.mu.Unlock()
	return errors.Join(errs...)
}

// busy reports whether an upload is queued or running.
func (s *Sink) busy() bool {
	if s.inFlight > 0 {
		return true
	}
	if s.ctx.Err() != nil {
		return false
	}
	for _, p := range s.parts {
		for _, f := range p.pending {
			if f.state == queued {
				return true
			}
		}
	}
	return false
}

var (
	_ sdk.Sink         = (*Sink)(nil)
	_ sdk.DeferredSink = (*Sink)(nil)
)
