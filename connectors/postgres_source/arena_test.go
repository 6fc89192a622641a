package postgressource

import (
	"bytes"
	"testing"
)

// TestArenaBlocksNeverGrow appends records of 1,100 to 1,139 bytes, in
// pieces as the encoder does, and records of 300 KiB: every record comes
// back intact, and the arena never holds a block bigger than arenaBlock
// (append used to move a block that a record overflowed to a 1.25x bigger
// array, which stayed the block and grew again).
func TestArenaBlocksNeverGrow(t *testing.T) {
	var a arena
	var recs [][]byte
	var want [][]byte
	for i := 0; i < 20000; i++ {
		n := 1100 + i%40
		if i%5000 == 4999 {
			n = 300 << 10 // larger than a block
		}
		rec := bytes.Repeat([]byte{byte('a' + i%26)}, n)
		start := a.begin()
		for off := 0; off < n; off += 100 {
			a.buf = append(a.buf, rec[off:min(off+100, n)]...)
		}
		got := a.end(start)
		if cap(a.buf) > arenaBlock {
			t.Fatalf("record %d (%d bytes): the arena's block is %d bytes, more than arenaBlock (%d)", i, n, cap(a.buf), arenaBlock)
		}
		recs, want = append(recs, got), append(want, rec)
	}
	for i := range recs {
		if !bytes.Equal(recs[i], want[i]) {
			t.Fatalf("record %d: %d bytes %.20q..., want %d bytes %.20q...", i, len(recs[i]), recs[i], len(want[i]), want[i])
		}
		if cap(recs[i]) != len(recs[i]) {
			t.Fatalf("record %d: cap %d beyond its %d bytes: an append to it would write into the next record", i, cap(recs[i]), len(recs[i]))
		}
	}
}
