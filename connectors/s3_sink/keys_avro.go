package s3sink

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/picomq/pico-connectors/sdk"
)

// path_template's {field:PATH} on an Avro topic: the value at PATH is read
// from the record's Avro binary with the topic's schema, by the walker of
// parquet_avro_row (every leaf numbered as for a Parquet row); each
// {field:...} part then reads its leaf's column.

// avroKey is how the {field:...} parts of path_template are read from one
// Avro schema's records.
type avroKey struct {
	// root is the record cut after the last top-level field a path reads:
	// the walk stops there.
	root  *avroNode
	width int // the leaves of root
	// cols holds, by template part, the column of its path's leaf; -1 for
	// a path to a record, an array or a map, which renders as
	// default_partition_value.
	cols []int
}

// newAvroKey builds the reader of l's {field:...} parts from an Avro
// schema's text. A path the schema does not have, or one through an
// array or a map, is refused, naming the path and the fields there are.
func newAvroKey(l *keyLayout, text string) (*avroKey, error) {
	root, err := avroRecordNode(text, "path_template's {field:...}")
	if err != nil {
		return nil, err
	}
	k := &avroKey{root: root, width: number(root, 0), cols: make([]int, len(l.paths))}
	for i, path := range l.paths {
		k.cols[i] = -1
		if path == nil {
			continue
		}
		n := root
		for _, name := range path {
			var next *avroNode
			if n.kind == avRecord {
				for _, f := range n.fields {
					if f.path == join(n.path, name) {
						next = f
						break
					}
				}
			}
			if next != nil {
				n = next
				continue
			}
			param := l.tmpl.Parts[i].Param
			if n.kind != avRecord {
				return nil, fmt.Errorf("path_template's {field:%s}: the Avro field %s is a%s, and a path goes through records' fields only", param, n.path, avroKindName(n.kind))
			}
			return nil, fmt.Errorf("path_template's {field:%s}: the Avro record has no field %s (%s has: %s)", param, join(n.path, name), inRecord(n.path), strings.Join(fieldNames(n), ", "))
		}
		if lt := n.pq.Type().LogicalType(); lt != nil && isDecimal(lt.Value) {
			return nil, fmt.Errorf("path_template's {field:%s}: the Avro field %s is a decimal, whose bytes are no text; use a string, number, boolean or enum field", l.tmpl.Parts[i].Param, n.path)
		}
		switch n.kind {
		case avRecord, avArray, avMap:
			// default_partition_value, as a JSON object or array gives
		default:
			k.cols[i] = n.col
		}
	}
	// Walk no further than the last top-level field a path reads.
	last := -1
	for _, path := range l.paths {
		if path == nil {
			continue
		}
		for j, f := range root.fields {
			if f.path == path[0] {
				last = max(last, j)
			}
		}
	}
	cut := *root
	cut.fields = root.fields[:last+1]
	k.root = &cut
	return k, nil
}

func isDecimal(v pqformat.LogicalTypeValue) bool {
	_, ok := v.(*pqformat.DecimalType)
	return ok
}

// inRecord names the record whose fields a message lists.
func inRecord(path string) string {
	if path == "" {
		return "the record"
	}
	return path
}

// avroKindName names a kind that has no fields, with its article's tail.
func avroKindName(k avroKind) string {
	switch k {
	case avArray:
		return "n array"
	case avMap:
		return " map"
	}
	return " value with no fields"
}

// avroFields reads the {field:...} parts of Avro records (payloadFields),
// each with its topic's avroKey; key is the last record's, ok whether it
// decoded.
type avroFields struct {
	topics *avroTopics
	walk   avroWalk
	key    *avroKey
	ok     bool
}

// read walks rec's Avro binary with its topic's schema, when rec is Avro
// and SetTopics gave one, up to the last field a path reads (what follows
// is not checked).
func (f *avroFields) read(rec *sdk.Record) bool {
	f.key = f.topics.key(rec)
	if f.key == nil {
		return false
	}
	f.walk.reset(f.key.width, rec.Payload)
	_, err := f.walk.record(f.key.root, 0, 0, 0)
	f.ok = err == nil
	return true
}

// appendField appends the text of part i's value: a string's or bytes'
// value, an enum's symbol, a number's or a boolean's text; nothing when
// it is null, a record, array or map, or the payload did not decode.
func (f *avroFields) appendField(dst []byte, i int) []byte {
	c := f.key.cols[i]
	if !f.ok || c < 0 || len(f.walk.cols[c]) == 0 {
		return dst
	}
	v := f.walk.cols[c][0]
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return append(dst, v.ByteArray()...)
	case parquet.Boolean:
		return strconv.AppendBool(dst, v.Boolean())
	case parquet.Int32:
		return strconv.AppendInt(dst, int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case parquet.Float:
		return strconv.AppendFloat(dst, float64(v.Float()), 'g', -1, 32)
	case parquet.Double:
		return strconv.AppendFloat(dst, v.Double(), 'g', -1, 64)
	}
	return dst // a null
}

// key returns the reader of rec's fields when rec is Avro and its topic's
// block is Avro; nil otherwise.
func (at *avroTopics) key(rec *sdk.Record) *avroKey {
	if rec.Schema != sdk.SchemaAvro {
		return nil
	}
	if b := at.block(rec.Topic); b != nil {
		return b.key
	}
	return nil
}

// firstField returns path_template's first {field:...} placeholder.
func (l *keyLayout) firstField() string {
	for _, p := range l.tmpl.Parts {
		if p.Name == "field" {
			return "{field:" + p.Param + "}"
		}
	}
	return ""
}
