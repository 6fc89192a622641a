package s3sink

import (
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression runs in the upload goroutine, once per file, before the
// first attempt: the file's chunks are replaced by compressed ones; a
// streamed file is compressed as it fills instead (stream.go). The
// encoders are fixed (compression_level, one goroutine, no timestamps), so
// the same records give the same bytes on every replay.

// compressors keeps encoders by compression and compression_level (none
// has no pool).
var compressors [compressZstd + 1][levelBest + 1]sync.Pool

func init() {
	for l := levelFastest; l <= levelBest; l++ {
		compressors[compressGzip][l].New = func() any {
			w, _ := gzip.NewWriterLevel(io.Discard, l.gzip())
			return w
		}
		compressors[compressZstd][l].New = func() any {
			w, _ := zstd.NewWriter(io.Discard, zstd.WithEncoderConcurrency(1),
				zstd.WithEncoderLevel(l.zstd()), zstd.WithWindowSize(4<<20))
			return w
		}
	}
}

func (w *chunkWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		last := len(w.chunks) - 1
		if last < 0 || len(w.chunks[last]) == cap(w.chunks[last]) {
			if !w.locked {
				w.s.mu.Lock()
			}
			c := w.s.pool.get(w.taken, 1)
			w.s.grow(cap(c))
			if !w.locked {
				w.s.mu.Unlock()
			}
			w.chunks = append(w.chunks, c)
			w.taken++
			last++
		}
		c := &w.chunks[last]
		k := min(len(b), cap(*c)-len(*c))
		*c = append(*c, b[:k]...)
		b = b[k:]
	}
	w.size += int64(n)
	return n, nil
}

// encoderBytes is about what an encoder holds once it has compressed a few
// MiB, by compression and compression_level (measured with the pooled
// settings: gzip 0.8, 1.0 and 1.35 MiB, zstd 8.7, 9.8 and 12.6 MiB).
var encoderBytes = [compressZstd + 1][levelBest + 1]int64{
	compressGzip: {1 << 20, 5 << 18, 3 << 19},
	compressZstd: {9 << 20, 10 << 20, 13 << 20},
}

// newEncoder takes an encoder of compression and compression_level from
// its pool. locked: its calls run with the sink's lock held, for a
// streamed file, and its state counts in the held bytes until it is
// given back (compress's, one per upload, does not, as before).
func (s *Sink) newEncoder(locked bool) *encoder {
	c, l := s.opts.Compression, s.opts.Level
	pool := &compressors[c][l]
	e := &encoder{c: pool.Get().(compressor), pool: pool, out: chunkWriter{s: s, locked: locked}}
	if locked {
		e.held = encoderBytes[c][l]
		s.grow(int(e.held))
	}
	e.c.Reset(&e.out)
	return e
}

// write compresses chunks into out.
func (e *encoder) write(chunks [][]byte) {
	for _, c := range chunks {
		_, _ = e.c.Write(c) // chunkWriter never fails
	}
}

// close ends the compressed stream in out and gives the encoder back.
func (e *encoder) close() {
	_ = e.c.Close()
	e.drop()
}

// drop gives the encoder back, its output unfinished.
func (e *encoder) drop() {
	e.c.Reset(io.Discard)
	e.pool.Put(e.c)
	e.c = nil
	if e.held > 0 { // locked
		e.out.s.grow(-int(e.held))
		e.held = 0
	}
}

// compress replaces f's chunks by their compressed bytes.
func (s *Sink) compress(f *closedFile) {
	if s.opts.Compression == compressNone {
		return
	}
	e := s.newEncoder(false)
	e.write(f.chunks)
	e.close()
	s.mu.Lock()
	s.free(f.chunks)
	f.chunks, f.size = e.out.chunks, e.out.size
	s.mu.Unlock()
}
