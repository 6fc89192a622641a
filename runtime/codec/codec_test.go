package codec

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/hamba/avro/v2"
)

const orderSchema = `{"type":"record","name":"Order","fields":[
 {"name":"id","type":"long"},
 {"name":"tenant","type":"string"},
 {"name":"total","type":"double"},
 {"name":"note","type":["null","string"],"default":null},
 {"name":"tags","type":{"type":"array","items":"string"}},
 {"name":"status","type":{"type":"enum","name":"Status","symbols":["NEW","PAID"]}},
 {"name":"any","type":["int","string"]}
]}`

func TestJSONRoundTrip(t *testing.T) {
	c, err := New(Options{Schema: "json"})
	if err != nil {
		t.Fatal(err)
	}
	v, err := c.Decode([]byte(`{"a":12345678901234567890,"b":[1,2]}`))
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.Encode(v)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != `{"a":12345678901234567890,"b":[1,2]}` {
		t.Fatalf("round trip = %s (big numbers must survive)", b)
	}
	for _, bad := range []string{`{"a":`, `{} {}`, `nope`} {
		if _, err := c.Decode([]byte(bad)); err == nil || !strings.Contains(err.Error(), "not valid JSON") {
			t.Errorf("Decode(%q) error = %v", bad, err)
		}
		if _, err := c.Wire([]byte(bad)); err == nil {
			t.Errorf("Wire(%q) accepted invalid JSON", bad)
		}
	}
	if w, err := c.Wire([]byte(`{"x":1}`)); err != nil || string(w) != `{"x":1}` {
		t.Fatalf("Wire = %s, %v", w, err)
	}
}

func TestTextAndBytes(t *testing.T) {
	tc, _ := New(Options{Schema: "text"})
	if _, err := tc.Decode([]byte{0xff, 0xfe}); err == nil {
		t.Fatal("text accepted invalid UTF-8")
	}
	if v, _ := tc.Decode([]byte("héllo")); v != "héllo" {
		t.Fatalf("text value = %v", v)
	}
	for _, s := range []string{"raw", "proto", "flatbuffer"} {
		c, err := New(Options{Schema: s})
		if err != nil {
			t.Fatal(err)
		}
		in := []byte{0, 1, 2, 0xff}
		w, err := c.Wire(in)
		if err != nil || !reflect.DeepEqual(w, in) {
			t.Fatalf("%s Wire = %v, %v", s, w, err)
		}
		v, _ := c.Decode(in)
		if e, _ := c.Encode(v); !reflect.DeepEqual(e, in) {
			t.Fatalf("%s Encode(Decode) = %v", s, e)
		}
	}
}

func TestBadOptions(t *testing.T) {
	cases := map[string]Options{
		`"xml" is not one of`:                {Schema: "xml"},
		"needs avro_schema_json":             {Schema: "avro"},
		"not both":                           {Schema: "avro", AvroSchemaJSON: orderSchema, AvroSchemaPath: "x.avsc"},
		"apply only to":                      {Schema: "json", AvroSchemaJSON: orderSchema},
		"avro_schema_json: not a valid Avro": {Schema: "avro", AvroSchemaJSON: `{"type":"record"}`},
		`avro_schema_path "missing.avsc"`:    {Schema: "avro", AvroSchemaPath: "missing.avsc", BaseDir: t.TempDir()},
	}
	for want, o := range cases {
		if _, err := New(o); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("New(%+v) error = %v, want it to contain %q", o, err, want)
		}
	}
}

func TestAvroFromJSON(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "order.avsc"), []byte(orderSchema), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := New(Options{Schema: "avro", AvroSchemaPath: "order.avsc", BaseDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	in := []byte(`{"id":7,"tenant":"eu","total":42.5,"tags":["a"],"status":"PAID","any":"x"}`)
	w, err := c.Wire(in)
	if err != nil {
		t.Fatal(err)
	}
	var back map[string]any
	if err := avro.Unmarshal(avro.MustParse(orderSchema), w, &back); err != nil {
		t.Fatal(err)
	}
	if back["id"] != int64(7) || back["tenant"] != "eu" || back["total"] != 42.5 || back["note"] != nil || back["status"] != "PAID" {
		t.Fatalf("decoded = %#v", back)
	}
	// Avro binary passes through unchanged and decodes for routing.
	w2, err := c.Wire(w)
	if err != nil || string(w2) != string(w) {
		t.Fatalf("binary Wire = %v, %v", w2, err)
	}
	v, err := c.Decode(w)
	if err != nil || v.(map[string]any)["tenant"] != "eu" {
		t.Fatalf("binary Decode = %v, %v", v, err)
	}
	for _, bad := range []string{
		`{"id":1.5,"tenant":"eu","total":1,"tags":[],"status":"NEW","any":1}`,
		`{"id":1,"tenant":"eu","total":1,"tags":[],"status":"OLD","any":1}`,
		`{"tenant":"eu","total":1,"tags":[],"status":"NEW","any":1}`,
		`{"id":1,"tenant":"eu","total":1,"tags":[],"status":"NEW","any":true}`,
	} {
		if _, err := c.Wire([]byte(bad)); err == nil {
			t.Errorf("Wire(%s) accepted a value the schema rejects", bad)
		}
	}
	if _, err := c.Wire([]byte{0xff, 0xff, 0xff}); err == nil {
		t.Error("Wire accepted garbage as Avro binary")
	}
}
