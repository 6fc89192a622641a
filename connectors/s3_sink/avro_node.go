package s3sink

import (
	"fmt"
	"strings"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
)

// An Avro schema as a tree of Parquet nodes: each Avro type's node, with
// the levels its values take and the columns of its leaves. Parquet
// layouts (parquet_avro), path_template's {field:...} readers (keys_avro)
// and the walker of a record's Avro binary (avro_walk) read it.

// avroKind is the Avro type of a node, its union with null aside.
type avroKind int

const (
	avNull avroKind = iota
	avBoolean
	avInt
	avLong
	avFloat
	avDouble
	avBytes
	avString
	avFixed
	avEnum
	avRecord
	avArray
	avMap
)

// avroNode is one Avro type of a topic's schema as a Parquet node, with
// the levels its values take.
type avroNode struct {
	kind avroKind
	path string // the field's dotted path, for messages
	// null is the union branch of null when the type is a union of null
	// and one other type (branch), -1 when it is no union.
	null, branch int
	// def is the definition level of a value present here: its optional
	// and repeated ancestors, and itself.
	def int
	// rep is the repetition level of the elements of an array or map.
	rep int
	// col is a leaf's column; first and end are the leaf columns under
	// the node (for a null, which sets every one of them).
	col, first, end int
	size            int      // float, double, fixed: the bytes of a value
	symbols         [][]byte // enum
	fields          []*avroNode
	// keep (a record's fields): the index of each field in fields, in the
	// file's column order, -1 for a field columns leaves out (root only).
	keep []int
	elem *avroNode // array items, map values
	key  *avroNode // map keys
	pq   parquet.Node
}

// avroRecordNode parses an Avro schema's text into its node tree; the
// schema must be a record, which what (the key that reads it) needs.
func avroRecordNode(text, what string) (*avroNode, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("not a valid Avro schema: %v", err)
	}
	if _, ok := s.(*avro.RecordSchema); !ok {
		return nil, fmt.Errorf("the Avro schema is a %s, not a record: %s needs a record", s.Type(), what)
	}
	b := &avroBuilder{seen: map[string]bool{}}
	return b.node(s, "", 0, 0)
}

func fieldNames(r *avroNode) []string {
	out := make([]string, len(r.fields))
	for i, f := range r.fields {
		out[i] = f.path
	}
	return out
}

// unnumber marks n's leaves as left out.
func unnumber(n *avroNode) {
	n.col, n.first, n.end = -1, 0, 0
	for _, f := range n.fields {
		unnumber(f)
	}
	if n.key != nil {
		unnumber(n.key)
	}
	if n.elem != nil {
		unnumber(n.elem)
	}
}

// number gives n's leaves the columns from col on, in Parquet's order
// (a map's key before its value), and returns the next column.
func number(n *avroNode, col int) int {
	n.first = col
	switch n.kind {
	case avRecord:
		for _, f := range n.fields {
			col = number(f, col)
		}
	case avArray:
		col = number(n.elem, col)
	case avMap:
		col = number(n.key, col)
		col = number(n.elem, col)
	default:
		n.col = col
		col++
	}
	n.end = col
	return col
}

// avroBuilder turns an Avro schema into avroNodes; seen holds the records
// being built, to refuse a recursive one.
type avroBuilder struct {
	seen map[string]bool
}

// node builds the node of s at path, under def optional or repeated
// ancestors and rep repeated ones.
func (b *avroBuilder) node(s avro.Schema, path string, def, rep int) (*avroNode, error) {
	n := &avroNode{path: path, null: -1}
	if u, ok := s.(*avro.UnionSchema); ok {
		types := u.Types()
		if !u.Nullable() || len(types) != 2 {
			return nil, fmt.Errorf("field %s is a union of %s: only a union of null and one other type maps to a Parquet column (an optional one)", orRoot(path), unionNames(types))
		}
		n.null, n.branch = u.Indices()
		s = types[n.branch]
		def++
	}
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	n.def = def
	var pq parquet.Node
	logical := ""
	var dec *avro.DecimalLogicalSchema
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		logical = string(ls.Logical().Type())
		dec, _ = ls.Logical().(*avro.DecimalLogicalSchema)
	}
	switch t := s.(type) {
	case *avro.RecordSchema:
		name := t.FullName()
		if b.seen[name] {
			return nil, fmt.Errorf("field %s: the record %s contains itself, which a Parquet schema cannot", orRoot(path), name)
		}
		b.seen[name] = true
		defer delete(b.seen, name)
		n.kind = avRecord
		fields := make([]parquet.Field, 0, len(t.Fields()))
		group := parquet.Group{}
		for _, f := range t.Fields() {
			c, err := b.node(f.Type(), join(path, f.Name()), def, rep)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, c)
			fields = append(fields, &pqField{Node: c.pq, name: f.Name()})
			group[f.Name()] = c.pq
		}
		if len(n.fields) == 0 {
			return nil, fmt.Errorf("field %s: the record %s has no fields, which a Parquet group cannot", orRoot(path), name)
		}
		pq = &orderedGroup{Group: group, fields: fields}
	case *avro.ArraySchema:
		n.kind, n.rep = avArray, rep+1
		e, err := b.node(t.Items(), path+"[]", def+1, rep+1)
		if err != nil {
			return nil, err
		}
		n.elem = e
		pq = parquet.List(e.pq)
	case *avro.MapSchema:
		n.kind, n.rep = avMap, rep+1
		n.key = &avroNode{kind: avString, path: path + ".key", null: -1, def: def + 1, pq: parquet.String()}
		v, err := b.node(t.Values(), path+"{}", def+1, rep+1)
		if err != nil {
			return nil, err
		}
		n.elem = v
		pq = parquet.Map(parquet.String(), v.pq)
	case *avro.EnumSchema:
		n.kind = avEnum
		for _, sym := range t.Symbols() {
			n.symbols = append(n.symbols, []byte(sym))
		}
		pq = parquet.String()
	case *avro.FixedSchema:
		n.kind, n.size = avFixed, t.Size()
		pq = parquet.Leaf(parquet.FixedLenByteArrayType(t.Size()))
		if dec != nil {
			pq = parquet.Decimal(dec.Scale(), dec.Precision(), parquet.FixedLenByteArrayType(t.Size()))
		}
	case *avro.NullSchema:
		n.kind, pq = avNull, parquet.Leaf(parquet.NullType)
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Boolean:
			n.kind, pq = avBoolean, parquet.Leaf(parquet.BooleanType)
		case avro.Int:
			n.kind, pq = avInt, parquet.Leaf(parquet.Int32Type)
			switch avro.LogicalType(logical) {
			case avro.Date:
				pq = parquet.Date()
			case avro.TimeMillis:
				pq = parquet.Time(parquet.Millisecond)
			}
		case avro.Long:
			n.kind, pq = avLong, parquet.Leaf(parquet.Int64Type)
			switch avro.LogicalType(logical) {
			case avro.TimeMicros:
				pq = parquet.Time(parquet.Microsecond)
			case avro.TimestampMillis:
				pq = parquet.Timestamp(parquet.Millisecond)
			case avro.TimestampMicros:
				pq = parquet.Timestamp(parquet.Microsecond)
			case avro.LocalTimestampMillis:
				pq = parquet.TimestampAdjusted(parquet.Millisecond, false)
			case avro.LocalTimestampMicros:
				pq = parquet.TimestampAdjusted(parquet.Microsecond, false)
			}
		case avro.Float:
			n.kind, n.size, pq = avFloat, 4, parquet.Leaf(parquet.FloatType)
		case avro.Double:
			n.kind, n.size, pq = avDouble, 8, parquet.Leaf(parquet.DoubleType)
		case avro.Bytes:
			n.kind, pq = avBytes, parquet.Leaf(parquet.ByteArrayType)
			if dec != nil {
				pq = parquet.Decimal(dec.Scale(), dec.Precision(), parquet.ByteArrayType)
			}
		case avro.String:
			n.kind, pq = avString, parquet.String()
		}
	}
	if pq == nil {
		return nil, fmt.Errorf("field %s: the Avro type %s has no Parquet mapping", orRoot(path), s.Type())
	}
	if n.kind == avNull {
		// A null is always null: an optional column of Parquet's null type.
		n.def = def
		n.pq = parquet.Optional(pq)
		return n, nil
	}
	if n.null >= 0 {
		n.pq = parquet.Optional(pq)
	} else {
		n.pq = parquet.Required(pq)
	}
	return n, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orRoot(path string) string {
	if path == "" {
		return "(the record)"
	}
	return path
}

func unionNames(types avro.Schemas) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t.Type())
	}
	return strings.Join(names, ", ")
}
