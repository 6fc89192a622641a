package s3sink

import (
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

// Compression runs in the upload goroutine, once per file, before the
// first attempt: the file's chunks are replaced by compressed ones. The
// encoders are fixed (compression_level, one goroutine, no timestamps), so
// the same records give the same bytes on every replay.

// compressor is a pooled encoder: a *gzip.Writer or a *zstd.Encoder.
type compressor interface {
	io.WriteCloser
	Reset(w io.Writer)
}

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

// chunkWriter collects written bytes into chunks taken from the sink's
// pool, counted in the sink's held bytes.
type chunkWriter struct {
	s      *Sink
	chunks [][]byte
	size   int64
}

func (w *chunkWriter) Write(b []byte) (int, error) {
	n := len(b)
	for len(b) > 0 {
		last := len(w.chunks) - 1
		if last < 0 || len(w.chunks[last]) == cap(w.chunks[last]) {
			w.s.mu.Lock()
			c := w.s.pool.get(len(w.chunks), 1)
			w.s.grow(cap(c))
			w.s.mu.Unlock()
			w.chunks = append(w.chunks, c)
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

// compress replaces f's chunks by their compressed bytes.
func (s *Sink) compress(f *closedFile) {
	if s.opts.Compression == compressNone {
		return
	}
	w := &chunkWriter{s: s}
	pool := &compressors[s.opts.Compression][s.opts.Level]
	enc := pool.Get().(compressor)
	defer func() { enc.Reset(io.Discard); pool.Put(enc) }()
	enc.Reset(w)
	for _, c := range f.chunks {
		_, _ = enc.Write(c) // chunkWriter never fails
	}
	_ = enc.Close()
	s.mu.Lock()
	s.free(f.chunks)
	f.chunks, f.size = w.chunks, w.size
	s.mu.Unlock()
}
