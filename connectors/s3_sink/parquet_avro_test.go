package s3sink

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/memory"
	pqfile "github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// everyAvroType has a field of every Avro type and logical type.
const everyAvroType = `{"type": "record", "name": "Order", "namespace": "t", "fields": [
	{"name": "n", "type": "null"},
	{"name": "b", "type": "boolean"},
	{"name": "i", "type": "int"},
	{"name": "l", "type": "long"},
	{"name": "f", "type": "float"},
	{"name": "d", "type": "double"},
	{"name": "by", "type": "bytes"},
	{"name": "s", "type": "string"},
	{"name": "rec", "type": {"type": "record", "name": "Inner", "fields": [
		{"name": "a", "type": "int"},
		{"name": "deep", "type": ["null", {"type": "record", "name": "Deep", "fields": [{"name": "x", "type": "string"}]}]}]}},
	{"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN", "BLUE"]}},
	{"name": "arr", "type": {"type": "array", "items": "long"}},
	{"name": "arr_opt", "type": ["null", {"type": "array", "items": ["null", "string"]}]},
	{"name": "recs", "type": {"type": "array", "items": "Inner"}},
	{"name": "m", "type": {"type": "map", "values": "int"}},
	{"name": "mm", "type": {"type": "map", "values": {"type": "array", "items": "string"}}},
	{"name": "fx", "type": {"type": "fixed", "name": "F4", "size": 4}},
	{"name": "opt", "type": ["null", "long"]},
	{"name": "opt_last", "type": ["string", "null"]},
	{"name": "dec_b", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
	{"name": "dec_f", "type": {"type": "fixed", "name": "D16", "size": 16, "logicalType": "decimal", "precision": 38, "scale": 4}},
	{"name": "id", "type": {"type": "string", "logicalType": "uuid"}},
	{"name": "day", "type": {"type": "int", "logicalType": "date"}},
	{"name": "tm", "type": {"type": "int", "logicalType": "time-millis"}},
	{"name": "tu", "type": {"type": "long", "logicalType": "time-micros"}},
	{"name": "tsm", "type": {"type": "long", "logicalType": "timestamp-millis"}},
	{"name": "tsu", "type": {"type": "long", "logicalType": "timestamp-micros"}},
	{"name": "ltm", "type": {"type": "long", "logicalType": "local-timestamp-millis"}},
	{"name": "ltu", "type": {"type": "long", "logicalType": "local-timestamp-micros"}}
]}`

// avroEncode writes v as Avro binary under schema with its logical types
// left out (the same bytes, from plain Go values).
func avroEncode(t testing.TB, schema string, v map[string]any) []byte {
	t.Helper()
	var tree any
	if err := json.Unmarshal([]byte(schema), &tree); err != nil {
		t.Fatal(err)
	}
	var strip func(any)
	strip = func(x any) {
		switch x := x.(type) {
		case map[string]any:
			delete(x, "logicalType")
			for _, y := range x {
				strip(y)
			}
		case []any:
			for _, y := range x {
				strip(y)
			}
		}
	}
	strip(tree)
	plain, _ := json.Marshal(tree)
	s, err := avro.Parse(string(plain))
	if err != nil {
		t.Fatal(err)
	}
	b, err := avro.Marshal(s, v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// openAvro opens a parquet sink whose one [[topics]] block, topic t, is
// Avro with schema.
func openAvro(t *testing.T, srv *s3test.Server, prefix, schema string, mod func(*options)) *Sink {
	t.Helper()
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.Prefix, o.PathTemplate = prefix, mustTemplate(t, "{topic}")
	o.Format, o.ParquetCodec = formatParquet, "zstd"
	if mod != nil {
		mod(&o)
	}
	s := newSink(o, sinkEnv("avro", sdk.DiscardMetrics))
	if err := s.SetTopics([]sdk.TopicSchema{{Topic: "t", Schema: sdk.SchemaAvro, AvroSchema: schema}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	return s
}

// avroRecords makes Avro records of topic t from values.
func avroRecords(t testing.TB, schema string, values []map[string]any) []sdk.Record {
	recs := records("t", 0, len(values))
	for i, v := range values {
		recs[i].Payload, recs[i].Schema = avroEncode(t, schema, v), sdk.SchemaAvro
	}
	return recs
}

// writeAvro feeds recs to s, closes it and reads back the one object
// under prefix (readAvroParquet).
func writeAvro(t *testing.T, srv *s3test.Server, s *Sink, prefix string, recs []sdk.Record) (fields []string, types []string, rows []map[string]string) {
	t.Helper()
	feed(t, s, recs, 10)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs, err := srv.List(context.Background(), prefix)
	if err != nil || len(objs) != 1 {
		t.Fatalf("objects %v, %v", objs, err)
	}
	return readAvroParquet(t, srv.MustGet(t, objs[0].Key))
}

// readAvroParquet reads one object back with arrow-go: its columns by
// name and each row's values as JSON (arrow's own marshalling).
func readAvroParquet(t *testing.T, body []byte) (fields []string, types []string, rows []map[string]string) {
	t.Helper()
	r, err := pqfile.NewParquetReader(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	fr, err := pqarrow.NewFileReader(r, pqarrow.ArrowReadProperties{}, memory.DefaultAllocator)
	if err != nil {
		t.Fatal(err)
	}
	tbl, err := fr.ReadTable(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer tbl.Release()
	rows = make([]map[string]string, tbl.NumRows())
	for i := range rows {
		rows[i] = map[string]string{}
	}
	for c := 0; c < int(tbl.NumCols()); c++ {
		f := tbl.Schema().Field(c)
		fields = append(fields, f.Name)
		types = append(types, f.Type.String()+map[bool]string{true: " nullable", false: ""}[f.Nullable])
		row := 0
		for _, arr := range tbl.Column(c).Data().Chunks() {
			for i := 0; i < arr.Len(); i++ {
				b, err := json.Marshal(arr.GetOneForMarshal(i))
				if err != nil {
					t.Fatal(err)
				}
				rows[row][f.Name] = string(b)
				row++
			}
		}
	}
	return fields, types, rows
}

// everyAvroValues are two records of everyAvroType: values of every type,
// then nulls, empty arrays and maps, zeros and negatives.
func everyAvroValues() []map[string]any {
	var dec16 [16]byte
	for i := range dec16 {
		dec16[i] = 0xff
	}
	dec16[15] = 0x9c // -100: -0.0100 at scale 4
	return []map[string]any{{
		"n": nil, "b": true, "i": int32(-7), "l": int64(1) << 40, "f": float32(1.5), "d": 2.25,
		"by": []byte{0, 1, 0xfe}, "s": "héllo",
		"rec":   map[string]any{"a": int32(1), "deep": map[string]any{"t.Deep": map[string]any{"x": "in"}}},
		"color": "GREEN", "arr": []any{int64(1), int64(2), int64(3)},
		"arr_opt": []any{"a", nil, "c"},
		"recs":    []any{map[string]any{"a": int32(5), "deep": nil}, map[string]any{"a": int32(6), "deep": map[string]any{"t.Deep": map[string]any{"x": "y"}}}},
		"m":       map[string]any{"k": int32(1)},
		"mm":      map[string]any{"z": []any{"p", "q"}},
		"fx":      [4]byte{1, 2, 3, 4}, "opt": int64(42), "opt_last": "last",
		"dec_b": []byte{0x30, 0x39}, // 12345: 123.45
		"dec_f": dec16,
		"id":    "0f8fad5b-d9cb-469f-a165-70867728950e", "day": int32(20700),
		"tm": int32(3723004), "tu": int64(3723004005),
		"tsm": int64(1788476104118), "tsu": int64(1788476104118123),
		"ltm": int64(1788476104118), "ltu": int64(1788476104118123),
	}, {
		"n": nil, "b": false, "i": int32(0), "l": int64(-1), "f": float32(-0.25), "d": -1e300,
		"by": []byte{}, "s": "",
		"rec":   map[string]any{"a": int32(-2), "deep": nil},
		"color": "BLUE", "arr": []any{},
		"arr_opt": nil,
		"recs":    []any{},
		"m":       map[string]any{},
		"mm":      map[string]any{"e": []any{}},
		"fx":      [4]byte{}, "opt": nil, "opt_last": nil,
		"dec_b": []byte{0xff}, // -1: -0.01
		"dec_f": [16]byte{},
		"id":    "00000000-0000-0000-0000-000000000000", "day": int32(-1),
		"tm": int32(0), "tu": int64(0), "tsm": int64(0), "tsu": int64(-1), "ltm": int64(-1), "ltu": int64(0),
	}}
}

// TestParquetFromAvro writes records of every Avro type and logical type
// through the sink as Parquet, without columns, and reads them back with
// arrow-go: the schema follows the Avro schema (groups, optional for
// unions with null, LIST, MAP, DECIMAL, DATE, TIME, TIMESTAMP) and the
// values and nulls are the records'.
func TestParquetFromAvro(t *testing.T) {
	srv := s3test.Start(t)
	s := openAvro(t, srv, "avro", everyAvroType, func(o *options) { o.IncludeMetadata = true })
	values := everyAvroValues()
	fields, types, rows := writeAvro(t, srv, s, "avro/", avroRecords(t, everyAvroType, values))
	wantTypes := []string{
		"offset int64", "timestamp timestamp[ms, tz=UTC]", "topic utf8", "partition int32", "key binary nullable",
		"n null nullable", "b bool", "i int32", "l int64", "f float32", "d float64", "by binary", "s utf8",
		"rec struct<a: int32, deep: struct<x: utf8> nullable>", "color utf8", "arr list<element: int64>",
		"arr_opt list<element: utf8, nullable> nullable", "recs list<element: struct<a: int32, deep: struct<x: utf8> nullable>>",
		"m map<utf8, int32, items_non_nullable>", "mm map<utf8, list<element: utf8>, items_non_nullable>", "fx fixed_size_binary[4]", "opt int64 nullable",
		"opt_last utf8 nullable", "dec_b decimal(10, 2)", "dec_f decimal(38, 4)", "id utf8", "day date32",
		"tm time32[ms]", "tu time64[us]", "tsm timestamp[ms, tz=UTC]", "tsu timestamp[us, tz=UTC]",
		"ltm timestamp[ms]", "ltu timestamp[us]",
	}
	var got []string
	for i, f := range fields {
		got = append(got, f+" "+types[i])
	}
	if g, w := strings.Join(got, "\n"), strings.Join(wantTypes, "\n"); g != w {
		t.Errorf("arrow schema:\n%s\nwant\n%s", g, w)
	}
	want := []map[string]string{{
		"offset": `0`, "topic": `"t"`, "partition": `0`,
		"n": `null`, "b": `true`, "i": `-7`, "l": `1099511627776`, "f": `1.5`, "d": `2.25`,
		"by": `"AAH+"`, "s": `"héllo"`,
		"rec":     `{"a":1,"deep":{"x":"in"}}`,
		"color":   `"GREEN"`,
		"arr":     `[1,2,3]`,
		"arr_opt": `["a",null,"c"]`,
		"recs":    `[{"a":5,"deep":null},{"a":6,"deep":{"x":"y"}}]`,
		"m":       `[{"key":"k","value":1}]`,
		"mm":      `[{"key":"z","value":["p","q"]}]`,
		"fx":      `"AQIDBA=="`, "opt": `42`, "opt_last": `"last"`,
		"dec_b": `"123.45"`, "dec_f": `"-0.01"`,
		"id": `"0f8fad5b-d9cb-469f-a165-70867728950e"`, "day": `"2026-09-04"`,
		"tm": `"01:02:03.004"`, "tu": `"01:02:03.004005"`,
		"tsm": `"2026-09-03T22:55:04.118Z"`, "tsu": `"2026-09-03T22:55:04.118123Z"`,
		"ltm": `"2026-09-03T22:55:04.118"`, "ltu": `"2026-09-03T22:55:04.118123"`,
	}, {
		"offset": `1`, "topic": `"t"`, "partition": `0`,
		"n": `null`, "b": `false`, "i": `0`, "l": `-1`, "f": `-0.25`, "d": `-1e+300`,
		"by": `""`, "s": `""`,
		"rec":     `{"a":-2,"deep":null}`,
		"color":   `"BLUE"`,
		"arr":     `[]`,
		"arr_opt": `null`,
		"recs":    `[]`,
		"m":       `[]`,
		"mm":      `[{"key":"e","value":[]}]`,
		"fx":      `"AAAAAA=="`, "opt": `null`, "opt_last": `null`,
		"dec_b": `"-0.01"`, "dec_f": `"0"`,
		"id": `"00000000-0000-0000-0000-000000000000"`, "day": `"1969-12-31"`,
		"tm": `"00:00:00"`, "tu": `"00:00:00"`,
		"tsm": `"1970-01-01T00:00:00Z"`, "tsu": `"1969-12-31T23:59:59.999999Z"`,
		"ltm": `"1969-12-31T23:59:59.999"`, "ltu": `"1970-01-01T00:00:00"`,
	}}
	if len(rows) != len(want) {
		t.Fatalf("%d rows, want %d", len(rows), len(want))
	}
	for i, w := range want {
		for k, v := range w {
			if rows[i][k] != v {
				t.Errorf("row %d, %s = %s, want %s", i, k, rows[i][k], v)
			}
		}
	}
}

const smallAvro = `{"type": "record", "name": "R", "fields": [
	{"name": "id", "type": "long"},
	{"name": "kind", "type": {"type": "enum", "name": "K", "symbols": ["A", "B"]}},
	{"name": "note", "type": ["null", "string"]},
	{"name": "tags", "type": {"type": "array", "items": "string"}}]}`

// TestParquetAvroRejects: a payload its Avro schema does not decode is
// rejected with the field and the reason (so it goes to the dead-letter
// topic), again on redelivery; the others land.
func TestParquetAvroRejects(t *testing.T) {
	srv := s3test.Start(t)
	s := openAvro(t, srv, "rej", smallAvro, nil)
	good := func(id int64) []byte {
		return avroEncode(t, smallAvro, map[string]any{"id": id, "kind": "B", "note": nil, "tags": []any{"x"}})
	}
	recs := records("t", 0, 7)
	payloads := [][]byte{
		good(0),
		good(1)[:3],                    // cut inside tags
		{0x02, 0x04, 0x00, 0x00},       // enum index 2 of 2
		{0x02, 0x00, 0x04, 0x00},       // union branch 2
		append(good(4), 0x00),          // a byte after the record
		{0x02, 0x00, 0x00, 0x01, 0x00}, // a negative block count without its size
		good(6),
	}
	for i, p := range payloads {
		recs[i].Payload, recs[i].Schema = p, sdk.SchemaAvro
	}
	wantErr := map[int64]string{
		1: "Avro payload: field tags: the Avro binary ends too early",
		2: "Avro payload: field kind: enum index 2, the enum has 2 symbols",
		3: "Avro payload: field note: union branch 2, the union has 2",
		4: "Avro payload: 1 bytes follow the Avro record",
		5: "Avro payload: field tags[]: the Avro binary ends too early",
	}
	checkRejected(t, s.Consume(context.Background(), recs), wantErr)
	checkRejected(t, s.Consume(context.Background(), recs), wantErr)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	tabs := parquetObjects(t, srv, "rej/")
	if len(tabs) != 1 {
		t.Fatalf("objects %v", tabs)
	}
	var got []string
	for _, r := range tabs[0].rows {
		got = append(got, strings.Join(r[5:], " "))
	}
	if strings.Join(got, ",") != `0 B <null> ["x"],6 B <null> ["x"]` {
		t.Fatalf("rows %q", got)
	}
}

// TestParquetAvroTopics: what SetTopics refuses, each naming the block
// and the key; and columns picking and renaming an Avro topic's top-level
// fields.
func TestParquetAvroTopics(t *testing.T) {
	for _, c := range []struct {
		name   string
		cols   []columnSpec
		topics []sdk.TopicSchema
		want   string
	}{
		{"json without columns", nil, []sdk.TopicSchema{{Block: 0, Topic: "a", Schema: sdk.SchemaAvro, AvroSchema: smallAvro}, {Block: 1, Topic: "^raw\\.", Pattern: true, Schema: sdk.SchemaJSON}},
			`topics[1] (^raw\.) has schema = "json": output_format = "parquet" takes a JSON topic's columns from [[plugin_config.columns]], and none are listed`},
		{"general union", nil, []sdk.TopicSchema{{Topic: "a", Schema: sdk.SchemaAvro, AvroSchema: `{"type":"record","name":"R","fields":[{"name":"u","type":["int","string"]}]}`}},
			"topics[0] (a): field u is a union of int, string: only a union of null and one other type maps to a Parquet column"},
		{"recursive", nil, []sdk.TopicSchema{{Topic: "a", Schema: sdk.SchemaAvro, AvroSchema: `{"type":"record","name":"N","fields":[{"name":"next","type":["null","N"]}]}`}},
			"topics[0] (a): field next: the record N contains itself"},
		{"not a record", nil, []sdk.TopicSchema{{Topic: "a", Schema: sdk.SchemaAvro, AvroSchema: `"string"`}},
			"the Avro schema is a string, not a record"},
		{"nested column", []columnSpec{{Name: "x", Type: "string", Path: "tags.x"}}, []sdk.TopicSchema{{Topic: "a", Schema: sdk.SchemaAvro, AvroSchema: smallAvro}},
			"columns[0].path 'tags.x': for an Avro topic a column names a top-level field of the record, not a nested one"},
		{"unknown field", []columnSpec{{Name: "idd", Type: "int64"}}, []sdk.TopicSchema{{Topic: "a", Schema: sdk.SchemaAvro, AvroSchema: smallAvro}},
			"columns[0].path 'idd' is not a field of the Avro record (its fields: id, kind, note, tags)"},
	} {
		o := defaultOptions()
		o.Bucket, o.Region, o.Format, o.Columns = "picomq-archive", "eu-west-1", formatParquet, c.cols
		s := newSink(o, sinkEnv("avro", sdk.DiscardMetrics))
		if err := s.SetTopics(c.topics); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// Without SetTopics and without columns, Open refuses.
	o := defaultOptions()
	o.Bucket, o.Region, o.Format = "picomq-archive", "eu-west-1", formatParquet
	if err := newSink(o, sinkEnv("avro", sdk.DiscardMetrics)).Open(context.Background()); err == nil || !strings.Contains(err.Error(), "no columns are listed") {
		t.Errorf("Open without columns or topics: %v", err)
	}

	// columns pick and rename top-level fields, in their order.
	srv := s3test.Start(t)
	s := openAvro(t, srv, "pick", smallAvro, func(o *options) {
		o.IncludeMetadata = false
		o.Columns = []columnSpec{{Name: "labels", Path: "tags", Type: "json"}, {Name: "id", Type: "int64"}}
	})
	fields, types, rows := writeAvro(t, srv, s, "pick/", avroRecords(t, smallAvro, []map[string]any{{"id": int64(9), "kind": "A", "note": "n", "tags": []any{"p", "q"}}}))
	if got := strings.Join(fields, ",") + " " + strings.Join(types, ","); got != "labels,id list<element: utf8>,int64" {
		t.Errorf("schema %s", got)
	}
	if len(rows) != 1 || rows[0]["labels"] != `["p","q"]` || rows[0]["id"] != "9" {
		t.Errorf("rows %v", rows)
	}
}

// TestParquetAvroDeadLetters runs the sink loop over an Avro topic (its
// schema in the [[topics]] block, handed to the sink by SetTopics before
// Open) with a dead_letter_topic: the two payloads the schema does not
// decode go there with the field named, the others to the bucket.
func TestParquetAvroDeadLetters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs librdkafka through the sink loop; skipped with -short")
	}
	srv, b, cl := dlqSetup(t)
	var recs []*kgo.Record
	for i := int64(0); i < 12; i++ {
		v := avroEncode(t, smallAvro, map[string]any{"id": i, "kind": "A", "note": fmt.Sprint("n", i), "tags": []any{}})
		switch i {
		case 3:
			v = v[:2] // cut short
		case 8:
			v = append(v, 0) // a byte after the record
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Value: v})
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.PathTemplate, o.IncludeMetadata = mustTemplate(t, "{topic}"), false
	o.Format, o.ParquetCodec = formatParquet, "zstd"
	sink := newSink(o, sdk.Env{Key: "orders_s3", Logger: sdktest.Env(t).Logger, Metrics: sdk.DiscardMetrics})
	block := definition.Topics{Pattern: `^orders$`, Schema: "avro", AvroSchemaJSON: smallAvro, BatchLength: 50, PollInterval: "20ms", DeadLetterTopic: "orders.dlq"}
	tr := status.New(string(sdk.KindSink), "orders_s3", nil)
	stop := runLoop(t, b, []definition.Topics{block}, sink, tr)
	sdktest.WaitFor(t, time.Minute, "two dead letters", func() bool { return tr.Snapshot().Counters.DeadLetters >= 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dead := deadLetters(t, b.Addr(), "orders.dlq", 2, func(h map[string]string, _ []byte) string {
		return h[deadletter.HeaderOffset] + " " + h[deadletter.HeaderError]
	})
	want := "3 Avro payload: field note: the Avro binary ends too early\n8 Avro payload: 1 bytes follow the Avro record"
	if got := strings.Join(dead, "\n"); got != want {
		t.Fatalf("dead letters:\n%s\nwant\n%s", got, want)
	}
	var ids []string
	for _, tb := range parquetObjects(t, srv, "") {
		for _, r := range tb.rows {
			ids = append(ids, r[0])
		}
	}
	if got := strings.Join(ids, ","); got != "0,1,2,4,5,6,7,9,10,11" {
		t.Fatalf("ids in the bucket: %s", got)
	}
}

// FuzzParquetAvroRow walks arbitrary bytes as records of everyAvroType:
// no panic, and every row it accepts is one the Parquet writer takes
// (levels and columns consistent with the schema) after its serialized
// round trip.
func FuzzParquetAvroRow(f *testing.F) {
	for _, v := range everyAvroValues() {
		b := avroEncode(f, everyAvroType, v)
		f.Add(b)
		f.Add(b[:len(b)/2])
	}
	o := defaultOptions()
	o.Format, o.ParquetCodec, o.IncludeMetadata = formatParquet, "none", true
	base, err := newPQLayout(&o)
	if err != nil {
		f.Fatal(err)
	}
	l, err := newAvroLayout(base, &o, everyAvroType)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		var r pqRow
		rec := sdk.Record{Topic: "t", Payload: payload, Schema: sdk.SchemaAvro}
		if _, err := l.row(&r, &rec); err != nil {
			return
		}
		row, _, err := readRow(appendRow(nil, r.row), 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		w := parquet.NewWriter(io.Discard, l.schema)
		if _, err := w.WriteRows([]parquet.Row{row}); err != nil {
			t.Fatalf("the writer refuses the row of %x: %v", payload, err)
		}
		if err := w.Close(); err != nil {
			t.Fatalf("the writer refuses the row of %x: %v", payload, err)
		}
	})
}
