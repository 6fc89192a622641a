package s3sink

import (
	"github.com/parquet-go/parquet-go"
)

// Parquet output: each open file has a parquet.Writer that writes straight
// into the file's chunks. Rows are buffered by the writer until the row
// group is flushed; the raw size of the buffered rows is counted in the
// sink's held bytes, so max_buffer_size bounds them as well. A row group is
// flushed when its raw size reaches a target worked out from the file's
// encoded size so far, and the file closes once its encoded size reaches
// max_file_size. Every decision depends only on the records and the
// configuration, and the writer is set up with fixed settings (no wall
// clock, a fixed created_by), so a replay writes the same bytes.

// pqPageBuffer is the raw size of a column's page buffer. A writer holds
// about pqWriterBytes per column whatever it holds, counted in the sink's
// held bytes while its file is open (measured: 12 KiB per column at 16 KiB
// pages, 36 KiB at 64 KiB).
const (
	pqPageBuffer  = 32 << 10
	pqWriterBytes = pqPageBuffer/2 + 4<<10
)

// writerBytes is what one parquet writer holds.
func (s *Sink) writerBytes() int { return len(s.pq.cols) * pqWriterBytes }

// pqFooterBound is room kept for a file's footer when checking it against
// the single PutObject limit.
const pqFooterBound = 1 << 20

// openParquet starts the parquet writer of fb. Always a new one: a
// writer reused through Reset does not write the same bytes as a new one
// (parquet-go v0.32.0), and a replay must.
func (s *Sink) openParquet(fb *fileBuffer) {
	out := &pqOut{s: s, fb: fb}
	w := parquet.NewWriter(out, s.pq.schema,
		parquet.Compression(s.pq.codec),
		parquet.CreatedBy("pico-connectors s3_sink", "1", "parquet-go v0.32.0"),
		parquet.WriteBufferSize(0),
		parquet.PageBufferSize(pqPageBuffer))
	s.grow(s.writerBytes())
	fb.pq = &pqFile{w: w, out: out, target: s.rowGroupTarget(0, 0)}
}

func (o *pqOut) Write(b []byte) (int, error) {
	fb, s := o.fb, o.s
	n := len(b)
	for len(b) > 0 {
		last := len(fb.chunks) - 1
		if last < 0 || len(fb.chunks[last]) == cap(fb.chunks[last]) {
			c := s.pool.get(len(fb.chunks), 1)
			s.grow(cap(c))
			fb.chunks = append(fb.chunks, c)
			last++
		}
		c := &fb.chunks[last]
		k := min(len(b), cap(*c)-len(*c))
		*c = append(*c, b[:k]...)
		b = b[k:]
	}
	fb.size += int64(n)
	return n, nil
}

// rowGroupTarget is the raw size of the next row group of a file that has
// enc encoded bytes from flushed raw bytes: what should bring the file to
// max_file_size at the compression seen so far, between a sixteenth of
// max_file_size and max_file_size (and parquet_row_group_size, and half of
// max_buffer_size).
func (s *Sink) rowGroupTarget(enc, flushed int64) int64 {
	limit := min(s.opts.MaxFileSize, max(s.opts.MaxBufferSize/2, 1))
	if s.opts.RowGroupSize > 0 {
		limit = min(limit, s.opts.RowGroupSize)
	}
	floor := min(max(s.opts.MaxFileSize/16, 4<<10), limit)
	if enc <= 0 || flushed <= 0 {
		return limit
	}
	want := float64(s.opts.MaxFileSize-enc) * float64(flushed) / float64(enc)
	return min(max(int64(want), floor), limit)
}

// finishParquet writes the last row group and the footer of fb. The
// reservations of its rows and its writer pass to the encoded bytes first.
func (s *Sink) finishParquet(fb *fileBuffer) {
	pf := fb.pq
	s.dropParquet(fb)
	if err := pf.w.Close(); err != nil {
		// Writes into chunks never fail; the writer itself has no other
		// reason to.
		s.log.Error("S3 sink could not finish a parquet file", "error", err)
	}
}

// dropParquet lets go of fb's writer and its held row group.
func (s *Sink) dropParquet(fb *fileBuffer) {
	pf := fb.pq
	if pf == nil {
		return
	}
	s.grow(-int(pf.pending) - s.writerBytes())
	pf.pending = 0
	fb.pq = nil
}
