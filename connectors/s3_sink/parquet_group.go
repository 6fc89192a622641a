package s3sink

import (
	"reflect"

	"github.com/parquet-go/parquet-go"
)

// A Parquet group whose fields keep their order, and the record schema
// built of one: the files' schemas, from columns or from an Avro record.

// recordSchema is the schema of a file whose record has fields, in order.
func recordSchema(fields []parquet.Field) *parquet.Schema {
	group := parquet.Group{}
	for _, f := range fields {
		group[f.Name()] = f
	}
	return parquet.NewSchema("record", &orderedGroup{Group: group, fields: fields})
}

// orderedGroup is a parquet group whose columns keep the configured order
// (parquet.Group sorts them by name).
type orderedGroup struct {
	parquet.Group
	fields []parquet.Field
}

func (g *orderedGroup) Fields() []parquet.Field { return g.fields }

func (g *orderedGroup) String() string { return "record" }

type pqField struct {
	parquet.Node
	name string
}

func (f *pqField) Name() string { return f.name }

func (f *pqField) Value(reflect.Value) reflect.Value { return reflect.Value{} }
