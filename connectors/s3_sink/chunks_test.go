package s3sink

import (
	"bytes"
	"fmt"
	"io"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

func TestChunkReader(t *testing.T) {
	chunks := [][]byte{[]byte("hello "), {}, []byte("chunked"), []byte(" world")}
	want := []byte("hello chunked world")
	r := newChunkReader(chunks)
	if r.Len() != len(want) {
		t.Fatalf("Len = %d", r.Len())
	}
	for _, bufSize := range []int{1, 3, 7, 100} {
		if _, err := r.Seek(0, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		var got []byte
		buf := make([]byte, bufSize)
		for {
			n, err := r.Read(buf)
			got = append(got, buf[:n]...)
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("buf %d: %q", bufSize, got)
		}
	}
	for _, off := range []int64{0, 5, 6, 12, 13, 18, 19} {
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		rest, _ := io.ReadAll(r)
		if !bytes.Equal(rest, want[off:]) {
			t.Fatalf("seek %d: %q", off, rest)
		}
	}
	for _, off := range []int64{0, 5, 6, 12, 13, 18, 19} {
		if _, err := r.Seek(off, io.SeekStart); err != nil {
			t.Fatal(err)
		}
		var got bytes.Buffer
		n, err := r.WriteTo(&got)
		if err != nil || n != int64(len(want))-off || !bytes.Equal(got.Bytes(), want[off:]) {
			t.Fatalf("WriteTo after seek %d: %d, %v, %q", off, n, err, got.Bytes())
		}
		if r.Len() != 0 {
			t.Fatalf("WriteTo after seek %d left Len %d", off, r.Len())
		}
		if k, err := r.Read(make([]byte, 4)); k != 0 || err != io.EOF {
			t.Fatalf("Read after WriteTo from %d: %d, %v", off, k, err)
		}
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	if n, err := r.WriteTo(shortWriter{}); n != 3 || err != io.ErrShortWrite || r.Len() != len(want)-3 {
		t.Fatalf("WriteTo into a short writer: %d, %v, Len %d", n, err, r.Len())
	}
	if p, _ := r.Seek(-5, io.SeekEnd); p != int64(len(want)-5) {
		t.Fatalf("SeekEnd = %d", p)
	}
	if _, err := r.Seek(-1, io.SeekStart); err == nil {
		t.Fatal("negative seek accepted")
	}
	if !bytes.Equal(r.bytes(), want) {
		t.Fatal("bytes")
	}
}

func TestChunkPool(t *testing.T) {
	p := newChunkPool(16<<10, 40<<10)
	// A file's chunks double from 4 KiB up to the largest size.
	var caps []int
	for n := 0; n < 5; n++ {
		caps = append(caps, cap(p.get(n, 100)))
	}
	if fmt.Sprint(caps) != "[4096 8192 16384 16384 16384]" {
		t.Fatalf("caps = %v", caps)
	}
	// A record bigger than the class gets a bigger class, or its own chunk.
	if c := p.get(0, 5000); cap(c) != 8192 {
		t.Fatalf("cap = %d", cap(c))
	}
	if c := p.get(0, 20000); cap(c) != 20000 {
		t.Fatalf("outsize cap = %d", cap(c))
	}
	// Returned chunks are reused, within the byte budget.
	p.put([][]byte{make([]byte, 5, 16<<10), make([]byte, 0, 16<<10), make([]byte, 0, 16<<10), make([]byte, 0, 4<<10), make([]byte, 0, 20000)})
	if p.freeBytes != 36<<10 || len(p.free[16<<10]) != 2 || len(p.free[4<<10]) != 1 {
		t.Fatalf("free = %d bytes, %v", p.freeBytes, p.free)
	}
	if c := p.get(4, 1); cap(c) != 16<<10 || len(c) != 0 || p.freeBytes != 20<<10 {
		t.Fatalf("reuse: cap %d len %d free %d", cap(c), len(c), p.freeBytes)
	}
	p.release()
	if p.freeBytes != 0 || len(p.free) != 0 {
		t.Fatal("release")
	}
	for _, c := range []struct {
		max   int64
		msgs  bool
		chunk int
	}{{8 << 20, false, 1 << 20}, {1 << 20, false, 256 << 10}, {100, false, 4 << 10}, {100, true, 1 << 20}} {
		if got := chunkSizeFor(c.max, c.msgs); got != c.chunk {
			t.Errorf("chunkSizeFor(%d, %v) = %d", c.max, c.msgs, got)
		}
	}
}

// TestSmallFilesHoldLittle buffers one small record in each of many
// partitions: each holds one 4 KiB chunk, whatever the rotation.
func TestSmallFilesHoldLittle(t *testing.T) {
	for _, byMessages := range []bool{false, true} {
		o := defaultOptions()
		o.RotateByMessages, o.MaxMessages = byMessages, 1000
		s := newSink(o, sinkEnv("test", sdk.DiscardMetrics))
		r := benchRecords(1, 100)[0]
		for p := int32(0); p < 1000; p++ {
			r.Partition = p
			if err := s.append(s.partition(r.Topic, p), &r); err != nil {
				t.Fatal(err)
			}
		}
		held := 0
		for _, p := range s.parts {
			for _, c := range p.open.chunks {
				held += cap(c)
			}
		}
		if held != 1000*minChunkSize || s.held != int64(held) {
			t.Fatalf("messages=%v: 1000 one-record files hold %d bytes", byMessages, held)
		}
	}
}

// shortWriter takes at most three bytes of each write and reports no error.
type shortWriter struct{}

func (shortWriter) Write(p []byte) (int, error) { return min(len(p), 3), nil }
