package s3sink

import (
	"bytes"
	"io"
	"testing"
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
	p := newChunkPool(16, 2)
	a, b, c := p.get(10), p.get(16), p.get(17)
	if cap(a) != 16 || cap(b) != 16 || cap(c) != 17 {
		t.Fatalf("caps %d %d %d", cap(a), cap(b), cap(c))
	}
	p.put([][]byte{append(a, 'x'), b, c, make([]byte, 0, 16)})
	if len(p.free) != 2 || len(p.free[0]) != 0 {
		t.Fatalf("free = %d", len(p.free))
	}
	if got := p.get(1); cap(got) != 16 || len(p.free) != 1 {
		t.Fatal("reuse")
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
