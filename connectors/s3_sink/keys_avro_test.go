package s3sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// orderAvro has fields before, around and after the ones path_template
// reads, so the walk skips an array and a map to reach them.
const orderAvro = `{"type": "record", "name": "Order", "fields": [
	{"name": "id", "type": "long"},
	{"name": "tags", "type": {"type": "array", "items": "string"}},
	{"name": "region", "type": ["null", "string"]},
	{"name": "customer", "type": ["null", {"type": "record", "name": "Customer", "fields": [
		{"name": "region", "type": "string"},
		{"name": "tier", "type": {"type": "enum", "name": "Tier", "symbols": ["gold", "silver"]}},
		{"name": "vip", "type": "boolean"},
		{"name": "score", "type": "double"},
		{"name": "n", "type": "int"}]}]},
	{"name": "attrs", "type": {"type": "map", "values": "string"}},
	{"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 9, "scale": 2}}]}`

func order(id int64, region any, customer any) map[string]any {
	return map[string]any{"id": id, "tags": []any{"a", "b"}, "region": region, "customer": customer,
		"attrs": map[string]any{"k": "v"}, "price": []byte{0x01}}
}

func customer(region, tier string, vip bool, score float64, n int) map[string]any {
	return map[string]any{"region": region, "tier": tier, "vip": vip, "score": score, "n": n}
}

// fieldSink is a sink with path_template tmpl (not opened) that was given
// topics.
func fieldSink(t *testing.T, tmpl string, topics []sdk.TopicSchema) (*Sink, error) {
	t.Helper()
	o := defaultOptions()
	o.Bucket, o.Region = "b", "eu-west-1"
	o.PathTemplate = mustTemplate(t, tmpl)
	s := newSink(o, sinkEnv("fld", sdk.DiscardMetrics))
	return s, s.SetTopics(topics)
}

// TestAvroFieldPlaceholders: {field:PATH} on an Avro topic reads the
// value from the Avro binary with the topic's schema: strings as they are,
// enums, numbers and booleans as their text; null, missing, a record, an
// array, a map or a payload that does not decode give
// default_partition_value. A JSON topic of the same sink still reads JSON.
func TestAvroFieldPlaceholders(t *testing.T) {
	tmpl := "{field:region}/{field:customer.region}/{field:customer.tier}/{field:customer.vip}/{field:customer.score}/{field:customer.n}/{field:id}/{field:attrs}/{field:customer}/{field:tags}"
	s, err := fieldSink(t, tmpl, []sdk.TopicSchema{
		{Block: 0, Topic: "orders", Schema: sdk.SchemaAvro, AvroSchema: orderAvro},
		{Block: 1, Topic: "^json\\.", Pattern: true, Schema: sdk.SchemaJSON},
	})
	if err != nil {
		t.Fatal(err)
	}
	full := avroEncode(t, orderAvro, order(42, map[string]any{"string": "eu west"}, map[string]any{"Customer": customer("us-east", "silver", true, 12.5, -3)}))
	nulls := avroEncode(t, orderAvro, order(-7, nil, nil))
	for _, c := range []struct {
		name string
		rec  sdk.Record
		want string
	}{
		{"every type", sdk.Record{Topic: "orders", Schema: sdk.SchemaAvro, Payload: full}, "eu_west/us-east/silver/true/12.5/-3/42/none/none/none/"},
		{"nulls", sdk.Record{Topic: "orders", Schema: sdk.SchemaAvro, Payload: nulls}, "none/none/none/none/none/none/-7/none/none/none/"},
		{"cut short", sdk.Record{Topic: "orders", Schema: sdk.SchemaAvro, Payload: full[:len(full)-3]}, "none/none/none/none/none/none/none/none/none/none/"},
		{"json topic", sdk.Record{Topic: "json.a", Schema: sdk.SchemaJSON, Payload: []byte(`{"region":"r","customer":{"n":1},"id":2}`)}, "r/none/none/none/none/1/2/none/none/none/"},
	} {
		l := s.layout
		l.missing = "none"
		for range 2 { // the walk's scratch is reused
			got, err := l.appendDir(nil, &c.rec, time.Now())
			if err != nil || string(got) != c.want {
				t.Errorf("%s: %q, %v; want %q", c.name, got, err, c.want)
			}
		}
	}
}

// TestFieldPlaceholderTopics: SetTopics refuses a {field:...} on a topic
// that is neither JSON nor Avro, and a path its Avro schema lacks, naming
// the block, the path and what is allowed.
func TestFieldPlaceholderTopics(t *testing.T) {
	avroBlock := sdk.TopicSchema{Block: 0, Topic: "orders", Schema: sdk.SchemaAvro, AvroSchema: orderAvro}
	for _, c := range []struct {
		tmpl   string
		topics []sdk.TopicSchema
		want   string
	}{
		{"{topic}/{field:region}", []sdk.TopicSchema{avroBlock, {Block: 1, Topic: "bin", Schema: sdk.SchemaRaw}},
			`topics[1] (bin) has schema = "raw": path_template '{topic}/{field:region}' reads {field:region} from the payload, which only a json or avro topic has; give the topic schema = "json" or "avro", or take {field:...} out of path_template`},
		{"{field:region}", []sdk.TopicSchema{{Block: 0, Topic: "^logs\\.", Pattern: true, Schema: sdk.SchemaText}},
			`topics[0] (^logs\.) has schema = "text": path_template '{field:region}' reads {field:region}`},
		{"{field:regoin}", []sdk.TopicSchema{avroBlock},
			`topics[0] (orders): path_template's {field:regoin}: the Avro record has no field regoin (the record has: id, tags, region, customer, attrs, price)`},
		{"{field:customer.regoin}", []sdk.TopicSchema{avroBlock},
			`topics[0] (orders): path_template's {field:customer.regoin}: the Avro record has no field customer.regoin (customer has: customer.region, customer.tier, customer.vip, customer.score, customer.n)`},
		{"{field:attrs.k}", []sdk.TopicSchema{avroBlock},
			`path_template's {field:attrs.k}: the Avro field attrs is a map, and a path goes through records' fields only`},
		{"{field:id.x}", []sdk.TopicSchema{avroBlock},
			`path_template's {field:id.x}: the Avro field id is a value with no fields`},
		{"{field:price}", []sdk.TopicSchema{avroBlock},
			`path_template's {field:price}: the Avro field price is a decimal, whose bytes are no text`},
		{"{field:a}", []sdk.TopicSchema{{Topic: "s", Schema: sdk.SchemaAvro, AvroSchema: `"string"`}},
			`topics[0] (s): the Avro schema is a string, not a record: path_template's {field:...} needs a record`},
	} {
		_, err := fieldSink(t, c.tmpl, c.topics)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v\nwant %s", c.tmpl, err, c.want)
		}
	}
	// Without {field:...}, any schema goes; so does a JSON topic with it.
	if _, err := fieldSink(t, "{topic}/{key}", []sdk.TopicSchema{{Topic: "bin", Schema: sdk.SchemaRaw}}); err != nil {
		t.Error(err)
	}
	if _, err := fieldSink(t, "{field:region}", []sdk.TopicSchema{{Topic: "j", Schema: sdk.SchemaJSON}, avroBlock}); err != nil {
		t.Error(err)
	}
}

// TestFieldPlaceholderValidate: pico-connectors validate refuses a
// {field:...} on a raw topic and a path the Avro schema lacks, naming the
// file, the block, its topic and path_template; a good path passes.
func TestFieldPlaceholderValidate(t *testing.T) {
	write, validate := validateDir(t)
	write("connectors/order.avsc", orderAvro)
	def := func(tmpl, more string) string {
		return lakeAvroDef + more + `
[plugin_config]
bucket = "picomq-archive"
region = "eu-west-1"
path_template = "` + tmpl + `"
`
	}
	write("connectors/lake.toml", def("dt={yyyy}-{MM}-{dd}/region={field:customer.region}", "\n[[topics]]\ntopic = \"clicks\"\n"))
	if code, out := validate(); code != 0 {
		t.Fatalf("Avro and JSON topics with a good path: exit %d\n%s", code, out)
	}
	for _, c := range []struct{ tmpl, more, want string }{
		{"{topic}/{field:region}", "\n[[topics]]\ntopic = \"bin\"\nschema = \"raw\"\n",
			`connectors/lake.toml: topics[1] (bin) has schema = "raw": path_template '{topic}/{field:region}' reads {field:region} from the payload, which only a json or avro topic has`},
		{"{field:customer.regoin}", "",
			`connectors/lake.toml: topics[0] (orders): path_template's {field:customer.regoin}: the Avro record has no field customer.regoin (customer has: customer.region, customer.tier`},
	} {
		write("connectors/lake.toml", def(c.tmpl, c.more))
		code, out := validate()
		if code != 1 || !strings.Contains(out, c.want) {
			t.Errorf("%s: exit %d\n%s\nwant %s", c.tmpl, code, out, c.want)
		}
	}
}

// TestAvroFieldLayout: Avro records laid out by {field:region} and the
// nested {field:customer.region} land, as Parquet rows, in the directory
// of their values (default_partition_value for a null), each once.
func TestAvroFieldLayout(t *testing.T) {
	srv := s3test.Start(t)
	regions := []any{map[string]any{"string": "eu"}, map[string]any{"string": "us"}, nil}
	custs := []string{"north", "south"}
	var values []map[string]any
	want := map[string]int{}
	for i := range 60 {
		r, c := regions[i%3], custs[(i/2)%2]
		values = append(values, order(int64(i), r, map[string]any{"Customer": customer(c, "gold", false, 1, i)}))
		rs := "__unknown"
		if r != nil {
			rs = r.(map[string]any)["string"].(string)
		}
		want["fl/t/region="+rs+"/c="+c+"/"]++
	}
	s := openAvro(t, srv, "fl", orderAvro, func(o *options) {
		o.PathTemplate = mustTemplate(t, "{topic}/region={field:region}/c={field:customer.region}")
		o.MaxOpenFiles = 3 // six directories: groups are cut on the way
	})
	feed(t, s, avroRecords(t, orderAvro, values), 7)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	objs, err := srv.List(context.Background(), "fl/")
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	seen := map[string]bool{}
	for _, o := range objs {
		dir := o.Key[:strings.LastIndexByte(o.Key, '/')+1]
		_, _, rows := readAvroParquet(t, srv.MustGet(t, o.Key))
		for _, r := range rows {
			id := r["id"]
			if seen[id] {
				t.Errorf("id %s twice", id)
			}
			seen[id] = true
			var c struct{ Region string }
			if err := json.Unmarshal([]byte(r["customer"]), &c); err != nil {
				t.Fatalf("customer %s: %v", r["customer"], err)
			}
			reg := strings.Trim(r["region"], `"`)
			if reg == "null" {
				reg = "__unknown"
			}
			if wantDir := "fl/t/region=" + reg + "/c=" + c.Region + "/"; dir != wantDir {
				t.Errorf("id %s (region %s, customer %s) in %s", id, reg, c.Region, o.Key)
			}
			got[dir]++
		}
	}
	if len(seen) != 60 || len(got) != 6 {
		t.Fatalf("%d records in %d directories, want 60 in 6: %v", len(seen), len(got), got)
	}
	for d, n := range want {
		if got[d] != n {
			t.Errorf("%s: %d records, want %d", d, got[d], n)
		}
	}
}

// TestAvroFieldLoop: through the sink loop, which hands the plugin its
// [[topics]] blocks with the Avro schema, Avro records produced to the
// broker land, as JSON lines, under their region and customer's region.
func TestAvroFieldLoop(t *testing.T) {
	if testing.Short() {
		t.Skip("runs librdkafka through the sink loop; skipped with -short")
	}
	srv, b, cl := dlqSetup(t)
	sch := avro.MustParse(orderAvro)
	var recs []*kgo.Record
	want := map[string]string{}
	for i := range 30 {
		reg := []string{"eu", "us", "ap"}[i%3]
		c := []string{"north", "south"}[i%2]
		v := order(int64(i), map[string]any{"string": reg}, map[string]any{"Customer": customer(c, "gold", false, 1, i)})
		p, err := avro.Marshal(sch, v)
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "orders", Value: p})
		want[base64.StdEncoding.EncodeToString(p)] = "loop/orders/" + reg + "/" + c + "/"
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = srv.Bucket, s3test.Region, srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey = srv.AccessKey, srv.SecretKey
	o.Prefix, o.PathTemplate = "loop", mustTemplate(t, "{topic}/{field:region}/{field:customer.region}")
	o.FlushInterval = 200 * time.Millisecond // the group is cut and uploaded, so the loop commits
	sink := newSink(o, sdk.Env{Key: "orders_s3", Logger: sdktest.Env(t).Logger, Metrics: sdk.DiscardMetrics})
	block := definition.Topics{Pattern: `^orders$`, Schema: "avro", AvroSchemaJSON: orderAvro, BatchLength: 50, PollInterval: "20ms"}
	tr := status.New(string(sdk.KindSink), "orders_s3", nil)
	stop := runLoop(t, b, []definition.Topics{block}, sink, tr)
	sdktest.WaitFor(t, time.Minute, "30 records committed", func() bool { return tr.Snapshot().Counters.Committed >= 30 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	objs, err := srv.List(context.Background(), "loop/")
	if err != nil {
		t.Fatal(err)
	}
	var bad []string
	n := 0
	for _, obj := range objs {
		dir := obj.Key[:strings.LastIndexByte(obj.Key, '/')+1]
		sc := bufio.NewScanner(bytes.NewReader(srv.MustGet(t, obj.Key)))
		for sc.Scan() {
			var line struct{ Payload string }
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
				t.Fatal(err)
			}
			n++
			if want[line.Payload] != dir {
				bad = append(bad, obj.Key+": "+line.Payload)
			}
		}
	}
	sort.Strings(bad)
	if n != 30 || len(bad) > 0 {
		t.Fatalf("%d records, misplaced: %v", n, bad)
	}
}

// BenchmarkAvroFieldDir: rendering the directory
// {topic}/region={field:region}/c={field:customer.region} of a ~1 KiB
// record, from its Avro binary (the whole record is walked) and from the
// same record as JSON (jsonscan.Lookup scans up to the path).
func BenchmarkAvroFieldDir(b *testing.B) {
	tmpl := "{topic}/region={field:region}/c={field:customer.region}"
	s, err := fieldSink(&testing.T{}, tmpl, []sdk.TopicSchema{
		{Block: 0, Topic: "orders", Schema: sdk.SchemaAvro, AvroSchema: orderAvro},
		{Block: 1, Topic: "json", Schema: sdk.SchemaJSON},
	})
	if err != nil {
		b.Fatal(err)
	}
	v := order(7, map[string]any{"string": "eu"}, map[string]any{"Customer": customer("north", "gold", true, 1.5, 3)})
	tags := make([]any, 40)
	for i := range tags {
		tags[i] = strings.Repeat("t", 20)
	}
	v["tags"] = tags
	avroRec := sdk.Record{Topic: "orders", Schema: sdk.SchemaAvro, Payload: avroEncode(b, orderAvro, v)}
	v["price"], v["region"], v["customer"] = "0.01", "eu", customer("north", "gold", true, 1.5, 3)
	js, err := json.Marshal(v)
	if err != nil {
		b.Fatal(err)
	}
	jsonRec := sdk.Record{Topic: "json", Schema: sdk.SchemaJSON, Payload: js}
	for _, c := range []struct {
		name string
		rec  *sdk.Record
	}{{"avro", &avroRec}, {"json", &jsonRec}} {
		b.Run(c.name, func(b *testing.B) {
			var dst []byte
			b.ReportAllocs()
			b.SetBytes(int64(len(c.rec.Payload)))
			for b.Loop() {
				dst, _ = s.layout.appendDir(dst[:0], c.rec, c.rec.Timestamp)
			}
			if !strings.Contains(string(dst), "region=eu/c=north/") {
				b.Fatalf("%s: %s", c.name, dst)
			}
		})
	}
}
