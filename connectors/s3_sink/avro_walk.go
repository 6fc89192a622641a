package s3sink

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/parquet-go/parquet-go"
)

// The walk of an Avro record's binary: each leaf's value goes to its
// column with its repetition and definition levels (Dremel's), strings,
// bytes and decimals pointing into the payload.

// maxAvroValues bounds the values of one row: an array of nulls (or of
// empty records) takes no bytes per item, so its count alone could ask
// for any number of them.
const maxAvroValues = 1 << 20

var errAvroShort = errors.New("the Avro binary ends too early")

// avroWalk is the scratch space of one row's walk.
type avroWalk struct {
	payload []byte
	cols    [][]parquet.Value // per column, its values in order
	n       int               // values so far
}

// reset empties the walk's width columns for a walk of payload.
func (w *avroWalk) reset(width int, payload []byte) {
	if cap(w.cols) < width {
		w.cols = make([][]parquet.Value, width)
	}
	w.cols = w.cols[:width]
	for i := range w.cols {
		w.cols[i] = w.cols[i][:0]
	}
	w.payload, w.n = payload, 0
}

// walk walks the payload as the record root, to its last byte.
func (w *avroWalk) walk(root *avroNode) error {
	end, err := w.record(root, 0, 0, 0)
	if err == nil && end != len(w.payload) {
		err = fmt.Errorf("%d bytes follow the Avro record", len(w.payload)-end)
	}
	if err != nil {
		return fmt.Errorf("Avro payload: %w", err)
	}
	return nil
}

// record walks the fields of record n at b[i:].
func (w *avroWalk) record(n *avroNode, i, rep, def int) (int, error) {
	var err error
	for _, f := range n.fields {
		if i, err = w.value(f, i, rep, def); err != nil {
			return i, err
		}
	}
	return i, nil
}

// value walks the value of n at payload[i:], rep being the repetition
// level of its first value and def the definition level of its parent.
func (w *avroWalk) value(n *avroNode, i, rep, def int) (int, error) {
	b := w.payload
	if n.null >= 0 {
		branch, j, err := avroLong(b, i)
		if err != nil {
			return j, fmt.Errorf("field %s: %w", n.path, err)
		}
		i = j
		switch int(branch) {
		case n.null:
			return i, w.nulls(n, rep, def)
		case n.branch:
			def++
		default:
			return i, fmt.Errorf("field %s: union branch %d, the union has 2", n.path, branch)
		}
	}
	var v parquet.Value
	switch n.kind {
	case avNull:
		return i, w.nulls(n, rep, def)
	case avRecord:
		return w.record(n, i, rep, def)
	case avArray, avMap:
		return w.repeated(n, i, rep, def)
	case avBoolean:
		if i >= len(b) {
			return i, fmt.Errorf("field %s: %w", n.path, errAvroShort)
		}
		if b[i] > 1 {
			return i, fmt.Errorf("field %s: boolean byte %d is neither 0 nor 1", n.path, b[i])
		}
		v = parquet.BooleanValue(b[i] == 1)
		i++
	case avInt, avEnum:
		x, j, err := avroLong(b, i)
		if err != nil {
			return j, fmt.Errorf("field %s: %w", n.path, err)
		}
		if x < math.MinInt32 || x > math.MaxInt32 {
			return j, fmt.Errorf("field %s: %d is out of the range of an Avro int", n.path, x)
		}
		i = j
		v = parquet.Int32Value(int32(x))
		if n.kind == avEnum {
			if x < 0 || int(x) >= len(n.symbols) {
				return i, fmt.Errorf("field %s: enum index %d, the enum has %d symbols", n.path, x, len(n.symbols))
			}
			v = parquet.ByteArrayValue(n.symbols[x])
		}
	case avLong:
		x, j, err := avroLong(b, i)
		if err != nil {
			return j, fmt.Errorf("field %s: %w", n.path, err)
		}
		i = j
		v = parquet.Int64Value(x)
	case avFloat, avDouble, avFixed:
		if len(b)-i < n.size {
			return i, fmt.Errorf("field %s: %w", n.path, errAvroShort)
		}
		x := b[i : i+n.size : i+n.size]
		i += n.size
		switch n.kind {
		case avFloat:
			v = parquet.FloatValue(math.Float32frombits(binary.LittleEndian.Uint32(x)))
		case avDouble:
			v = parquet.DoubleValue(math.Float64frombits(binary.LittleEndian.Uint64(x)))
		default:
			v = parquet.FixedLenByteArrayValue(x)
		}
	case avBytes, avString:
		s, j, err := avroBytes(b, i)
		if err != nil {
			return j, fmt.Errorf("field %s: %w", n.path, err)
		}
		i = j
		v = parquet.ByteArrayValue(s)
	}
	if n.col < 0 {
		return i, nil // a field columns leave out
	}
	return i, w.put(n.col, v.Level(rep, def, n.col))
}

// repeated walks an array or a map: blocks of items, each block's count
// (negative: followed by its size in bytes), until a count of zero.
func (w *avroWalk) repeated(n *avroNode, i, rep, def int) (int, error) {
	b := w.payload
	items := 0
	for {
		count, j, err := avroLong(b, i)
		if err != nil {
			return j, fmt.Errorf("field %s: %w", n.path, err)
		}
		i = j
		if count == 0 {
			break
		}
		if count < 0 {
			if count == math.MinInt64 {
				return i, fmt.Errorf("field %s: block count out of range", n.path)
			}
			count = -count
			if _, i, err = avroLong(b, i); err != nil {
				return i, fmt.Errorf("field %s: %w", n.path, err)
			}
		}
		if count > maxAvroValues {
			return i, fmt.Errorf("field %s: a block of %d items, more than a row takes (%d values)", n.path, count, maxAvroValues)
		}
		for range count {
			r := n.rep
			if items == 0 {
				r = rep
			}
			items++
			if n.kind == avMap {
				k, j, err := avroBytes(b, i)
				if err != nil {
					return j, fmt.Errorf("field %s: key: %w", n.path, err)
				}
				i = j
				if c := n.key.col; c >= 0 {
					if err := w.put(c, parquet.ByteArrayValue(k).Level(r, def+1, c)); err != nil {
						return i, err
					}
				}
			}
			if i, err = w.value(n.elem, i, r, def+1); err != nil {
				return i, err
			}
		}
	}
	if items == 0 {
		// Present but empty: one value per leaf, at the level of the
		// array or map itself.
		return i, w.nulls(n, rep, def)
	}
	return i, nil
}

// nulls gives every leaf under n a null at rep and def.
func (w *avroWalk) nulls(n *avroNode, rep, def int) error {
	for c := n.first; c < n.end; c++ {
		if err := w.put(c, parquet.NullValue().Level(rep, def, c)); err != nil {
			return err
		}
	}
	return nil
}

// put adds v to column col.
func (w *avroWalk) put(col int, v parquet.Value) error {
	if w.n++; w.n > maxAvroValues {
		return fmt.Errorf("more than %d values in one record", maxAvroValues)
	}
	w.cols[col] = append(w.cols[col], v)
	return nil
}

// avroLong reads a zig-zag varint at b[i:].
func avroLong(b []byte, i int) (int64, int, error) {
	var u uint64
	for shift := uint(0); ; shift += 7 {
		if i >= len(b) {
			return 0, i, errAvroShort
		}
		c := b[i]
		i++
		if shift == 63 && c > 1 {
			return 0, i, errors.New("a varint longer than 64 bits")
		}
		u |= uint64(c&0x7f) << shift
		if c < 0x80 {
			break
		}
	}
	return int64(u>>1) ^ -int64(u&1), i, nil
}

// avroBytes reads a length and that many bytes at b[i:].
func avroBytes(b []byte, i int) ([]byte, int, error) {
	n, i, err := avroLong(b, i)
	if err != nil {
		return nil, i, err
	}
	if n < 0 || n > int64(len(b)-i) {
		if n < 0 {
			return nil, i, fmt.Errorf("negative length %d", n)
		}
		return nil, i, errAvroShort
	}
	return b[i : i+int(n) : i+int(n)], i + int(n), nil
}
