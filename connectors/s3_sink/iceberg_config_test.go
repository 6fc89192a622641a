package s3sink

import (
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// iceRaw is a valid iceberg sink's [plugin_config], with changes: a nil
// value removes the key.
func iceRaw(changes map[string]any) map[string]any {
	raw := map[string]any{
		"bucket": "lake", "region": "eu-west-1", "output_format": "parquet",
		"path_template":       "{topic}/{yyyy}-{MM}-{dd}/{field:region}",
		"table_format":        "iceberg",
		"iceberg_catalog":     "sql",
		"iceberg_catalog_uri": "postgres://ice:hunter2@127.0.0.1:5432/catalog",
		"iceberg_table":       "lake.orders",
		"columns":             []map[string]any{{"name": "id", "type": "int64"}, {"name": "region", "type": "string"}, {"name": "amount", "type": "double"}},
	}
	for k, v := range changes {
		if v == nil {
			delete(raw, k)
		} else {
			raw[k] = v
		}
	}
	return raw
}

// TestIcebergConfig: the registered Load (what validate runs) applies the
// iceberg keys' rules, schema and Go, each problem naming the key and
// never the catalog URI's password.
func TestIcebergConfig(t *testing.T) {
	reg, _ := sdk.Lookup(s3sinkconfig.Path)
	cfg, err := reg.Load(iceRaw(map[string]any{"iceberg_partition_by": []any{"identity(region)", "day(timestamp)", "identity(topic)"}}), envPrefix, noEnv)
	if err != nil {
		t.Fatalf("valid iceberg config refused: %v", err)
	}
	o := fromConfig(cfg.(s3sinkconfig.Config))
	if !o.Iceberg.Enabled || o.Iceberg.CommitInterval.String() != "1m0s" || o.warehouse() != "s3://lake" {
		t.Fatalf("iceberg settings = %+v, warehouse %s", o.Iceberg, o.warehouse())
	}
	spec, err := o.partitionSpec()
	if err != nil || len(spec) != 3 || spec[0].col != 6 || spec[1].col != -1 || spec[2].typ != "string" {
		t.Fatalf("spec = %+v, %v", spec, err)
	}
	for _, c := range []struct {
		name    string
		changes map[string]any
		want    string
	}{
		{"json output", map[string]any{"output_format": nil, "columns": nil}, "table_format 'iceberg' needs output_format = \"parquet\""},
		{"buffered", map[string]any{"delivery": "buffered"}, "delivery: delivery 'buffered' cannot feed table_format = \"iceberg\""},
		{"no catalog", map[string]any{"iceberg_catalog": nil}, "iceberg_catalog: table_format is 'iceberg' but iceberg_catalog is not set"},
		{"no table", map[string]any{"iceberg_table": nil}, "iceberg_table: table_format is 'iceberg' but iceberg_table (namespace.table) is not set"},
		{"bad table", map[string]any{"iceberg_table": "orders"}, "iceberg_table 'orders' must be namespace.table"},
		{"no uri", map[string]any{"iceberg_catalog_uri": nil}, "iceberg_catalog_uri: iceberg_catalog = \"sql\" needs iceberg_catalog_uri, a PostgreSQL URL (postgres://user:password@host:5432/db) or a SQLite file"},
		{"rest uri", map[string]any{"iceberg_catalog": "rest"}, "iceberg_catalog = \"rest\" needs iceberg_catalog_uri, the catalog's http:// or https:// URL"},
		{"token not rest", map[string]any{"iceberg_catalog_token": "tok"}, "iceberg_catalog_token is for iceberg_catalog = \"rest\" only"},
		{"bad warehouse", map[string]any{"iceberg_warehouse": "lake/meta"}, "iceberg_warehouse 'lake/meta' must be s3://bucket or s3://bucket/path"},
		{"short interval", map[string]any{"commit_interval": "100ms"}, "commit_interval (100ms) must be at least 1s"},
		{"bad transform", map[string]any{"iceberg_partition_by": []any{"bucket(16, id)"}}, "iceberg_partition_by[0] 'bucket(16, id)': write identity(COLUMN), day(COLUMN) or hour(COLUMN)"},
		{"not a column", map[string]any{"iceberg_partition_by": []any{"identity(country)"}}, "country is not a column"},
		{"double column", map[string]any{"iceberg_partition_by": []any{"identity(amount)"}}, "column amount is of type double"},
		{"identity needs field", map[string]any{"iceberg_partition_by": []any{"identity(id)"}}, "add {field:id} to path_template"},
		{"hour needs HH", map[string]any{"iceberg_partition_by": []any{"hour(timestamp)"}}, "it needs {yyyy}, {MM}, {dd}, {HH} and timezone = \"UTC\""},
		{"day in Berlin", map[string]any{"iceberg_partition_by": []any{"day(timestamp)"}, "timezone": "Europe/Berlin"}, "timezone 'Europe/Berlin'"},
		{"day of date", map[string]any{"iceberg_partition_by": []any{"day(timestamp)"}, "path_template": "{date}"}, "{date} and {hour} do not do"},
		{"day of a double", map[string]any{"iceberg_partition_by": []any{"day(amount)"}}, "iceberg_partition_by[0] 'day(amount)': column amount is of type double; day partitions a column of type timestamp_ms, timestamp_us, date"},
		{"hour of a date", map[string]any{"iceberg_partition_by": []any{"hour(d)"}, "columns": iceCols}, "hour partitions a column of type timestamp_ms, timestamp_us"},
		{"day not a column", map[string]any{"iceberg_partition_by": []any{"day(created)"}}, "created is not a column: day takes a timestamp column of columns (timestamp_ms, timestamp_us or date), or the record time, day(timestamp) with include_metadata = true"},
		{"day needs field day", map[string]any{"iceberg_partition_by": []any{"day(ts)"}, "columns": iceCols}, "iceberg_partition_by[0] 'day(ts)': path_template must cut files by the column's day in UTC, so that a file holds one day of it: add {field:event.at:day} to path_template (now '{topic}/{yyyy}-{MM}-{dd}/{field:region}')"},
		{"hour needs field hour", map[string]any{"iceberg_partition_by": []any{"hour(ts)"}, "columns": iceCols, "path_template": "{field:event.at:day}"}, "add {field:event.at:hour} to path_template (now '{field:event.at:day}')"},
		{"day of the value", map[string]any{"iceberg_partition_by": []any{"day(ts)"}, "columns": iceCols, "path_template": "{field:event.at}"}, "add {field:event.at:day}"},
		{"twice", map[string]any{"iceberg_partition_by": []any{"identity(region)", "identity(region)"}}, "already partitioned by iceberg_partition_by[0]"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := reg.Load(iceRaw(c.changes), envPrefix, noEnv)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Load = %v; want %q", err, c.want)
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Fatalf("the catalog URI's password leaked: %v", err)
			}
		})
	}
}

// iceCols are columns with a timestamp at a nested path, and a date.
var iceCols = []map[string]any{{"name": "id", "type": "int64"}, {"name": "region", "type": "string"},
	{"name": "ts", "type": "timestamp_us", "path": "event.at"}, {"name": "d", "type": "date", "optional": true}}

// TestIcebergPartitionByPayloadTime: day and hour of a timestamp column
// (and day of a date) take a path_template cut by that column's day or
// hour; an hour cut serves day too.
func TestIcebergPartitionByPayloadTime(t *testing.T) {
	reg, _ := sdk.Lookup(s3sinkconfig.Path)
	for _, c := range []struct {
		by, tmpl string
		col      int
	}{
		{"day(ts)", "{topic}/{field:event.at:day}", 7},
		{"day(ts)", "{field:event.at:hour}/{field:.event.at.:day}", 7},
		{"hour(ts)", "x/{field:event.at:hour}", 7},
		{"day(d)", "{field:d:day}", 8},
	} {
		cfg, err := reg.Load(iceRaw(map[string]any{"iceberg_partition_by": []any{c.by}, "columns": iceCols, "path_template": c.tmpl}), envPrefix, noEnv)
		if err != nil {
			t.Fatalf("%s with %s refused: %v", c.by, c.tmpl, err)
		}
		o := fromConfig(cfg.(s3sinkconfig.Config))
		spec, err := o.partitionSpec()
		if err != nil || len(spec) != 1 || spec[0].col != c.col || spec[0].Transform != c.by[:strings.IndexByte(c.by, '(')] {
			t.Fatalf("%s: spec %+v, %v", c.by, spec, err)
		}
	}
}

// TestIcebergExampleDefinition loads examples/s3_sink_iceberg.toml as the
// runtime does: its iceberg keys are valid together.
func TestIcebergExampleDefinition(t *testing.T) {
	o := loadExample(t, "../../examples/s3_sink_iceberg.toml")
	spec, err := o.partitionSpec()
	if err != nil || !o.Iceberg.Enabled || o.Iceberg.Table != "lake.orders" || len(spec) != 2 || o.warehouse() != "s3://picomq-lake/iceberg/orders" {
		t.Fatalf("options %+v, spec %+v, %v", o.Iceberg, spec, err)
	}
}
