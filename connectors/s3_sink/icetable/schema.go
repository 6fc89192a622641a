package icetable

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/table"
)

// tableProps are the properties a new table is created with: format
// version 2 (version 3 wants a first row id from every added file);
// manifests merged on append, so that a commit every minute does not grow
// the manifest list by one manifest each time; snapshots kept for 6 hours
// (every snapshot's summary holds every partition's offset, about 45 bytes
// each, and the metadata file, rewritten at every commit, holds every
// snapshot: with 100 partitions and a commit a minute that is 1.6 MB),
// and the 100 previous metadata files only. Any engine can change them
// (ALTER TABLE ... SET TBLPROPERTIES).
var tableProps = iceberg.Properties{
	table.PropertyFormatVersion:               "2",
	table.ManifestMergeEnabledKey:             "true",
	table.MaxSnapshotAgeMsKey:                 "21600000",
	table.MetadataDeleteAfterCommitEnabledKey: "true",
}

// primitiveTypes is the Iceberg type of each sink column type but decimal.
// Iceberg timestamps are microseconds; a Parquet TIMESTAMP(MILLIS, UTC)
// column is read as one (the value scaled).
var primitiveTypes = map[string]iceberg.Type{
	"string":       iceberg.PrimitiveTypes.String,
	"json":         iceberg.PrimitiveTypes.String,
	"int32":        iceberg.PrimitiveTypes.Int32,
	"int64":        iceberg.PrimitiveTypes.Int64,
	"float":        iceberg.PrimitiveTypes.Float32,
	"double":       iceberg.PrimitiveTypes.Float64,
	"boolean":      iceberg.PrimitiveTypes.Bool,
	"timestamp_ms": iceberg.PrimitiveTypes.TimestampTz,
	"timestamp_us": iceberg.PrimitiveTypes.TimestampTz,
	"date":         iceberg.PrimitiveTypes.Date,
	"bytes":        iceberg.PrimitiveTypes.Binary,
}

// icebergType is the Iceberg type of a sink column type.
func icebergType(c Column) (iceberg.Type, error) {
	if t, ok := primitiveTypes[c.Type]; ok {
		return t, nil
	}
	if c.Type == "decimal" {
		if c.Precision < 1 || c.Precision > 38 || c.Scale < 0 || c.Scale > c.Precision {
			return nil, fmt.Errorf("iceberg column %s: decimal(%d,%d) is not a decimal Iceberg has: precision 1 to 38, scale 0 to precision", c.Name, c.Precision, c.Scale)
		}
		return iceberg.DecimalTypeOf(c.Precision, c.Scale), nil
	}
	return nil, fmt.Errorf("iceberg column %s: type '%s' has no Iceberg type; use string, int32, int64, float, double, boolean, timestamp_ms, timestamp_us, date, decimal, bytes or json", c.Name, c.Type)
}

// newSchema is the schema of cols, with field ids 1, 2, ... in order.
func newSchema(cols []Column) (*iceberg.Schema, error) {
	fields := make([]iceberg.NestedField, len(cols))
	seen := map[string]bool{}
	for i, c := range cols {
		if c.Name == "" {
			return nil, fmt.Errorf("iceberg column %d has no name", i)
		}
		if seen[c.Name] {
			return nil, fmt.Errorf("iceberg column %s is defined twice", c.Name)
		}
		seen[c.Name] = true
		typ, err := icebergType(c)
		if err != nil {
			return nil, err
		}
		fields[i] = iceberg.NestedField{ID: i + 1, Name: c.Name, Type: typ, Required: !c.Optional}
	}
	return iceberg.NewSchema(0, fields...), nil
}

// transformOf parses a partition transform.
func transformOf(f PartitionField) (iceberg.Transform, string, error) {
	switch f.Transform {
	case "identity":
		return iceberg.IdentityTransform{}, f.Source, nil
	case "day":
		return iceberg.DayTransform{}, f.Source + "_day", nil
	case "hour":
		return iceberg.HourTransform{}, f.Source + "_hour", nil
	}
	return nil, "", fmt.Errorf("iceberg partition field %s: transform '%s' is not supported; use identity, day or hour", f.Source, f.Transform)
}

// newSpec is the partition spec of fields over sc, with field ids from 1000.
func newSpec(sc *iceberg.Schema, fields []PartitionField) (iceberg.PartitionSpec, error) {
	out := make([]iceberg.PartitionField, 0, len(fields))
	for i, f := range fields {
		tr, name, err := transformOf(f)
		if err != nil {
			return iceberg.PartitionSpec{}, err
		}
		src, ok := sc.FindFieldByName(f.Source)
		if !ok {
			return iceberg.PartitionSpec{}, fmt.Errorf("iceberg partition field %s: no such column", f.Source)
		}
		if !tr.CanTransform(src.Type) {
			return iceberg.PartitionSpec{}, fmt.Errorf("iceberg partition field %s: %s cannot be applied to a %s column; day and hour take a timestamp (day also a date)", f.Source, f.Transform, src.Type)
		}
		out = append(out, iceberg.PartitionField{SourceIDs: []int{src.ID}, FieldID: 1000 + i, Name: name, Transform: tr})
	}
	return iceberg.NewPartitionSpec(out...), nil
}

// prepare creates the namespace and the table, or evolves the table.
func (t *Table) prepare(ctx context.Context, cols []Column, fields []PartitionField) error {
	if len(cols) == 0 {
		tbl, err := t.cat.LoadTable(ctx, t.ident)
		if err != nil {
			return fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err)
		}
		t.tbl = tbl
		return nil
	}
	sc, err := newSchema(cols)
	if err != nil {
		return err
	}
	spec, err := newSpec(sc, fields)
	if err != nil {
		return err
	}
	ns := catalog.NamespaceFromIdent(t.ident)
	ok, err := t.cat.CheckNamespaceExists(ctx, ns)
	if err != nil {
		return fmt.Errorf("iceberg namespace %s: %w", strings.Join(ns, "."), err)
	}
	if !ok {
		if err := t.cat.CreateNamespace(ctx, ns, nil); err != nil && !errors.Is(err, catalog.ErrNamespaceAlreadyExists) {
			// Another writer may have created it at the same time.
			if ok, _ := t.cat.CheckNamespaceExists(ctx, ns); !ok {
				return fmt.Errorf("iceberg: creating namespace %s: %w", strings.Join(ns, "."), err)
			}
		}
	}
	tbl, err := t.cat.LoadTable(ctx, t.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) && t.cfg.Warehouse == "" && t.cfg.Catalog != "rest" {
		return fmt.Errorf("iceberg table %s does not exist and no warehouse is set to create it in: set the warehouse to s3://bucket/prefix", t.cfg.Table)
	}
	if errors.Is(err, catalog.ErrNoSuchTable) {
		props := iceberg.Properties{table.DefaultNameMappingKey: nameMapping(sc)}
		for k, v := range tableProps {
			props[k] = v
		}
		tbl, err = t.cat.CreateTable(ctx, t.ident, sc, catalog.WithPartitionSpec(&spec), catalog.WithProperties(props))
		if err != nil { // another writer may have created it at the same time
			if again, lerr := t.cat.LoadTable(ctx, t.ident); lerr == nil {
				tbl, err = again, nil
			}
		}
	}
	if err != nil {
		return fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err)
	}
	t.tbl = tbl
	return t.evolve(ctx, cols, fields)
}

// nameMapping is the name mapping JSON of sc.
func nameMapping(sc *iceberg.Schema) string {
	return mappingJSON(sc.NameMapping())
}

func mappingJSON(nm iceberg.NameMapping) string {
	b, err := json.Marshal(nm)
	if err != nil { // a name mapping is names and ints
		return "[]"
	}
	return string(b)
}

// extendMapping is the table's name mapping cur (nil: none) with an entry
// for every top-level column of sc that it does not map by its name to
// its id, and whether it changed. A name cur maps to another id is taken
// off that entry (names are unique); entries another tool wrote (aliases,
// nested fields) stay as they are otherwise.
func extendMapping(cur iceberg.NameMapping, sc *iceberg.Schema) (iceberg.NameMapping, bool) {
	if cur == nil {
		return sc.NameMapping(), true
	}
	out := append(iceberg.NameMapping{}, cur...)
	changed := false
	for _, want := range sc.NameMapping() {
		name, found := want.Names[0], false
		for i, f := range out {
			if !slices.Contains(f.Names, name) {
				continue
			}
			if f.FieldID != nil && want.FieldID != nil && *f.FieldID == *want.FieldID {
				found = true
				break
			}
			f.Names = slices.DeleteFunc(slices.Clone(f.Names), func(n string) bool { return n == name })
			out[i] = f
		}
		if !found {
			out = append(out, want)
			changed = true
		}
	}
	return slices.DeleteFunc(out, func(f iceberg.MappedField) bool { return len(f.Names) == 0 }), changed
}

// evolve brings the loaded table's schema to cols (see Open), checks its
// partition spec against fields, and keeps its name mapping up to date. A
// conflict with another writer's change is retried on the new state.
func (t *Table) evolve(ctx context.Context, cols []Column, fields []PartitionField) error {
	for attempt := 0; ; attempt++ {
		tbl := t.tbl
		if err := checkSpec(tbl, fields); err != nil {
			return err
		}
		txn := tbl.NewTransaction()
		changed, err := updateSchema(txn, tbl.Schema(), cols)
		if err != nil {
			return err
		}
		staged, err := txn.StagedTable()
		if err != nil {
			return fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err)
		}
		if nm, ok := extendMapping(tbl.NameMapping(), staged.Schema()); ok {
			if err := txn.SetProperties(iceberg.Properties{table.DefaultNameMappingKey: mappingJSON(nm)}); err != nil {
				return fmt.Errorf("iceberg table %s: %w", t.cfg.Table, err)
			}
			changed = true
		}
		if !changed {
			return nil
		}
		next, err := txn.Commit(ctx)
		if err == nil {
			t.tbl = next
			return nil
		}
		if !isConflict(err) || attempt >= maxAttempts {
			return fmt.Errorf("iceberg table %s: evolving the schema: %w", t.cfg.Table, err)
		}
		if err := t.reload(ctx, attempt); err != nil {
			return err
		}
	}
}

// updateSchema stages on txn the changes that bring cur to cols, and says
// whether there are any.
func updateSchema(txn *table.Transaction, cur *iceberg.Schema, cols []Column) (bool, error) {
	upd := txn.UpdateSchema(true, false)
	changed := false
	want := map[string]bool{}
	for _, c := range cols {
		want[c.Name] = true
		typ, err := icebergType(c)
		if err != nil {
			return false, err
		}
		f, ok := cur.FindFieldByName(c.Name)
		if !ok {
			upd.AddColumn([]string{c.Name}, typ, "", false, nil)
			changed = true
			continue
		}
		var cu table.ColumnUpdate
		if !f.Type.Equals(typ) {
			if !canWiden(f.Type, typ) {
				return false, fmt.Errorf("iceberg column %s: it is %s in the table and %s in the definition (%s); Iceberg widens only int to long, float to double and a decimal's precision: add a column with another name instead", c.Name, f.Type, typ, c.Type)
			}
			cu.FieldType = iceberg.Optional[iceberg.Type]{Valid: true, Val: typ}
		}
		if f.Required && c.Optional {
			cu.Required = iceberg.Optional[bool]{Valid: true, Val: false}
		}
		if cu.FieldType.Valid || cu.Required.Valid {
			upd.UpdateColumn([]string{c.Name}, cu)
			changed = true
		}
	}
	for _, f := range cur.Fields() {
		if f.Required && !want[f.Name] {
			// New files will not have it: it must read as null.
			upd.UpdateColumn([]string{f.Name}, table.ColumnUpdate{Required: iceberg.Optional[bool]{Valid: true, Val: false}})
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	if err := upd.Commit(); err != nil {
		return false, fmt.Errorf("iceberg: evolving the schema: %w", err)
	}
	return true, nil
}

// canWiden says whether Iceberg promotes from to to.
func canWiden(from, to iceberg.Type) bool {
	switch f := from.(type) {
	case iceberg.Int32Type:
		return to.Equals(iceberg.PrimitiveTypes.Int64)
	case iceberg.Float32Type:
		return to.Equals(iceberg.PrimitiveTypes.Float64)
	case iceberg.DecimalType:
		d, ok := to.(iceberg.DecimalType)
		return ok && d.Scale() == f.Scale() && d.Precision() >= f.Precision()
	}
	return false
}

// checkSpec refuses a table whose partition spec is not fields.
func checkSpec(tbl *table.Table, fields []PartitionField) error {
	spec := tbl.Spec()
	sc := tbl.Schema()
	var have []string
	for _, f := range spec.Fields() {
		src, _ := sc.FindColumnName(f.SourceID())
		have = append(have, f.Transform.String()+"("+src+")")
	}
	var want []string
	for _, f := range fields {
		want = append(want, f.Transform+"("+f.Source+")")
	}
	if strings.Join(have, ", ") != strings.Join(want, ", ") {
		return fmt.Errorf("iceberg table %s is partitioned by [%s], the definition asks for [%s]: a table's partitioning is not changed by the sink; use a new table",
			strings.Join(tbl.Identifier(), "."), strings.Join(have, ", "), strings.Join(want, ", "))
	}
	return nil
}

// partitionData is the partition tuple of f in spec, by field id.
func partitionData(spec iceberg.PartitionSpec, sc *iceberg.Schema, f DataFile) (map[int]any, error) {
	if spec.NumFields() == 0 {
		return nil, nil
	}
	out := map[int]any{}
	for _, pf := range spec.Fields() {
		src, ok := sc.FindFieldByID(pf.SourceID())
		if !ok {
			return nil, fmt.Errorf("iceberg partition field %s: its source column %d is not in the schema", pf.Name, pf.SourceID())
		}
		raw, ok := f.Partition[src.Name]
		if !ok {
			return nil, fmt.Errorf("iceberg data file %s: no partition value for column %s", f.Path, src.Name)
		}
		if raw == nil {
			out[pf.FieldID] = nil
			continue
		}
		lit, err := literalOf(src.Type, raw)
		if err != nil {
			return nil, fmt.Errorf("iceberg data file %s: partition value of column %s: %w", f.Path, src.Name, err)
		}
		v := pf.Transform.Apply(iceberg.Optional[iceberg.Literal]{Valid: true, Val: lit})
		if !v.Valid {
			out[pf.FieldID] = nil
			continue
		}
		out[pf.FieldID] = v.Val.Any()
	}
	return out, nil
}

// literalOf is raw, a value of a column of Iceberg type typ, as a literal.
func literalOf(typ iceberg.Type, raw any) (iceberg.Literal, error) {
	bad := func() (iceberg.Literal, error) {
		return nil, fmt.Errorf("a %T is not a value of a %s column", raw, typ)
	}
	switch typ.(type) {
	case iceberg.StringType:
		if s, ok := raw.(string); ok {
			return iceberg.NewLiteral(s), nil
		}
	case iceberg.Int32Type, iceberg.Int64Type:
		var n int64
		switch v := raw.(type) {
		case int:
			n = int64(v)
		case int32:
			n = int64(v)
		case int64:
			n = v
		default:
			return bad()
		}
		if _, ok := typ.(iceberg.Int32Type); ok {
			return iceberg.NewLiteral(int32(n)), nil
		}
		return iceberg.NewLiteral(n), nil
	case iceberg.Float32Type:
		if v, ok := raw.(float32); ok {
			return iceberg.NewLiteral(v), nil
		}
	case iceberg.Float64Type:
		if v, ok := raw.(float64); ok {
			return iceberg.NewLiteral(v), nil
		}
	case iceberg.BooleanType:
		if v, ok := raw.(bool); ok {
			return iceberg.NewLiteral(v), nil
		}
	case iceberg.BinaryType:
		if v, ok := raw.([]byte); ok {
			return iceberg.NewLiteral(v), nil
		}
	case iceberg.TimestampTzType, iceberg.TimestampType:
		if v, ok := raw.(time.Time); ok {
			return iceberg.NewLiteral(iceberg.Timestamp(v.UnixMicro())), nil
		}
	case iceberg.DateType:
		if v, ok := raw.(time.Time); ok {
			days := v.Unix() / 86400
			if v.Unix()%86400 < 0 {
				days-- // before 1970: round towards the past
			}
			return iceberg.NewLiteral(iceberg.Date(days)), nil
		}
	}
	return bad()
}
