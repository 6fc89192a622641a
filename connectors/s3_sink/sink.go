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
//
// With table_format = "iceberg" the uploaded Parquet files are also
// appended to an Apache Iceberg table (iceberg.go, package icetable), and
// Durable reports only what the table's snapshots hold; the bucket
// listings above are not used, since a file in the bucket is not in the
// table until a snapshot holds it (see recover).
package s3sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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

// newSink builds a sink from options; nothing is checked or connected
// until Open.
func newSink(o options, env sdk.Env) *Sink {
	o.Prefix = trimPrefix(o.Prefix)
	_ = o.checkLayout() // Open reports its error
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
		layout:         o.layout(),
		now:            time.Now,
		attemptTimeout: attemptTimeout,
		ctx:            ctx,
		cancel:         cancel,
		stop:           make(chan struct{}),
		parts:          map[bufferKey]*partitionState{},
		m:              newMetrics(env.Metrics),
	}
	s.cond = sync.NewCond(&s.mu)
	if o.Iceberg.Enabled {
		s.ice = &iceState{m: newIceMetrics(env.Metrics)}
	}
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
	if err := s.opts.checkLayout(); err != nil {
		return err
	}
	if err := s.opts.validate(); err != nil {
		return err
	}
	if s.pq != nil && len(s.opts.Columns) == 0 && s.avro == nil {
		return errors.New("output_format is 'parquet' but no columns are listed: add [[plugin_config.columns]] blocks with name and type, or consume Avro topics (schema = \"avro\"), whose columns come from their Avro schema")
	}
	client, err := newClient(ctx, &s.opts)
	if err != nil {
		return err
	}
	if err := s.probe(ctx, client); err != nil {
		return fmt.Errorf("S3 bucket '%s' connectivity check failed: %w", s.opts.Bucket, err)
	}
	if err := s.openTable(ctx, client); err != nil {
		return err
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

var _ sdk.TopicSchemas = (*Sink)(nil)

// SetTopics takes the sink's [[topics]] blocks (sdk.TopicSchemas), before
// Open: with output_format = parquet, an Avro topic's columns come from its
// Avro schema (or columns pick its top-level fields), and a JSON topic
// needs columns. With a {field:...} in path_template, an Avro topic's
// fields are read with its Avro schema, which must have the path, and a
// topic that is neither JSON nor Avro is refused.
func (s *Sink) SetTopics(topics []sdk.TopicSchema) error {
	if s.pq == nil && !s.layout.readsFields {
		return nil
	}
	at, err := newAvroTopics(s.pq, &s.opts, s.layout, topics)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.avro = at
	if s.layout.readsFields {
		s.layout.fields = &avroFields{topics: at}
	}
	s.mu.Unlock()
	return nil
}

// newClient builds an SDK client with static credentials or the default
// chain (under an assumed role with role_arn), ca_file trusted, a custom endpoint and path-style addressing when asked, and the
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
	httpOpt, err := httpClientOption(o.CAFile)
	if err != nil {
		return nil, err
	}
	if httpOpt != nil {
		load = append(load, httpOpt)
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, load...)
	if err != nil {
		return nil, fmt.Errorf("S3 client configuration: %w", err)
	}
	if o.Role.ARN != "" {
		cfg.Credentials = assumeRole(cfg, o)
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
	in := &s3.PutObjectInput{Bucket: aws.String(s.opts.Bucket), Key: aws.String(ProbeKey), Body: bytes.NewReader(nil)}
	s.opts.Object.putObject(in)
	if _, err := client.PutObject(ctx, in); err != nil {
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
				if _, err := s.pqLayoutOf(rec.Topic).row(&s.row, rec); err != nil {
					rejected = append(rejected, sdk.Rejection{Record: *rec, Err: err})
				}
			}
			continue
		}
		if !p.started {
			p.next = rec.Offset
			if s.ice != nil {
				if err := s.iceStart(p); err != nil {
					return err
				}
			}
			p.started = true
			p.recovering = !s.opts.Buffered
			if rec.Offset < p.next {
				continue // in the table already
			}
			if s.layout.readsFields && rec.Schema != sdk.SchemaJSON && (s.avro == nil || s.avro.key(rec) == nil) {
				// SetTopics refuses such a topic; here no block named it.
				s.log.Warn("S3 sink: path_template reads payload fields, but the topic's schema is neither json nor avro with a known Avro schema; its records give default_partition_value",
					"topic", rec.Topic, "partition", rec.Partition, "schema", rec.Schema, "path_template", s.opts.PathTemplate.Source)
			}
		}
		rowSize := 0
		if s.pq != nil {
			n, err := s.pqLayoutOf(rec.Topic).row(&s.row, rec)
			if err != nil {
				rejected = append(rejected, sdk.Rejection{Record: *rec, Err: err})
				p.next = rec.Offset + 1
				continue
			}
			rowSize = n
		}
		for p.group.count > 0 {
			if s.layout.perRecord {
				if err := s.place(p, rec, batch); err != nil {
					return err
				}
				if p.group.count == 0 {
					break // place cut the group
				}
			}
			if !s.rotateBefore(p, rec, rowSize) {
				break
			}
			if err := s.close(p, batch); err != nil {
				return err
			}
		}
		if p.group.count == 0 && p.recovering {
			skip, err := s.recover(p, rec)
			if err != nil {
				return err
			}
			if skip {
				continue
			}
		}
		if err := s.append(p, rec); err != nil {
			return err
		}
		appended++
		p.lastAppend = now
		if p.open.full(&s.opts) {
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

// recover runs, before the first file a partition starts after its
// assignment (and after each file found), the look-ups of the package doc:
// it aborts the multipart uploads a crash left, and reports skip when rec
// is in a file already in the bucket, moving p.next past that file. With
// table_format = "iceberg" a file in the bucket is not in the table unless
// a snapshot holds it, and the partition resumes from the table's offset:
// the files after it are written again (same keys, same bytes), so only
// the aborts run.
func (s *Sink) recover(p *partitionState, rec *sdk.Record) (skip bool, err error) {
	dir, err := s.dirOf(rec)
	if err != nil {
		return false, err
	}
	if err := s.abortStale(p, dir, rec.Offset); err != nil {
		return false, err
	}
	if s.ice == nil && s.layout.perRecord {
		// A group of files found in part is written again whole.
		if err := s.lookUpGroup(p, dir, rec.Offset); err != nil {
			return false, err
		}
	}
	if s.ice == nil && !p.group.recover {
		found, last, err := s.lookUp(p, dir, rec.Offset)
		if err != nil {
			return false, err
		}
		if found {
			p.next = max(last+1, rec.Offset+1)
			return true, nil
		}
		// The commit may also lie inside a file in the bucket (the
		// runtime commits the next offset consumed when it is below
		// Durable): list the directory once.
		spans, err := s.listDir(p, dir, rec.Offset)
		if err != nil {
			return false, err
		}
		if c, ok := covering(spans, rec.Offset); ok {
			s.log.Info("S3 sink resumed inside a file uploaded before the last commit; the rest of its records are skipped",
				"topic", p.topic, "partition", p.partition, "offset", rec.Offset, "first_offset", c.first, "last_offset", c.last)
			p.next = max(c.last+1, rec.Offset+1)
			return true, nil
		}
		s.lookAhead(p, spans, rec.Offset)
	}
	// The group after one found in part may be in the bucket too
	// (groups upload side by side, see marker.go): look it up.
	p.recovering = p.group.recover
	return false, nil
}

// partition returns the state of a partition, fresh after a Release.
func (s *Sink) partition(topic string, part int32) *partitionState {
	k := bufferKey{topic, part}
	p := s.parts[k]
	if p == nil || p.released {
		p = &partitionState{bufferKey: k, tail: metaTail(topic, part), group: groupState{cut: -1}}
		s.parts[k] = p
	}
	return p
}

// flushTimer closes the open files of partitions that received no record
// for flush_interval.
func (s *Sink) flushTimer() {
	s.every(min(max(s.opts.FlushInterval/4, 10*time.Millisecond), time.Second), s.flushIdle)
}

// flushIdle closes the open files that are idle for flush_interval.
func (s *Sink) flushIdle() {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for _, p := range s.parts {
		// A partition replaying a hole waits for the file beyond it,
		// one replaying a group found in part for its end.
		if p.group.count > 0 && !p.released && len(p.ahead) == 0 && !p.group.recover && now.Sub(p.lastAppend) >= s.opts.FlushInterval {
			if f := s.closeFile(p); f != nil && s.opts.Buffered {
				go s.reportLoss(f)
			}
		}
	}
}

// reportLoss keeps the error of a file lost outside Consume (buffered
// delivery) for the next Consume to return.
func (s *Sink) reportLoss(f *closedFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for f.state != fileDone {
		s.cond.Wait()
	}
	if err := groupErr(f); err != nil && s.bgErr == nil {
		s.bgErr = err
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
	var files []*closedFile
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
			if (len(p.ahead) > 0 || p.group.recover) && p.group.count > 0 {
				// Replaying a hole, or a group found in part: the open
				// files are not uploaded (a cut here could put records
				// into two objects after the next start); they are not
				// committed, and the next start writes them again.
				p.next = p.group.first
				s.dropGroup(p)
			}
			s.closeFile(p)
			for _, f := range p.pending {
				if f.state == fileFailed {
					f.state = fileQueued // one last round
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
		case f.state != fileDone:
			errs = append(errs, fmt.Errorf("s3 sink: %s (%d records) not uploaded; its records are not committed and are redelivered on the next start: %w", f.key, f.count, s.lastErr))
		}
	}
	s.closed = true
	s.mu.Unlock()
	errs = append(errs, s.closeTable(ctx))
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
			if f.state == fileQueued {
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
