package icetable

import (
	"fmt"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"
)

// allTypes is a record with a column of every sink column type, written as
// the sink writes each (see s3sink's pqColumn.node).
type allTypes struct {
	S     string  `parquet:"s"`
	I32   int32   `parquet:"i32"`
	I64   int64   `parquet:"i64"`
	F32   float32 `parquet:"f32"`
	F64   float64 `parquet:"f64"`
	B     bool    `parquet:"b"`
	TMs   int64   `parquet:"tms,timestamp(millisecond)"`
	TUs   int64   `parquet:"tus,timestamp(microsecond)"`
	D     int32   `parquet:"d,date"`
	Dec9  int32   `parquet:"dec9,decimal(2:9)"`
	Dec18 int64   `parquet:"dec18,decimal(4:18)"`
	Dec20 [9]byte `parquet:"dec20,decimal(2:20)"`
	Bytes []byte  `parquet:"bytes"`
	JSON  string  `parquet:"j,json"`
}

var allCols = []Column{
	{Name: "s", Type: "string"}, {Name: "i32", Type: "int32"}, {Name: "i64", Type: "int64"},
	{Name: "f32", Type: "float"}, {Name: "f64", Type: "double"}, {Name: "b", Type: "boolean"},
	{Name: "tms", Type: "timestamp_ms"}, {Name: "tus", Type: "timestamp_us"}, {Name: "d", Type: "date"},
	{Name: "dec9", Type: "decimal", Precision: 9, Scale: 2}, {Name: "dec18", Type: "decimal", Precision: 18, Scale: 4},
	{Name: "dec20", Type: "decimal", Precision: 20, Scale: 2}, {Name: "bytes", Type: "bytes"},
	{Name: "j", Type: "json", Optional: true},
}

// TestColumnTypes: a file with a column of every sink type is read back by
// iceberg-go's scanner with the values written.
func TestColumnTypes(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	tbl := e.open(allCols, nil)
	ts := time.Date(2026, 11, 30, 12, 34, 56, 789123000, time.UTC)
	var dec20 [9]byte
	big.NewInt(12345678901234567).FillBytes(dec20[:]) // 123456789012345.67
	js := `{"a":[1,2]}`
	recs := []allTypes{{
		S: "héllo", I32: -7, I64: 1 << 40, F32: 1.5, F64: -2.25, B: true,
		TMs: ts.UnixMilli(), TUs: ts.UnixMicro(), D: int32(ts.Unix() / 86400),
		Dec9: 1234, Dec18: -56789, Dec20: dec20, Bytes: []byte{0, 1, 2}, JSON: js,
	}}
	tp := TopicPartition{"t", 0}
	f := upload(e, "all.parquet", tp, 0, 0, ts, recs)
	f.Partition = nil
	if _, err := tbl.Commit(ctx, []DataFile{f}, map[TopicPartition]int64{tp: 1}, nil); err != nil {
		t.Fatal(err)
	}
	got := scan(t, tbl)
	want := []scanned{{
		"s": "héllo", "i32": "-7", "i64": "1099511627776", "f32": "1.5", "f64": "-2.25", "b": "true",
		"tms": "2026-11-30T12:34:56.789Z", "tus": "2026-11-30T12:34:56.789123Z", "d": "2026-11-30",
		"dec9": "12.34", "dec18": "-5.6789", "dec20": "123456789012345.67", "bytes": "AAEC", "j": js,
	}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("scanned\n%v\nwant\n%v", got, want)
	}
}

// TestPartitionData: the partition tuple of a file, from the raw value of
// each source column, for each transform and column type.
func TestPartitionData(t *testing.T) {
	sc, err := newSchema(allCols)
	if err != nil {
		t.Fatal(err)
	}
	spec, err := newSpec(sc, []PartitionField{
		{Source: "s", Transform: "identity"}, {Source: "tms", Transform: "hour"},
		{Source: "d", Transform: "day"}, {Source: "i32", Transform: "identity"},
		{Source: "b", Transform: "identity"}})
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Date(1969, 12, 31, 23, 30, 0, 0, time.UTC) // before the epoch: hours and days round down
	got, err := partitionData(spec, sc, DataFile{Path: "s3://b/k", Partition: map[string]any{
		"s": "eu", "tms": ts, "d": ts, "i32": 7, "b": nil}})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int]any{1000: "eu", 1001: int32(-1), 1002: int32(-1), 1003: int32(7), 1004: nil}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("partition %v; want %v", got, want)
	}
	for _, c := range []struct {
		part map[string]any
		want string
	}{
		{map[string]any{"s": "eu", "tms": int64(5), "d": ts, "i32": 1, "b": true}, "column tms: a int64 is not a value of a timestamptz column"},
		{map[string]any{"s": "eu", "d": ts, "i32": 1, "b": true}, "no partition value for column tms"},
	} {
		if _, err := partitionData(spec, sc, DataFile{Path: "s3://b/k", Partition: c.part}); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("partitionData(%v) = %v; want %q", c.part, err, c.want)
		}
	}
	for _, c := range []struct {
		spec []PartitionField
		want string
	}{
		{[]PartitionField{{Source: "s", Transform: "day"}}, "iceberg partition field s: day cannot be applied to a string column"},
		{[]PartitionField{{Source: "nope", Transform: "identity"}}, "iceberg partition field nope: no such column"},
		{[]PartitionField{{Source: "s", Transform: "bucket"}}, "transform 'bucket' is not supported"},
	} {
		if _, err := newSpec(sc, c.spec); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("newSpec(%v) = %v; want %q", c.spec, err, c.want)
		}
	}
}

// TestOffsetKeys: topics with dots round-trip through the summary keys.
func TestOffsetKeys(t *testing.T) {
	for _, tp := range []TopicPartition{{"a", 0}, {"orders.eu.v2", 17}} {
		got, ok := parseOffsetKey(offsetKey(tp))
		if !ok || got != tp {
			t.Errorf("parseOffsetKey(offsetKey(%v)) = %v, %v", tp, got, ok)
		}
	}
	for _, k := range []string{"pico.offset.", "pico.offset.t", "pico.offset.t.x", "pico.offset.t.-1", "total-records"} {
		if tp, ok := parseOffsetKey(k); ok {
			t.Errorf("parseOffsetKey(%q) = %v; want no topic partition", k, tp)
		}
	}
	if id, err := parseIdent("a.b.events"); err != nil || strings.Join(id, "/") != "a/b/events" {
		t.Errorf("parseIdent(a.b.events) = %v, %v", id, err)
	}
	if _, err := newSchema([]Column{{Name: "x", Type: "int128"}}); err == nil || !strings.Contains(err.Error(), "iceberg column x: type 'int128'") {
		t.Errorf("newSchema with int128: %v", err)
	}
	if _, err := newSchema([]Column{{Name: "x", Type: "decimal", Precision: 40}}); err == nil || !strings.Contains(err.Error(), "decimal(40,0)") {
		t.Errorf("newSchema with decimal(40,0): %v", err)
	}
}

// TestExtendMapping: the table's name mapping gains what the schema adds,
// keeps another tool's aliases, and gives a name to one id only.
func TestExtendMapping(t *testing.T) {
	sc, err := newSchema([]Column{{Name: "a", Type: "string"}, {Name: "b", Type: "int64"}, {Name: "c", Type: "int64"}})
	if err != nil {
		t.Fatal(err)
	}
	id := func(n int) *int { return &n }
	if got, changed := extendMapping(nil, sc); !changed || mappingJSON(got) != nameMapping(sc) {
		t.Fatalf("no mapping: %s, %v; want the schema's", mappingJSON(got), changed)
	}
	cur := iceberg.NameMapping{{FieldID: id(1), Names: []string{"a", "alias_a"}}, {FieldID: id(9), Names: []string{"b", "old_b"}}}
	got, changed := extendMapping(cur, sc)
	want := `[{"names":["a","alias_a"],"field-id":1},{"names":["old_b"],"field-id":9},{"names":["b"],"field-id":2},{"names":["c"],"field-id":3}]`
	if !changed || mappingJSON(got) != want {
		t.Fatalf("extended mapping %s, %v\nwant %s", mappingJSON(got), changed, want)
	}
	if again, changed := extendMapping(got, sc); changed || mappingJSON(again) != want {
		t.Fatalf("a complete mapping changed: %s", mappingJSON(again))
	}
}
