package s3sink

import (
	"encoding/binary"
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// Parquet output: Consume converts a record into its row and appends the
// row, serialized, to the open file's chunks, like a formatted record; the
// file's size and its row groups are counted in those raw bytes. The
// upload worker encodes the rows into the Parquet file (encodeParquet),
// off the consume path, before the first attempt, as it compresses the
// other formats. Every decision (where a row group ends, where a file is
// cut) depends only on the records and the configuration, and the writer
// is set up with fixed settings (no wall clock, a fixed created_by), so a
// replay writes the same bytes.

// pqPageBuffer is the raw size of a column's page buffer. A writer holds
// about pqWriterBytes per column whatever it holds, counted in the sink's
// held bytes while it encodes (measured: 12 KiB per column at 16 KiB
// pages, 36 KiB at 64 KiB).
const (
	pqPageBuffer  = 32 << 10
	pqWriterBytes = pqPageBuffer/2 + 4<<10
)

// writerBytes is what one parquet writer holds, at most: the widest
// layout's.
func (s *Sink) writerBytes() int {
	cols := s.pq.columns()
	if s.avro != nil {
		for _, b := range s.avro.blocks {
			if b.layout != nil {
				cols = max(cols, b.layout.columns())
			}
		}
	}
	return cols * pqWriterBytes
}

// pqLayoutOf returns the parquet layout of topic's records: its Avro schema's
// (SetTopics), or the configured columns.
func (s *Sink) pqLayoutOf(topic string) *pqLayout {
	if s.avro != nil {
		if l := s.avro.layout(topic); l != nil {
			return l
		}
	}
	return s.pq
}

// pqFooterBound is room kept for a file's footer and page headers when
// checking it against the largest object (maxObjectBytes).
const pqFooterBound = 1 << 20

// appendParquetRow appends the converted row of the record (s.row) to fb's
// last chunk, which has room for rowBytes of it plus one byte, starting a
// new row group first when the open one has reached its target.
func (s *Sink) appendParquetRow(dst []byte, fb *fileBuffer) []byte {
	if fb.pq == nil {
		fb.pq = &pqFile{}
	}
	pf := fb.pq
	if pf.group >= s.rowGroupTarget() {
		dst = binary.AppendUvarint(dst, 0)
		pf.group = 0
	}
	before := len(dst)
	dst = appendRow(dst, s.row.row)
	pf.group += int64(len(dst) - before)
	return dst
}

// rowGroupTarget is the raw size (serialized rows) at which a row group
// ends: parquet_row_group_size, at most max_file_size and half of
// max_buffer_size.
func (s *Sink) rowGroupTarget() int64 {
	limit := min(s.opts.MaxFileSize, max(s.opts.MaxBufferSize/2, 1))
	if s.opts.RowGroupSize > 0 {
		limit = min(limit, s.opts.RowGroupSize)
	}
	return limit
}

// encode turns f's chunks into the object's bytes, once: the Parquet file
// its rows make, or the compressed file.
func (s *Sink) encode(f *closedFile) error {
	if f.encoded {
		return nil
	}
	switch {
	case s.pq != nil:
		if err := s.encodeParquet(f); err != nil {
			return err
		}
	case s.opts.Compression != compressNone:
		s.compress(f)
	}
	f.encoded = true
	return nil
}

// pqBatch is how many rows encodeParquet hands the writer at once.
const pqBatch = 256

// encodeRoom is what room keeps free under max_buffer_size for the parquet
// encodings that may still start: encodeBudget, less the reservations of
// those running (held already).
func (s *Sink) encodeRoom() int64 {
	if s.pq == nil {
		return 0
	}
	return max(s.encodeBudget()-s.encoding, 0)
}

// encodeBudget is what the encodings running at once may reserve:
// max_in_flight of encodeReserve, at most half of max_buffer_size, so a
// small buffer still leaves its other half to the open files (an encoding
// that does not fit waits for the others, see encodeParquet).
func (s *Sink) encodeBudget() int64 {
	return min(int64(s.opts.MaxInFlight)*s.encodeReserve(), s.opts.MaxBufferSize/2)
}

// encodeReserve is what one encoding holds beside its file: the writer,
// and the encoded pages of the row group it buffers until the row group
// ends, at most its raw size; at most half of max_buffer_size.
func (s *Sink) encodeReserve() int64 {
	return min(int64(s.writerBytes())+min(s.rowGroupTarget(), s.opts.MaxFileSize), s.opts.MaxBufferSize/2)
}

// parquetWriter returns the writer of a file of layout l into out, with
// the settings every file has (no wall clock, a fixed created_by), so the
// same rows give the same bytes whether the file is encoded at its upload
// or as it streams (parquet_stream.go).
func parquetWriter(out io.Writer, l *pqLayout) *parquet.Writer {
	return parquet.NewWriter(out, l.schema,
		parquet.Compression(l.codec),
		parquet.CreatedBy("pico-connectors s3_sink", "1", "parquet-go v0.32.0"),
		parquet.WriteBufferSize(0),
		parquet.PageBufferSize(pqPageBuffer))
}

// encodeParquet replaces f's serialized rows by the Parquet file they make.
// It runs in the upload goroutine. The rows' chunks go back to the pool as
// they are written, so the file's rows and its encoded bytes together stay
// about its size, plus encodeReserve. It fails only on a bug (rows the
// writer refuses); the rows are gone by then, so it fails for good.
func (s *Sink) encodeParquet(f *closedFile) error {
	if f.encodeErr != nil {
		return f.encodeErr
	}
	out := &chunkWriter{s: s}
	l := s.pqLayoutOf(f.p.topic)
	w := parquetWriter(out, l)
	reserve := s.encodeReserve()
	s.mu.Lock()
	// One encoding always runs beside the streamed files' writers; more
	// only within encodeBudget.
	for s.encoding > s.streamWriters && s.encoding+reserve > s.encodeBudget() {
		s.cond.Wait()
	}
	s.grow(int(reserve))
	s.encoding += reserve
	s.mu.Unlock()
	r := newRowReader(w, l.columns(), func(chunks [][]byte) {
		s.mu.Lock()
		s.free(chunks)
		s.mu.Unlock()
	})
	err := r.finish(f.chunks)
	f.chunks = f.chunks[r.done:]
	s.mu.Lock()
	defer s.mu.Unlock()
	s.grow(-int(reserve))
	s.encoding -= reserve
	s.cond.Broadcast()
	s.free(f.chunks)
	if err != nil {
		s.free(out.chunks)
		f.chunks, f.size = nil, 0
		f.encodeErr = s.encodeFailed(f.key, err)
		return f.encodeErr
	}
	f.chunks, f.size = out.chunks, out.size
	return nil
}

// encodeFailed logs and returns the error of a Parquet file whose rows the
// writer refused (a bug): the file is not uploaded.
func (s *Sink) encodeFailed(key string, err error) error {
	s.log.Error("S3 sink could not encode a parquet file", "key", key, "error", err)
	return fmt.Errorf("s3 sink: encoding the parquet file %s failed, its records are not uploaded: %w", key, err)
}

func newRowReader(w *parquet.Writer, cols int, free func([][]byte)) *rowReader {
	return &rowReader{w: w, cols: cols, rows: make([]parquet.Row, 0, pqBatch), values: make([]parquet.Value, 0, pqBatch*cols), free: free}
}

// read reads the rows of chunks from where the last read stopped to the
// end of the last chunk, which may grow before the next read.
func (r *rowReader) read(chunks [][]byte) error {
	for r.ci < len(chunks) {
		c := chunks[r.ci]
		for r.i < len(c) {
			start := len(r.values)
			var err error
			r.values, r.i, err = readRow(c, r.i, r.values)
			if err != nil {
				return err
			}
			if len(r.values) == start { // a mark: the row group ends
				if err := r.write(chunks, r.ci); err != nil {
					return err
				}
				if err := r.w.Flush(); err != nil {
					return err
				}
				continue
			}
			r.rows = append(r.rows, r.values[start:len(r.values):len(r.values)])
			if len(r.rows) == pqBatch || cap(r.values)-len(r.values) < r.cols {
				if err := r.write(chunks, r.ci); err != nil {
					return err
				}
			}
		}
		if r.ci == len(chunks)-1 {
			break // the last chunk: the next rows go on in it
		}
		r.ci, r.i = r.ci+1, 0
	}
	return nil
}

// finish reads the rest of chunks, hands the last batch to the writer,
// frees the chunks and closes the writer (the last row group and the
// footer).
func (r *rowReader) finish(chunks [][]byte) error {
	if err := r.read(chunks); err != nil {
		return err
	}
	if err := r.write(chunks, len(chunks)); err != nil {
		return err
	}
	return r.w.Close()
}

// write hands the batch to the writer, then frees chunks[done:upTo].
func (r *rowReader) write(chunks [][]byte, upTo int) error {
	if len(r.rows) > 0 {
		if _, err := r.w.WriteRows(r.rows); err != nil {
			return err
		}
	}
	r.rows, r.values = r.rows[:0], r.values[:0]
	if upTo > r.done {
		r.free(chunks[r.done:upTo])
		r.done = upTo
	}
	return nil
}
