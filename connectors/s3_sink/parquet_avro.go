package s3sink

import (
	"fmt"
	"strings"

	"github.com/parquet-go/parquet-go"

	"github.com/picomq/pico-connectors/sdk"
)

// Parquet from Avro topics: without columns, an Avro topic's Parquet
// schema is its Avro schema's (avroNode says how each type maps), and
// avroRow walks each record's Avro binary into its row (avro_walk). With
// columns, they pick and rename the record's top-level fields.

// row converts rec into r.row: an Avro topic's from its Avro binary
// (avroRow), any other's from its JSON payload (jsonRow). It returns the
// row's serialized size (an upper bound, rowBytes), or the reason the
// record does not fit the columns.
func (l *pqLayout) row(r *pqRow, rec *sdk.Record) (int, error) {
	if l.avro != nil {
		return l.avroRow(r, rec)
	}
	return l.jsonRow(r, rec)
}

// newAvroLayout builds the layout of an Avro schema: base's metadata
// columns, then the record's fields, or those columns picks.
func newAvroLayout(base *pqLayout, o *options, text string) (*pqLayout, error) {
	root, err := avroRecordNode(text, `output_format = "parquet"`)
	if err != nil {
		return nil, err
	}
	l := &pqLayout{codec: base.codec, avro: root}
	for _, c := range base.cols {
		if c.meta != metaNone {
			l.cols = append(l.cols, c)
		}
	}
	byName := map[string]int{}
	for i, f := range root.fields {
		byName[f.path] = i
	}
	names := make([]string, 0, len(root.fields))
	if len(o.Columns) == 0 {
		for i, f := range root.fields {
			root.keep = append(root.keep, i)
			names = append(names, f.path)
		}
	} else {
		for i, c := range o.Columns {
			path := c.Path
			if path == "" {
				path = c.Name
			}
			fi, ok := byName[path]
			if !ok {
				if strings.Contains(path, ".") {
					return nil, fmt.Errorf("columns[%d].path '%s': for an Avro topic a column names a top-level field of the record, not a nested one", i, path)
				}
				return nil, fmt.Errorf("columns[%d].path '%s' is not a field of the Avro record (its fields: %s)", i, path, strings.Join(fieldNames(root), ", "))
			}
			for j, k := range root.keep {
				if k == fi {
					return nil, fmt.Errorf("columns[%d].path '%s' is the field of columns[%d] too; an Avro field goes to one column", i, path, j)
				}
			}
			root.keep = append(root.keep, fi)
			names = append(names, c.Name)
		}
	}
	// The kept fields' leaves take the columns after the metadata ones, in
	// the file's order; the others keep -1 (their values are skipped).
	col := len(l.cols)
	for _, f := range root.fields {
		unnumber(f)
	}
	for _, fi := range root.keep {
		col = number(root.fields[fi], col)
	}
	l.width = col
	fields := make([]parquet.Field, 0, len(l.cols)+len(root.keep))
	seen := map[string]bool{}
	for i := range l.cols {
		fields = append(fields, l.cols[i].field())
		seen[l.cols[i].name] = true
	}
	for j, fi := range root.keep {
		if seen[names[j]] {
			return nil, fmt.Errorf("the field or column %s is also a metadata column (include_metadata or include_headers); rename it with a column", names[j])
		}
		seen[names[j]] = true
		fields = append(fields, &pqField{Node: root.fields[fi].pq, name: names[j]})
	}
	l.schema = recordSchema(fields)
	return l, nil
}

// avroRow converts rec's Avro binary payload into r.row.
func (l *pqLayout) avroRow(r *pqRow, rec *sdk.Record) (int, error) {
	if rec.Schema != sdk.SchemaAvro {
		return 0, fmt.Errorf("the payload is not Avro (the runtime handed it over as %s): parquet columns of an Avro topic are read from its Avro binary", rec.Schema)
	}
	w := &r.avro
	w.reset(l.width, rec.Payload)
	// The metadata columns' bytes first, in r.buf, which then no longer
	// moves: the payload's values point into the payload.
	r.buf = r.buf[:0]
	var ints [8]int64
	var starts [8]int
	for i := range l.cols {
		ints[i], starts[i] = r.appendMeta(l.cols[i].meta, rec)
	}
	for i := range l.cols {
		c := &l.cols[i]
		var v parquet.Value
		switch {
		case starts[i] >= 0:
			end := len(r.buf)
			for j := i + 1; j < len(l.cols); j++ {
				if starts[j] >= 0 {
					end = starts[j]
					break
				}
			}
			v = parquet.ByteArrayValue(r.buf[starts[i]:end:end])
		case c.meta == metaKey || c.meta == metaHeaders:
			w.cols[i] = append(w.cols[i], parquet.NullValue().Level(0, 0, i))
			continue
		case c.meta == metaPartition:
			v = parquet.Int32Value(int32(ints[i]))
		default:
			v = parquet.Int64Value(ints[i])
		}
		def := 0
		if c.optional {
			def = 1
		}
		w.cols[i] = append(w.cols[i], v.Level(0, def, i))
	}
	if err := w.walk(l.avro); err != nil {
		return 0, err
	}
	r.row = r.row[:0]
	for _, vs := range w.cols {
		r.row = append(r.row, vs...)
	}
	r.size = rowBytes(r.row)
	return r.size, nil
}
