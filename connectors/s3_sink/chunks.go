package s3sink

import (
	"errors"
	"io"
)

// A file is held as a list of chunks rather than one growing slice: it
// never copies itself to grow, leaves no garbage behind while it fills, and
// its chunks go back to a free list after the upload, so the memory of a
// file is its size plus at most one chunk.

const (
	minChunkSize = 4 << 10
	maxChunkSize = 1 << 20
)

// chunkSizeFor picks the largest chunk size for a max_file_size: a quarter
// of it, between 4 KiB and 1 MiB.
func chunkSizeFor(maxFileSize int64, byMessages bool) int {
	if byMessages {
		return maxChunkSize
	}
	return int(min(max(maxFileSize/4, minChunkSize), maxChunkSize))
}

// chunkPool hands out chunks and keeps returned ones up to a byte budget.
// The chunks of one file double in size, from minChunkSize up to the
// pool's largest size, so a file that stays small holds little memory.
type chunkPool struct {
	size      int // largest chunk
	free      map[int][][]byte
	freeBytes int
	maxFree   int // bytes
}

func newChunkPool(size, maxFreeBytes int) *chunkPool {
	return &chunkPool{size: size, free: map[int][][]byte{}, maxFree: maxFreeBytes}
}

// classFor returns the chunk size for the n-th chunk (from 0) of a file.
func (p *chunkPool) classFor(n int) int {
	c := minChunkSize
	for i := 0; i < n && c < p.size; i++ {
		c *= 2
	}
	return min(c, p.size)
}

// capFor returns the capacity get hands out for the n-th chunk of a file
// with room for need bytes.
func (p *chunkPool) capFor(n, need int) int {
	class := p.classFor(n)
	for class < need && class < p.size {
		class *= 2
	}
	return max(min(class, p.size), need)
}

// get returns an empty chunk for the n-th chunk of a file, with room for
// at least need bytes.
func (p *chunkPool) get(n, need int) []byte {
	class := p.capFor(n, need)
	if class > p.size {
		return make([]byte, 0, need) // an outsize record gets its own chunk
	}
	if l := p.free[class]; len(l) > 0 {
		c := l[len(l)-1]
		l[len(l)-1] = nil
		p.free[class] = l[:len(l)-1]
		p.freeBytes -= class
		return c
	}
	return make([]byte, 0, class)
}

// put takes chunks back once their file is uploaded or dropped.
func (p *chunkPool) put(chunks [][]byte) {
	for _, c := range chunks {
		class := cap(c)
		if class > p.size || class&(class-1) != 0 || p.freeBytes+class > p.maxFree {
			continue // outsize, or over the budget: left to the collector
		}
		p.free[class] = append(p.free[class], c[:0])
		p.freeBytes += class
	}
}

// release drops every free chunk.
func (p *chunkPool) release() {
	clear(p.free)
	p.freeBytes = 0
}

// chunkReader reads a list of chunks as one body; it seeks, so the SDK
// can hash the body and rewind it.
type chunkReader struct {
	chunks [][]byte
	size   int64
	off    int64 // absolute position
	ci     int   // chunk holding off
	co     int   // position of off inside chunks[ci]
}

func newChunkReader(chunks [][]byte) *chunkReader {
	var n int64
	for _, c := range chunks {
		n += int64(len(c))
	}
	return &chunkReader{chunks: chunks, size: n}
}

// Len returns the unread length.
func (r *chunkReader) Len() int { return int(max(r.size-r.off, 0)) }

// Read implements io.Reader.
func (r *chunkReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := 0
	for n < len(p) && r.ci < len(r.chunks) {
		c := r.chunks[r.ci]
		k := copy(p[n:], c[r.co:])
		n += k
		r.co += k
		if r.co >= len(c) {
			r.ci++
			r.co = 0
		}
	}
	r.off += int64(n)
	return n, nil
}

// WriteTo implements io.WriterTo: it writes the unread chunks to w as they
// are, so io.Copy (the SDK's checksum pass over the body) does not first
// copy them into a buffer of its own.
func (r *chunkReader) WriteTo(w io.Writer) (int64, error) {
	var n int64
	for r.off < r.size && r.ci < len(r.chunks) {
		c := r.chunks[r.ci][r.co:]
		k, err := w.Write(c)
		n += int64(k)
		r.off += int64(k)
		if r.co += k; r.co >= len(r.chunks[r.ci]) {
			r.ci, r.co = r.ci+1, 0
		}
		if err != nil {
			return n, err
		}
		if k < len(c) {
			return n, io.ErrShortWrite
		}
	}
	return n, nil
}

// Seek implements io.Seeker.
func (r *chunkReader) Seek(offset int64, whence int) (int64, error) {
	var abs int64
	switch whence {
	case io.SeekStart:
		abs = offset
	case io.SeekCurrent:
		abs = r.off + offset
	case io.SeekEnd:
		abs = r.size + offset
	default:
		return 0, errors.New("chunkReader: bad whence")
	}
	if abs < 0 {
		return 0, errors.New("chunkReader: negative position")
	}
	r.off = abs
	r.ci, r.co = len(r.chunks), 0
	pos := int64(0)
	for i, c := range r.chunks {
		if abs < pos+int64(len(c)) {
			r.ci, r.co = i, int(abs-pos)
			break
		}
		pos += int64(len(c))
	}
	return abs, nil
}

// bytes returns the chunks joined; for tests.
func (r *chunkReader) bytes() []byte {
	out := make([]byte, 0, r.size)
	for _, c := range r.chunks {
		out = append(out, c...)
	}
	return out
}
