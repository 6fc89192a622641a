package s3sink

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/picomq/pico-connectors/sdk"
)

// The sink's state, which every file above this one works on: the Sink,
// its partitions, each partition's open file and its closed files on their
// way to the bucket, and the bytes they hold.
//
// The files of the package are layers; each uses only the files below it:
//
//	keys, chunks, options, retry, format    object keys, buffers, settings, JSON
//	objectsettings, access                  object headers, role and CA settings
//	parquet, parquet_row                    the Parquet schema, a record's row
//	parquet_avro, parquet_avro_row          the same from an Avro schema
//	keys_avro                               path_template's {field:...} of an Avro record
//	state                                   this file
//	compress, parquet_file, marker          encoders of a file, a group's marker
//	upload, multipart, health               a file's upload, in parts above part_size
//	stream                                  a large file's parts while it fills
//	group                                   a partition's open files together
//	file                                    a partition's open file: append, cut
//	recovery                                replay after an assignment
//	place                                   a record's file in its group
//	durable                                 Durable and Release
//	iceberg_options, iceberg_columns        table_format = "iceberg": its keys, the table's columns
//	iceberg, iceberg_admin                  the table's commits; the iceberg-orphans command
//	credentials                             assumed role, HTTP client with ca_file
//	sink, config                            New, Open, Consume, Close
//
// A record flows one way: Consume (sink) skips it or finds its file in the
// bucket (recovery), formats it into the open file (file, format or
// parquet_row), a cut hands the file to upload, which encodes it
// (parquet_file, compress), and Durable reports it once uploaded.

// Sink is the S3 sink. Consume and Close are called from one goroutine;
// Durable and Release may be called from any.
type Sink struct {
	opts   options
	log    *slog.Logger
	fmt    *formatter
	layout *keyLayout // how object keys are rendered
	dirBuf []byte     // scratch: the directory of the record placed
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
	encoding int64 // held by parquet encodings running now (encodeReserve each)
	inFlight int
	failing  int   // exactly_once: files whose last upload failed
	lastErr  error // the last upload failure; nil after a success
	bgErr    error // buffered: a file lost outside Consume, reported by the next

	m sinkMetrics

	// parquet output: the layout, and the scratch row of Consume.
	pq  *pqLayout
	row pqRow
	// avro: the Avro topics' layouts (SetTopics), nil before.
	avro *avroTopics
	// ice is the table of table_format = "iceberg" (iceberg.go); nil when
	// the sink writes loose files.
	ice *iceState
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
	// aborted: the multipart uploads a crash left were looked for.
	aborted bool
	// released: Release gave the partition up; Durable reports next once.
	released bool
	// stuck (released): a file not uploaded came off pending; next stops
	// there.
	stuck bool
	// ahead: files found in the bucket beyond the first one that was not,
	// by first offset; the records before each are replayed and cut right
	// before it, its own are skipped.
	ahead []span
	// open is the open file of the last record. With a path_template that
	// reads each record (keyLayout.perRecord) the partition's open files
	// are a group, started at one record and cut together: idle holds the
	// others by directory (see group.go).
	open       fileBuffer
	idle       map[string]*fileBuffer
	group      groupState
	lastAppend time.Time // wall clock, for flush_interval
	pending    []*file   // closed files not yet uploaded, in offset order
	// ice is the partition's table state (table_format = "iceberg").
	ice icePart
}

// groupState is the open files of a partition together: the records they
// hold, in offsets gfirst to glast, and the time of the first.
type groupState struct {
	count       int
	first, last int64
	firstTime   time.Time
	// recover: the group may have files in the bucket already (a replay
	// of a group not found whole); each directory it opens is looked up,
	// and cut is then the last offset it must be cut at (-1: none known).
	recover bool
	cut     int64
}

// fileBuffer is an open file of one partition.
type fileBuffer struct {
	dir       string   // rendered key directory
	chunks    [][]byte // the file; the last chunk is being filled
	size      int64    // bytes in chunks
	count     int
	first     int64
	last      int64
	firstTime time.Time
	pq        *pqFile // parquet output: its open row group
	// stream: its parts go up as it fills (stream.go); nil until then.
	stream *stream
	// part is the table partition values of its first record
	// (table_format = "iceberg" with iceberg_partition_by), nil otherwise.
	part map[string]any
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
	part   map[string]any // fileBuffer.part
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
	uploaded   bool // done: in the bucket
	// lead: the last file of its group; siblings are the others.
	lead      bool
	siblings  []*file
	mark      *groupMark // exactly_once, a group of several files: its marker
	rounds    int        // failed rounds of max_attempts
	err       error      // buffered: why the file was lost
	encoded   bool       // its chunks are the object's bytes (Parquet, compressed)
	encodeErr error      // parquet: the encoding failed, for good
	// mpu: its multipart upload, kept across failed attempts so the next
	// one sends only the parts not yet in (multipart.go); nil when none.
	// base: the bytes before chunks[0], freed once their parts were in.
	mpu  *mpuState
	base int64
	// ctx ends the retry waits of the file (Release, Close).
	ctx    context.Context
	cancel context.CancelFunc
	// stream: the file was streamed while open (stream.go); its first
	// parts are in an upload under a staging key.
	stream *stream
}

// mpuState is a file's multipart upload: its id, and each part once it is
// in (a nil ETag: not yet).
type mpuState struct {
	id    *string
	parts []types.CompletedPart
}

// span is the offsets of a file in the bucket.
type span struct{ first, last int64 }

// errReleased stops a Consume whose partition was released while it waited.
var errReleased = errors.New("s3 sink: the partition was released during Consume; the batch is redelivered to its next owner")

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
		uploadSeconds: m.Histogram("s3_sink_upload_duration_seconds", "Time to upload one file, retries included, and to encode it first (compression, Parquet).",
			[]float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120}),
		openFiles:     m.Gauge("s3_sink_open_files", "Files open in memory, one per topic and partition with buffered records."),
		bufferedBytes: m.Gauge("s3_sink_buffered_bytes", "Bytes held by open and uploading files, bounded by max_buffer_size."),
		inFlight:      m.Gauge("s3_sink_uploads_in_flight", "Uploads running now."),
		failingFiles:  m.Gauge("s3_sink_failing_files", "Files kept for retry after a failed upload (exactly_once); the sink refuses records while above 0."),
	}
}

// pqFile is the parquet state of one open file: the raw size of its open
// row group.
type pqFile struct {
	group int64
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
