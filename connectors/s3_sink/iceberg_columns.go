package s3sink

import (
	"fmt"
	"reflect"

	"github.com/parquet-go/parquet-go"
	pqformat "github.com/parquet-go/parquet-go/format"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
)

// The table's columns: those of the sink's Parquet files, in the sink's
// own type names (icetable.Column).

// tableColumns is the table's schema: the parquet columns of the files,
// metadata columns first. With Avro topics the columns are their files',
// read off the Parquet schema each Avro schema gives; one table holds every
// topic, so those must agree.
func (s *Sink) tableColumns() ([]icetable.Column, error) {
	if s.avro == nil {
		return iceColumns(s.pq.cols), nil
	}
	var cols []icetable.Column
	from := ""
	for i := range s.avro.blocks {
		b := &s.avro.blocks[i]
		if b.layout == nil {
			continue
		}
		c, err := schemaColumns(b.layout.schema)
		if err != nil {
			return nil, fmt.Errorf("table_format = \"iceberg\": [[topics]] block %q: %w", b.topic, err)
		}
		if cols != nil && !reflect.DeepEqual(c, cols) {
			return nil, fmt.Errorf("table_format = \"iceberg\": the Avro schemas of [[topics]] blocks %q and %q give different columns, and one table holds both; give them one schema, or write them with two sinks", from, b.topic)
		}
		cols, from = c, b.topic
	}
	if cols == nil {
		return iceColumns(s.pq.cols), nil
	}
	return cols, nil
}

// iceColumns converts parquet columns into the table's.
func iceColumns(cols []pqColumn) []icetable.Column {
	out := make([]icetable.Column, len(cols))
	for i, c := range cols {
		out[i] = icetable.Column{Name: c.name, Type: colTypeName(c.typ), Optional: c.optional, Precision: c.precision, Scale: c.scale}
	}
	return out
}

// colTypeName is the name of a column type, as columns[].type writes it
// (int32 for the metadata column partition).
func colTypeName(t colType) string {
	for name, ct := range colTypeNames {
		if ct == t {
			return name
		}
	}
	return "int32"
}

// schemaColumns reads the table's columns off a file's Parquet schema:
// every field must be a leaf (an Avro record, array or map is refused).
func schemaColumns(schema *parquet.Schema) ([]icetable.Column, error) {
	var out []icetable.Column
	for _, f := range schema.Fields() {
		if !f.Leaf() {
			return nil, fmt.Errorf("field %s is a record, an array or a map: an Iceberg table from Avro takes fields of simple types only", f.Name())
		}
		c := icetable.Column{Name: f.Name(), Optional: f.Optional()}
		typ := f.Type()
		var lt pqformat.LogicalTypeValue
		if l := typ.LogicalType(); l != nil {
			lt = l.Value
		}
		switch v := lt.(type) {
		case *pqformat.StringType, *pqformat.EnumType, *pqformat.UUIDType:
			c.Type = "string"
		case *pqformat.JsonType:
			c.Type = "json"
		case *pqformat.DateType:
			c.Type = "date"
		case *pqformat.TimestampType:
			c.Type = "timestamp_ms"
			if _, us := v.Unit.Value.(*pqformat.MicroSeconds); us {
				c.Type = "timestamp_us"
			}
		case *pqformat.DecimalType:
			c.Type, c.Precision, c.Scale = "decimal", int(v.Precision), int(v.Scale)
		case nil, *pqformat.IntType:
			c.Type = kindColumnType[typ.Kind()]
		}
		if c.Type == "" {
			return nil, fmt.Errorf("field %s is of Parquet type %s, which the Iceberg table cannot take", f.Name(), typ)
		}
		out = append(out, c)
	}
	return out, nil
}

// kindColumnType is the sink column type of a Parquet physical type
// without a logical type (or an integer one).
var kindColumnType = map[parquet.Kind]string{
	parquet.Boolean:   "boolean",
	parquet.Int32:     "int32",
	parquet.Int64:     "int64",
	parquet.Float:     "float",
	parquet.Double:    "double",
	parquet.ByteArray: "bytes",
}
