package s3sink

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

var ts = time.Date(2026, 9, 3, 21, 15, 4, 118_999_999, time.UTC)

func rec(schema sdk.Schema, payload string) sdk.Record {
	return sdk.Record{Topic: "orders.eu", Partition: 0, Offset: 1042, Timestamp: ts,
		Key: []byte("user-1"), Payload: []byte(payload), Schema: schema}
}

func formatOne(o options, r sdk.Record) string {
	f := newFormatter(&o)
	return string(f.finish(f.appendRecord(nil, &r, true, metaTail(r.Topic, r.Partition))))
}

func TestSpecExampleLine(t *testing.T) {
	o := defaultOptions()
	got := formatOne(o, rec(sdk.SchemaJSON, `{"id":7,"total":42.5}`))
	want := `{"offset":1042,"timestamp":"2026-09-03T21:15:04.118Z","topic":"orders.eu","partition":0,"key":"dXNlci0x","payload":{"id":7,"total":42.5}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
}

func TestPayloadConversion(t *testing.T) {
	o := defaultOptions()
	o.IncludeMetadata = false
	cases := []struct {
		schema  sdk.Schema
		payload string
		want    string
	}{
		// json: the parsed document, compacted, not re-serialised
		{sdk.SchemaJSON, " {\"a\" : [1, 2.50, -3e+2, true, false, null],\n \"b\":\"x y\\u00e9\\n\"} ", `{"a":[1,2.50,-3e+2,true,false,null],"b":"x y\u00e9\n"}`},
		{sdk.SchemaJSON, `"just a string"`, `"just a string"`},
		{sdk.SchemaJSON, `12`, `12`},
		{sdk.SchemaJSON, ``, `null`},
		{sdk.SchemaJSON, "{\"a\":\"\xff\"}", `"eyJhIjoi/yJ9"`}, // not UTF-8
		// text and proto: a string
		{sdk.SchemaText, "héllo \"w\"\n\t\x01</>", `"héllo \"w\"\n\t\u0001</>"`},
		{sdk.SchemaText, "", `""`},
		{sdk.SchemaProto, "\x08\x96\x01", `"\b` + "\ufffd" + `\u0001"`},
		// raw: the document if valid JSON, otherwise base64
		{sdk.SchemaRaw, `{"k": 1}`, `{"k":1}`},
		{sdk.SchemaRaw, `not json`, `"bm90IGpzb24="`},
		{sdk.SchemaRaw, ``, `""`},
		{sdk.SchemaRaw, `{"a":1} {"b":2}`, `"eyJhIjoxfSB7ImIiOjJ9"`},
		// flatbuffer, avro: base64
		{sdk.SchemaFlatBuffer, `{"k":1}`, `"eyJrIjoxfQ=="`},
		{sdk.SchemaAvro, "\x02\x06abc", `"AgZhYmM="`},
	}
	// \b is not among the short escapes appendString uses; fix the want.
	cases[7].want = `"\u0008` + `\ufffd` + `\u0001"`
	for _, c := range cases {
		got := formatOne(o, rec(c.schema, c.payload))
		want := `{"payload":` + c.want + "}\n"
		if got != want {
			t.Errorf("%s %q:\n got  %s want %s", c.schema, c.payload, got, want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%s %q: output is not valid JSON: %s", c.schema, c.payload, got)
		}
	}
}

func TestTextMatchesEncodingJSON(t *testing.T) {
	// Every string the formatter writes decodes back to what encoding/json
	// decodes from its own encoding (with invalid UTF-8 replaced).
	inputs := []string{"plain", "quote\" back\\ slash", "ctl\x00\x1f\x7f", "uni ☃ \u2028 \u2029 😀", "bad \xff\xfe utf8", "<html>&"}
	for _, in := range inputs {
		out := jsonscan.AppendString(nil, in)
		var got string
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatalf("%q: %s is not valid JSON: %v", in, out, err)
		}
		ref, _ := json.Marshal(in)
		var want string
		_ = json.Unmarshal(ref, &want)
		if got != want {
			t.Errorf("%q: decodes to %q, encoding/json round trip gives %q", in, got, want)
		}
	}
}

func TestCompactJSONAgreesWithEncodingJSON(t *testing.T) {
	inputs := []string{
		`{}`, `[]`, `[ ]`, `{ }`, `0`, `-0`, `1.5e10`, `"\u12ab"`, `"\/"`, ` true `, `null`,
		`{"a":{"b":[{"c":"d"}]}}`, "\t[1,\n2]\r\n",
		`01`, `1.`, `.5`, `-`, `+1`, `1e`, `[1,]`, `{"a":1,}`, `{"a"}`, `{a:1}`, `"\x"`, `"\u12g4"`, "\"a\x01\"",
		`tru`, `nul`, `[`, `{"a":`, `"abc`, "\"\xff\"", `[1 2]`, `{"a":1 "b":2}`, ``, ` `, `1 2`,
		// escapes around the end of jsonscan.AppendStripped's byte loop (16 bytes)
		`[ "a\\" , "b\"" ]`, `{"k": "0123456789abcd\\" , "v" : 1}`, `{"k": "0123456789abcde\"x y\\\" z" , "v" : 1}`,
		`[ "0123456789abcdefghijklmnop\\\\" , 2 ]`, `"0123456789abcdefghijklmn\" \\"`,
	}
	for _, in := range inputs {
		got, ok := jsonscan.AppendCompact([]byte("prefix"), []byte(in))
		var ref bytes.Buffer
		err := json.Compact(&ref, []byte(in))
		if in == "\"\xff\"" {
			// encoding/json passes invalid UTF-8 through; the sink refuses
			// it, so the file it writes is always valid UTF-8.
			if ok {
				t.Errorf("%q accepted", in)
			}
			continue
		}
		if ok != (err == nil) {
			t.Errorf("%q: valid=%v, encoding/json says %v", in, ok, err)
			continue
		}
		if ok && string(got) != "prefix"+ref.String() {
			t.Errorf("%q: got %s want %s", in, got, ref.String())
		}
		if stripped := jsonscan.AppendStripped([]byte("prefix"), []byte(in)); ok && string(stripped) != "prefix"+ref.String() {
			t.Errorf("%q: jsonscan.AppendStripped wrote %s, want %s", in, stripped, ref.String())
		}
		if !ok && string(got) != "prefix" {
			t.Errorf("%q: dst not restored: %q", in, got)
		}
	}
	deep := strings.Repeat("[", jsonscan.MaxDepth+1) + strings.Repeat("]", jsonscan.MaxDepth+1)
	if _, ok := jsonscan.AppendCompact(nil, []byte(deep)); ok {
		t.Error("nesting beyond jsonscan.MaxDepth accepted")
	}
}

func TestMetadataAndHeaders(t *testing.T) {
	o := defaultOptions()
	o.IncludeHeaders = true
	r := rec(sdk.SchemaJSON, `{"id":7}`)
	r.Partition = 3
	r.Topic = `odd"topic`
	r.Headers = []sdk.Header{{Key: "trace", Value: []byte("abc")}, {Key: "bin", Value: []byte{0xff, 0x00}},
		{Key: "dup", Value: []byte("first")}, {Key: "dup", Value: []byte("second")}}
	got := formatOne(o, r)
	want := `{"offset":1042,"timestamp":"2026-09-03T21:15:04.118Z","topic":"odd\"topic","partition":3,"key":"dXNlci0x","headers":{"trace":"abc","bin":"/wA=","dup":["first","second"]},"payload":{"id":7}}` + "\n"
	if got != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}

	// No key: no "key" field. An empty key is a key.
	r.Key = nil
	r.Headers = nil
	if got := formatOne(o, r); strings.Contains(got, `"key"`) || strings.Contains(got, `"headers"`) {
		t.Fatalf("nil key or no headers still written: %s", got)
	}
	r.Key = []byte{}
	if got := formatOne(o, r); !strings.Contains(got, `"key":""`) {
		t.Fatalf("empty key missing: %s", got)
	}

	// Headers without metadata.
	o.IncludeMetadata = false
	r.Headers = []sdk.Header{{Key: "h", Value: []byte("v")}}
	if got, want := formatOne(o, r), `{"headers":{"h":"v"},"payload":{"id":7}}`+"\n"; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
	// include_headers off: never written.
	o.IncludeHeaders = false
	if got, want := formatOne(o, r), `{"payload":{"id":7}}`+"\n"; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

// TestManyHeadersGrouped: past smallHeaders, where names are indexed in a
// map, headers are grouped as for a few: names in order of first
// appearance, a repeated name's values in record order.
func TestManyHeadersGrouped(t *testing.T) {
	for _, n := range []int{smallHeaders, smallHeaders + 1, 1000} {
		hs := manyHeaders(n)
		hs = append(hs, hs[n-1], hs[0]) // a name that was once and one that was twice
		var names []string
		values := map[string][]string{}
		for _, h := range hs {
			if values[h.Key] == nil {
				names = append(names, h.Key)
			}
			values[h.Key] = append(values[h.Key], strconv.Quote(string(h.Value)))
		}
		var want strings.Builder
		want.WriteString(`"headers":{`)
		for i, name := range names {
			if i > 0 {
				want.WriteByte(',')
			}
			fmt.Fprintf(&want, "%q:", name)
			if vs := values[name]; len(vs) == 1 {
				want.WriteString(vs[0])
			} else {
				want.WriteString("[" + strings.Join(vs, ",") + "]")
			}
		}
		want.WriteByte('}')
		if got := string(appendHeaders(nil, hs)); got != want.String() {
			t.Errorf("%d headers:\ngot  %.300s\nwant %.300s", len(hs), got, want.String())
		}
	}
}

func TestTimestamps(t *testing.T) {
	f := newFormatter(&options{})
	cases := map[time.Time]string{
		ts: "2026-09-03T21:15:04.118Z",
		time.Date(2026, 9, 3, 23, 15, 4, 5_000_000, time.FixedZone("CEST", 2*3600)): "2026-09-03T21:15:04.005Z",
		time.Date(2026, 9, 3, 21, 15, 5, 0, time.UTC):                               "2026-09-03T21:15:05.000Z",
		time.Date(1969, 12, 31, 23, 59, 59, 999_000_000, time.UTC):                  "1969-12-31T23:59:59.999Z",
		time.UnixMilli(0): "1970-01-01T00:00:00.000Z",
	}
	for in, want := range cases {
		if got := string(f.appendTimestamp(nil, in)); got != want {
			t.Errorf("%v: got %s want %s", in, got, want)
		}
	}
}

func TestFormats(t *testing.T) {
	recs := []sdk.Record{rec(sdk.SchemaJSON, `{"n":1}`), rec(sdk.SchemaJSON, `{"n":2}`), rec(sdk.SchemaRaw, "raw\x00")}
	recs[1].Offset = 1043
	recs[2].Offset = 1044
	build := func(fm format) string {
		o := defaultOptions()
		o.Format = fm
		o.IncludeMetadata = false
		f := newFormatter(&o)
		var b []byte
		for i := range recs {
			b = f.appendRecord(b, &recs[i], i == 0, nil)
		}
		return string(f.finish(b))
	}
	if got, want := build(formatJSONLines), "{\"payload\":{\"n\":1}}\n{\"payload\":{\"n\":2}}\n{\"payload\":\"cmF3AA==\"}\n"; got != want {
		t.Errorf("json_lines: %q", got)
	}
	if got, want := build(formatJSONArray), `[{"payload":{"n":1}},{"payload":{"n":2}},{"payload":"cmF3AA=="}]`; got != want {
		t.Errorf("json_array: %q", got)
	}
	if got, want := build(formatRaw), "{\"n\":1}{\"n\":2}raw\x00"; got != want {
		t.Errorf("raw: %q", got)
	}
	for fm, ext := range map[format]string{formatJSONLines: "jsonl", formatJSONArray: "json", formatRaw: "bin"} {
		if fm.ext() != ext {
			t.Errorf("ext %d = %s", fm, fm.ext())
		}
	}
}

func TestEstimateIsAnUpperBound(t *testing.T) {
	o := defaultOptions()
	o.IncludeHeaders = true
	payloads := []string{"", "x", strings.Repeat("\x01", 100), `{"a":"` + strings.Repeat("é", 50) + `"}`, strings.Repeat("\xff", 99)}
	for _, fm := range []format{formatJSONLines, formatJSONArray, formatRaw} {
		o.Format = fm
		f := newFormatter(&o)
		for _, schema := range []sdk.Schema{sdk.SchemaJSON, sdk.SchemaText, sdk.SchemaProto, sdk.SchemaRaw, sdk.SchemaAvro, sdk.SchemaFlatBuffer} {
			for _, p := range payloads {
				r := rec(schema, p)
				r.Topic = "t\x01\x02.é"
				r.Headers = []sdk.Header{{Key: "\x01\x02", Value: []byte(p)}}
				n := len(f.appendRecord(nil, &r, true, metaTail(r.Topic, 0))) + 1
				if e := f.estimate(&r, len(r.Topic)) + 1; n > e {
					t.Errorf("%v %s %q: wrote %d, estimate %d", fm, schema, p, n, e)
				}
			}
		}
	}
}

func TestNoAllocationsPerRecord(t *testing.T) {
	o := defaultOptions()
	o.IncludeHeaders = true
	f := newFormatter(&o)
	r := rec(sdk.SchemaJSON, `{"id":7,"name":"x","tags":["a","b"],"total":42.5}`)
	r.Headers = []sdk.Header{{Key: "k", Value: []byte("v")}}
	tail := metaTail(r.Topic, 0)
	buf := make([]byte, 0, 1<<20)
	allocs := testing.AllocsPerRun(1000, func() {
		buf = f.appendRecord(buf[:0], &r, false, tail)
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per record", allocs)
	}
}
