package s3sink

import (
	"bytes"
	"compress/gzip"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/picomq/pico-connectors/sdk"
)

// TestCompressionLevels compresses one file of 1 KiB records with random
// hex filler at each compression_level: twice the same bytes (a replay
// rewrites identical objects), the records back on decompression, gzip's
// header naming the level (XFL 4 for level 1, 2 for level 9), and zstd's
// levels giving different bytes.
func TestCompressionLevels(t *testing.T) {
	o := defaultOptions()
	f := newFormatter(&o)
	tail := metaTail("events", 0)
	recs := hexRecords(600, 1024)
	var chunks [][]byte
	var raw []byte
	for i := range recs {
		c := f.appendRecord(nil, &recs[i], i == 0, tail)
		chunks = append(chunks, c)
		raw = append(raw, c...)
	}
	compressed := func(comp compression, l level) []byte {
		o := defaultOptions()
		o.Compression, o.Level = comp, l
		s := newSink(o, sinkEnv("t", sdk.DiscardMetrics))
		fl := &closedFile{chunks: append([][]byte(nil), chunks...)}
		for i, c := range fl.chunks {
			fl.chunks[i] = append([]byte(nil), c...)
		}
		s.compress(fl)
		out := newChunkReader(fl.chunks).bytes()
		if int64(len(out)) != fl.size {
			t.Fatalf("size %d, %d bytes", fl.size, len(out))
		}
		return out
	}
	for _, comp := range []compression{compressGzip, compressZstd} {
		var prev []byte
		for _, l := range []level{levelFastest, levelDefault, levelBest} {
			out := compressed(comp, l)
			if again := compressed(comp, l); !bytes.Equal(out, again) {
				t.Fatalf("%s level %d: two runs gave different bytes", comp.encoding(), l)
			}
			var r io.Reader
			if comp == compressGzip {
				if want := [...]byte{4, 0, 2}[l]; out[8] != want {
					t.Errorf("gzip level %d: XFL %d, want %d", l.gzip(), out[8], want)
				}
				zr, err := gzip.NewReader(bytes.NewReader(out))
				if err != nil {
					t.Fatal(err)
				}
				r = zr
			} else {
				zr, err := zstd.NewReader(bytes.NewReader(out))
				if err != nil {
					t.Fatal(err)
				}
				defer zr.Close()
				r = zr
				if bytes.Equal(out, prev) {
					t.Errorf("zstd level %d gave the bytes of the level below", l)
				}
			}
			back, err := io.ReadAll(r)
			if err != nil || !bytes.Equal(back, raw) {
				t.Fatalf("%s level %d: decompressed %d bytes (%v), want the %d written", comp.encoding(), l, len(back), err, len(raw))
			}
			t.Logf("%s %d: %d -> %d bytes (%.3f)", comp.encoding(), l, len(raw), len(out), float64(len(out))/float64(len(raw)))
			prev = out
		}
	}
}
