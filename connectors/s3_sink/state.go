package s3sink

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/parquet-go/parquet-go"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
	"github.com/picomq/pico-connectors/sdk"
)

// The sink's state, which every file above this one works on: the Sink,
// its partitions, each partition's open file and its closed files on their
// way to the bucket, and the bytes they hold.
//
// The files of the package are layers; each uses only the files below it:
//
//	keys, chunks, objectsettings, access object keys, buffers, object headers, role settings
//	parquet_group                        a Parquet record schema whose fields keep their order
//	options, avro_node                   settings; an Avro schema as Parquet nodes
//	retry, format, parquet               the retry policy; JSON output; the Parquet layout
//	iceberg_options                      table_format = "iceberg": its keys
//	avro_walk, keys_avro                 an Avro record's values; path_template's {field:...}
//	parquet_row                          a record's Parquet row
//	parquet_avro                         an Avro topic's Parquet layout and row
//	topics                               what SetTopics learnt of the [[topics]] blocks
//	state                                this file
//	compress, multipart, marker          a file's encoder, its parts, a group's marker
//	iceberg_columns                      the Iceberg table's columns
//	credentials                          assumed role, HTTP client with ca_file
//	parquet_file, parquet_stream         a file's Parquet encoding, at its upload or as it streams
//	stream, iceberg                      a large file's parts while it fills; the table's commits
//	upload, group                        a file's upload; a partition's open files together
//	file, health                         a partition's open file: append, cut
//	recovery, durable                    replay after an assignment; Durable and Release
//	place                                a record's file in its group
//	sink                                 New, Open, Consume, Close
//	config, check                        the config's rules, Check
//	iceberg_admin                        the iceberg-orphans command
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
	parts    map[bufferKey]*partitionState
	last     *partitionState // the partition the previous record went to
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
	// streamWriters is the part of encoding the writers of streamed
	// Parquet files hold (parquet_stream.go).
	streamWriters int64

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

// partitionState is the state of one topic and partition.
type partitionState struct {
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
	lastAppend time.Time     // wall clock, for flush_interval
	pending    []*closedFile // closed files not yet uploaded, in offset order
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
	stream *fileStream
	// part is the table partition values of its first record
	// (table_format = "iceberg" with iceberg_partition_by), nil otherwise.
	part map[string]any
}

type fileState int

const (
	fileQueued fileState = iota
	fileUploading
	fileFailed // exactly_once: waiting for its next round of attempts
	fileDone   // uploaded, or (buffered) lost
)

// closedFile is a closed file on its way to the bucket.
type closedFile struct {
	p      *partitionState
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
	siblings  []*closedFile
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
	stream *fileStream
}

// mpuState is a file's multipart upload: its id, and each part once it is
// in (a nil ETag: not yet).
type mpuState struct {
	id    *string
	parts []types.CompletedPart
}

// groupMark is the marker of one group, shared by its files.
type groupMark struct {
	mu      sync.Mutex
	key     string
	written atomic.Bool // read by mayStart under the sink's lock
	left    int         // files of the group not yet uploaded
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
// row group, and once the file streams its encoder (parquet_stream.go).
type pqFile struct {
	group int64
	enc   *pqStream
}

// pqStream is the encoder of a streamed Parquet file, under the sink's
// lock.
type pqStream struct {
	w       *parquet.Writer
	rows    *rowReader
	out     chunkWriter // the encoded bytes, in the pool's largest chunks
	reserve int64
	err     error // the writer refused a row (a bug): the file fails at its cut
}

// compressor is a pooled encoder: a *gzip.Writer or a *zstd.Encoder.
type compressor interface {
	io.WriteCloser
	Reset(w io.Writer)
}

// chunkWriter collects written bytes into chunks taken from the sink's
// pool, counted in the sink's held bytes. locked: its writer holds the
// sink's lock (a streamed file's encoder, see encoder).
type chunkWriter struct {
	s      *Sink
	locked bool
	chunks [][]byte
	size   int64
	taken  int // chunks taken so far, for the pool's sizes (a streamed file's go back as its parts go up)
}

// encoder is a pooled compressor writing into out: the compressed file
// of compress, or that of a streamed file, fed its chunks as they fill
// (stream.go), whose parts are cut from out. Either way the encoder sees
// the file's bytes in order, whatever their chunks' sizes, so the output
// is the same bytes (TestStreamCompressorBoundaries).
type encoder struct {
	c    compressor
	pool *sync.Pool
	out  chunkWriter
	held int64 // its state, counted in the sink's held bytes (a streamed file's)
}

// rowReader reads the serialized rows of a file's chunks into a parquet
// writer: pqBatch rows per WriteRows (fewer when a row group ends, or when
// the values' buffer is full), a row group per mark. The batches depend
// only on the rows, so a file read in one go (encodeParquet) and one read
// as it fills (parquet_stream.go) give the writer the same calls, and the
// same bytes.
type rowReader struct {
	w      *parquet.Writer
	cols   int
	rows   []parquet.Row
	values []parquet.Value
	// ci and i are where the next row starts in the chunks read: chunk
	// ci, byte i. The chunks below done hold no row still to write (the
	// rows of a batch point into its chunks until it is written); free
	// takes them as they are done.
	ci, i, done int
	free        func([][]byte)
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

// iceState is the sink's table and what its commits have done.
type iceState struct {
	table *icetable.Table
	spec  []partitionField
	// commitMu serializes commits (the timer's and Close's); committing
	// is set, under the sink's lock, while one runs with it released, and
	// Release waits for it to end.
	commitMu   sync.Mutex
	committing bool
	// failures counts the commits that failed since the last success,
	// lastErr is the last one's error; snapshot is the last snapshot id.
	failures int
	lastErr  error
	snapshot int64
	m        iceMetrics
}

// icePart is a partition's table state.
type icePart struct {
	// expect is the table's offset for the partition as read at its start
	// or as last committed (-1: none); a commit only applies while the
	// table still has it. durable is what Durable reports: the offset the
	// table holds for the partition, or where consumption started when
	// the table is behind.
	expect, durable int64
	// files were uploaded and are not yet in the table, by first offset;
	// since is when the oldest of them was uploaded.
	files []icetable.DataFile
	since time.Time
	// fenced: another writer moved the table's offset of the partition;
	// this sink commits none of its files any more.
	fenced bool
}

type iceMetrics struct {
	snapshot  sdk.Gauge
	lag       sdk.Gauge
	pending   sdk.Gauge
	commits   sdk.Counter
	failures  sdk.Counter
	committed sdk.Counter
}

// fileStream is the staging upload of a streamed file. Its fields are under
// the sink's lock.
type fileStream struct {
	key string
	// mpu: the upload (id nil until created) and the parts started so
	// far, each with its ETag once in.
	mpu mpuState
	// base: the bytes freed below the owner's chunks; chunks and size:
	// the owner's (the open file's, then the cut file's).
	base   int64
	chunks *[][]byte
	size   *int64
	// enc: a compressed file's encoder while it is open; chunks and size
	// are its output's, the open file's chunks raw (compressFilled).
	enc     *encoder
	running int  // part uploads running
	broken  bool // a part failed after its attempts: none starts until the cut
	cut     bool // the file was cut: its upload sends the rest
	// handed: the upload took the parts over (putStreamed); staged: the
	// staging object is complete.
	handed, staged bool
	dropped        bool     // the file was dropped: abort once no part runs
	leftover       [][]byte // a dropped open file's chunks, freed then
	ctx            context.Context
	cancel         context.CancelFunc
}

// every runs f every d until Close; the caller has counted it in s.wg.
func (s *Sink) every(d time.Duration, f func()) {
	defer s.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
		}
		f()
	}
}

// durable is p's offset for Durable: the first record of its oldest file
// not uploaded, or of its open group, or its next offset; in buffered
// delivery every accepted record counts.
func (p *partitionState) durable(buffered bool) int64 {
	switch {
	case buffered:
		return p.next
	case len(p.pending) > 0:
		return p.pending[0].info.FirstOffset
	case p.group.count > 0:
		return p.group.first
	}
	return p.next
}

// full reports whether the open file fb reached max_file_size, or
// max_messages_per_file when files rotate by messages.
func (fb *fileBuffer) full(o *options) bool {
	if o.RotateByMessages && fb.count >= o.MaxMessages {
		return true
	}
	return fb.size >= o.MaxFileSize
}
