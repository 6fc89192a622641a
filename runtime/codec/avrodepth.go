package codec

import (
	"encoding/binary"
	"fmt"

	"github.com/hamba/avro/v2"
)

// MaxAvroDepth bounds how deeply the records, arrays and maps of an Avro
// binary payload may nest. Only a recursive schema lets a payload nest
// without bound; hamba/avro decodes recursively, and a payload nested
// millions of levels deep (one byte per level) would overflow the stack, a
// fatal error that no recover catches.
const MaxAvroDepth = 1000

// recursive reports whether schema s can contain itself, so that only the
// payload bounds the depth of a value.
func recursive(s avro.Schema) bool {
	return reaches(s, map[string]bool{})
}

// reaches reports whether s refers back to a named schema on the path from
// the root (open).
func reaches(s avro.Schema, open map[string]bool) bool {
	switch t := s.(type) {
	case *avro.RefSchema:
		return open[t.Schema().FullName()] || reaches(t.Schema(), open)
	case *avro.RecordSchema:
		name := t.FullName()
		if open[name] {
			return true
		}
		open[name] = true
		defer delete(open, name)
		for _, f := range t.Fields() {
			if reaches(f.Type(), open) {
				return true
			}
		}
	case *avro.ArraySchema:
		return reaches(t.Items(), open)
	case *avro.MapSchema:
		return reaches(t.Values(), open)
	case *avro.UnionSchema:
		for _, b := range t.Types() {
			if reaches(b, open) {
				return true
			}
		}
	}
	return false
}

// depthWalker reads an Avro binary payload under a schema only to measure
// how deeply it nests. Where the payload is malformed it stops and leaves
// the error to the decoder, which reads the same bytes the same way.
type depthWalker struct {
	b   []byte
	pos int
	bad bool // malformed: stop walking
}

// checkDepth returns an error when payload nests records, arrays or maps
// more than MaxAvroDepth levels deep under s.
func checkDepth(s avro.Schema, payload []byte) error {
	w := depthWalker{b: payload}
	if !w.walk(s, 0) {
		return fmt.Errorf("avro: the payload nests records, arrays or maps more than %d levels deep (at byte %d); the runtime decodes at most %d levels", MaxAvroDepth, w.pos, MaxAvroDepth)
	}
	return nil
}

// walk reads one value of schema s at nesting depth and reports false when
// the value nests deeper than MaxAvroDepth.
func (w *depthWalker) walk(s avro.Schema, depth int) bool {
	if w.bad {
		return true
	}
	switch t := s.(type) {
	case *avro.RefSchema:
		return w.walk(t.Schema(), depth)
	case *avro.RecordSchema:
		if depth++; depth > MaxAvroDepth {
			return false
		}
		for _, f := range t.Fields() {
			if !w.walk(f.Type(), depth) {
				return false
			}
		}
	case *avro.ArraySchema:
		return w.blocks(depth, func(depth int) bool { return w.walk(t.Items(), depth) })
	case *avro.MapSchema:
		return w.blocks(depth, func(depth int) bool {
			w.skip(w.long())
			return w.walk(t.Values(), depth)
		})
	case *avro.UnionSchema:
		i := w.long()
		if w.bad || i < 0 || i >= int64(len(t.Types())) {
			w.bad = true
			return true
		}
		return w.walk(t.Types()[i], depth)
	case *avro.FixedSchema:
		w.skip(int64(t.Size()))
	case *avro.EnumSchema:
		w.long()
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Boolean:
			w.skip(1)
		case avro.Int, avro.Long:
			w.long()
		case avro.Float:
			w.skip(4)
		case avro.Double:
			w.skip(8)
		case avro.String, avro.Bytes:
			w.skip(w.long())
		}
	}
	return true
}

// blocks reads the blocks of an array or a map, calling item for each
// item one level deeper.
func (w *depthWalker) blocks(depth int, item func(depth int) bool) bool {
	if depth++; depth > MaxAvroDepth {
		return false
	}
	for !w.bad {
		n := w.long()
		if n == 0 || w.bad {
			return true
		}
		if n < 0 {
			n = -n
			w.long() // the block's size in bytes
		}
		for ; n > 0 && !w.bad; n-- {
			start := w.pos
			if !item(depth) {
				return false
			}
			if w.pos == start {
				// Items of zero bytes (nulls, empty records) cannot nest
				// deeper than the first one did: skip the rest.
				break
			}
		}
	}
	return true
}

// long reads a zig-zag varint.
func (w *depthWalker) long() int64 {
	u, n := binary.Uvarint(w.b[w.pos:])
	if n <= 0 {
		w.bad = true
		return 0
	}
	w.pos += n
	return int64(u>>1) ^ -int64(u&1)
}

// skip skips n bytes.
func (w *depthWalker) skip(n int64) {
	if n < 0 || n > int64(len(w.b)-w.pos) {
		w.bad = true
		return
	}
	w.pos += int(n)
}
