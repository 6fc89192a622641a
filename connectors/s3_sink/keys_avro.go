package s3sink

import (
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"
)

// path_template's {field:PATH} on an Avro topic: the value at PATH is read
// from the record's Avro binary with the topic's schema, by avroWalk
// (every leaf numbered as for a Parquet row); each {field:...} part then
// reads its leaf's column.

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
	// units holds, by template part, how a {field:PATH:day|hour} part's
	// value counts time (avroTimeUnit).
	units []timeUnit
}

// newAvroKey builds the reader of l's {field:...} parts from an Avro
// schema's text. A path the schema does not have, or one through an
// array or a map, is refused, naming the path and the fields there are.
func newAvroKey(l *keyLayout, text string) (*avroKey, error) {
	root, err := avroRecordNode(text, "path_template's {field:...}")
	if err != nil {
		return nil, err
	}
	k := &avroKey{root: root, width: number(root, 0), cols: make([]int, len(l.paths)), units: make([]timeUnit, len(l.paths))}
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
		if l.cuts[i].by != cutNone {
			u, ok := avroTimeUnit(n)
			if !ok {
				return nil, fmt.Errorf("path_template's {field:%s}: the Avro field %s is no time; a day or hour cut takes a timestamp-millis or timestamp-micros long, a date int, a long of epoch milliseconds or an RFC 3339 string", l.tmpl.Parts[i].Param, n.path)
			}
			k.units[i] = u
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

// avroTimeUnit is how the Avro field n counts time, as its Parquet column
// does: the unit of a timestamp, days of a date, milliseconds of a plain
// long; a string is RFC 3339 (the unit unused). False for anything else.
func avroTimeUnit(n *avroNode) (timeUnit, bool) {
	if n.kind == avRecord || n.kind == avArray || n.kind == avMap {
		return 0, false
	}
	typ := n.pq.Type()
	var lt pqformat.LogicalTypeValue
	if l := typ.LogicalType(); l != nil {
		lt = l.Value
	}
	switch v := lt.(type) {
	case *pqformat.TimestampType:
		switch v.Unit.Value.(type) {
		case *pqformat.MilliSeconds:
			return unitMillis, true
		case *pqformat.MicroSeconds:
			return unitMicros, true
		}
		return 0, false
	case *pqformat.DateType:
		return unitDays, true
	case *pqformat.StringType:
		return unitMillis, true
	}
	return unitMillis, typ.Kind() == parquet.Int64
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

// firstField returns path_template's first {field:...} placeholder.
func (l *keyLayout) firstField() string {
	for _, p := range l.tmpl.Parts {
		if p.Name == "field" {
			return "{field:" + p.Param + "}"
		}
	}
	return ""
}
