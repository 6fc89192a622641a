package s3sink

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
)

// The settings of table_format = "iceberg", and the rules between them and
// the other keys that the schema cannot state: the delivery mode, the
// catalog's URI, and the partition spec against path_template.

// icebergFromConfig takes the iceberg keys of the generated Config.
func icebergFromConfig(c s3sinkconfig.Config) icebergSettings {
	return icebergSettings{
		Enabled:        c.TableFormat == s3sinkconfig.TableFormatIceberg,
		Catalog:        string(c.IcebergCatalog),
		URI:            c.IcebergCatalogURI.Reveal(),
		Credential:     c.IcebergCatalogCredential.Reveal(),
		Token:          c.IcebergCatalogToken.Reveal(),
		Table:          c.IcebergTable,
		Warehouse:      c.IcebergWarehouse,
		CommitInterval: c.CommitInterval,
		PartitionBy:    c.IcebergPartitionBy,
	}
}

// warehouse is iceberg_warehouse, or s3://bucket/prefix by default.
func (o *options) warehouse() string {
	if o.Iceberg.Warehouse != "" {
		return strings.TrimRight(o.Iceberg.Warehouse, "/")
	}
	w := "s3://" + o.Bucket
	if p := trimPrefix(o.Prefix); p != "" {
		w += "/" + p
	}
	return w
}

// partitionField is one entry of iceberg_partition_by: a transform of a
// source column.
type partitionField struct {
	Transform string // identity, day or hour
	Source    string // the column
	// col is the source's index among the parquet columns (a configured
	// column's), or -1 for the metadata columns topic, partition and
	// timestamp, whose values come from the record itself.
	col int
	// typ is the source column's type (colTypeNames' names).
	typ string
}

var partitionSyntax = regexp.MustCompile(`^\s*(identity|day|hour)\(\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// identityTypes are the column types identity(...) takes: those whose
// {field:...} text names one value.
var identityTypes = []string{"string", "int64", "boolean", "date"}

// timeTypes are the column types day(...) and hour(...) take: those
// {field:PATH:day} and {field:PATH:hour} read as a time, as the column
// does.
var timeTypes = map[string][]string{"day": {"timestamp_ms", "timestamp_us", "date"}, "hour": {"timestamp_ms", "timestamp_us"}}

// checkIceberg refuses what contradicts table_format = "iceberg", naming
// the keys; nothing when it is off.
func (o *options) checkIceberg() error {
	ice := &o.Iceberg
	if !ice.Enabled {
		return nil
	}
	if o.Buffered {
		return confkit.Problems{{Key: "delivery", Value: "buffered", Rule: "table_format",
			Message: "delivery 'buffered' cannot feed table_format = \"iceberg\": the table's snapshots record the offsets they hold, so the sink must commit offsets only after them; use delivery = \"exactly_once\" (the default)"}}
	}
	if o.Format != formatParquet {
		return confkit.Problems{{Key: "table_format", Value: "iceberg", Rule: "output_format",
			Message: "table_format 'iceberg' needs output_format = \"parquet\": an Iceberg table holds Parquet data files"}}
	}
	switch ice.Catalog {
	case "sql":
		if !sqlCatalogURI(ice.URI) {
			return uriProblem("iceberg_catalog = \"sql\" needs iceberg_catalog_uri, a PostgreSQL URL (postgres://user:password@host:5432/db) or a SQLite file (sqlite:/var/lib/pico/catalog.db)")
		}
	case "rest":
		if !strings.HasPrefix(ice.URI, "http://") && !strings.HasPrefix(ice.URI, "https://") {
			return uriProblem("iceberg_catalog = \"rest\" needs iceberg_catalog_uri, the catalog's http:// or https:// URL")
		}
	case "glue":
	default:
		return confkit.Problems{{Key: "iceberg_catalog", Value: ice.Catalog, Rule: "x-required-if",
			Message: "table_format is 'iceberg' but iceberg_catalog is not set: use sql, rest or glue"}}
	}
	if ice.Catalog != "rest" && (ice.Credential != "" || ice.Token != "") {
		key := "iceberg_catalog_credential"
		if ice.Credential == "" {
			key = "iceberg_catalog_token"
		}
		return confkit.Problems{{Key: key, Value: confkit.Mask, Rule: "iceberg_catalog",
			Message: fmt.Sprintf("%s is for iceberg_catalog = \"rest\" only; iceberg_catalog is '%s'", key, ice.Catalog)}}
	}
	if ice.Table == "" {
		return confkit.Problems{{Key: "iceberg_table", Rule: "x-required-if",
			Message: "table_format is 'iceberg' but iceberg_table (namespace.table) is not set"}}
	}
	_, err := o.partitionSpec()
	return err
}

// uriProblem is a missing or wrong iceberg_catalog_uri: the value is a
// secret and is never quoted.
func uriProblem(msg string) error {
	return confkit.Problems{{Key: "iceberg_catalog_uri", Value: confkit.Mask, Rule: "iceberg_catalog", Message: msg}}
}

// partitionSpec parses iceberg_partition_by and checks that path_template
// cuts files the same way, so that every record of a file has the file's
// partition values: identity of a configured column needs {field:PATH} of
// its path, day and hour of a timestamp column {field:PATH:day} or
// {field:PATH:hour} (UTC, as Iceberg's transforms), day and hour of the
// record time {yyyy}{MM}{dd} (and {HH}) in UTC. identity of topic or
// partition needs nothing: a file holds one partition of one topic.
func (o *options) partitionSpec() ([]partitionField, error) {
	var out []partitionField
	seen := map[string]int{}
	for i, entry := range o.Iceberg.PartitionBy {
		key := fmt.Sprintf("iceberg_partition_by[%d]", i)
		bad := func(msg string, args ...any) error {
			return confkit.Problems{{Key: key, Value: entry, Rule: "iceberg_partition_by",
				Message: fmt.Sprintf("%s '%s': ", key, entry) + fmt.Sprintf(msg, args...)}}
		}
		m := partitionSyntax.FindStringSubmatch(entry)
		if m == nil {
			return nil, bad("write identity(COLUMN), day(COLUMN) or hour(COLUMN)")
		}
		f := partitionField{Transform: m[1], Source: m[2], col: -1}
		if j, dup := seen[f.Source]; dup {
			return nil, bad("column %s is already partitioned by iceberg_partition_by[%d]; a column takes one transform", f.Source, j)
		}
		seen[f.Source] = i
		if f.Transform != "identity" && f.Source == "timestamp" && o.IncludeMetadata {
			need := []string{"yyyy", "MM", "dd"}
			if f.Transform == "hour" {
				need = append(need, "HH")
			}
			if miss := missingParts(o.PathTemplate, need); len(miss) > 0 || o.TimeZone != "" && o.TimeZone != "UTC" {
				return nil, bad("path_template must cut files by the record's %[1]s in UTC, as Iceberg's %[1]s transform does: it needs {%[2]s} and timezone = \"UTC\" (path_template is '%[3]s', timezone '%[4]s'); {date} and {hour} do not do, they are those of a file's first record",
					f.Transform, strings.Join(need, "}, {"), o.PathTemplate.Source, o.TimeZone)
			}
			f.typ = "timestamp_ms"
			out = append(out, f)
			continue
		}
		if o.IncludeMetadata && (f.Source == "topic" || f.Source == "partition") {
			f.typ = map[string]string{"topic": "string", "partition": "int32"}[f.Source]
			out = append(out, f)
			continue
		}
		j := slices.IndexFunc(o.Columns, func(c columnSpec) bool { return c.Name == f.Source })
		if j < 0 {
			if f.Transform != "identity" {
				return nil, bad("%[1]s is not a column: %[2]s takes a timestamp column of columns (timestamp_ms, timestamp_us%[3]s), or the record time, %[2]s(timestamp) with include_metadata = true", f.Source, f.Transform, map[bool]string{true: " or date"}[f.Transform == "day"])
			}
			return nil, bad("%s is not a column: identity takes a column of columns, or topic or partition with include_metadata = true", f.Source)
		}
		c := o.Columns[j]
		path := c.payloadPath()
		if f.Transform != "identity" {
			types := timeTypes[f.Transform]
			if !slices.Contains(types, c.Type) {
				return nil, bad("column %s is of type %s; %s partitions a column of type %s", f.Source, c.Type, f.Transform, strings.Join(types, ", "))
			}
			// A file cut by the hour is cut by the day too.
			if !slices.ContainsFunc(o.PathTemplate.Parts, func(p templatePart) bool {
				pp, by := fieldParam(p.Param)
				return p.Name == "field" && strings.Trim(pp, ".") == path && (by == cutHour || by == cutDay && f.Transform == "day")
			}) {
				return nil, bad("path_template must cut files by the column's %[1]s in UTC, so that a file holds one %[1]s of it: add {field:%[2]s:%[1]s} to path_template (now '%[3]s')", f.Transform, path, o.PathTemplate.Source)
			}
		} else {
			if !slices.Contains(identityTypes, c.Type) {
				return nil, bad("column %s is of type %s; identity partitions a column of type %s", f.Source, c.Type, strings.Join(identityTypes, ", "))
			}
			if !slices.ContainsFunc(o.PathTemplate.Parts, func(p templatePart) bool { return p.Name == "field" && p.Param == path }) {
				return nil, bad("path_template must cut files by the column's value, so that a file holds one value of it: add {field:%s} to path_template (now '%s')", path, o.PathTemplate.Source)
			}
		}
		f.col, f.typ = j, c.Type
		if o.IncludeMetadata {
			f.col += 5 // after offset, timestamp, topic, partition, key
		}
		if o.IncludeHeaders {
			f.col++
		}
		out = append(out, f)
	}
	return out, nil
}

// missingParts returns the placeholders of need that t does not have.
func missingParts(t pathTemplate, need []string) []string {
	var miss []string
	for _, n := range need {
		if !slices.ContainsFunc(t.Parts, func(p templatePart) bool { return p.Name == n }) {
			miss = append(miss, n)
		}
	}
	return miss
}

// sqlCatalogURI reports whether uri names a database the sql catalog
// reaches: a PostgreSQL URL or a SQLite file (sqlite:PATH).
func sqlCatalogURI(uri string) bool {
	if path, ok := strings.CutPrefix(uri, "sqlite:"); ok {
		return path != ""
	}
	return strings.HasPrefix(uri, "postgres://") || strings.HasPrefix(uri, "postgresql://")
}
