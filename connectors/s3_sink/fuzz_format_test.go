package s3sink

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/runtime/codec"
	"github.com/picomq/pico-connectors/sdk"
)

// FuzzCompactJSON checks the compactor against encoding/json: it accepts
// exactly the valid UTF-8 JSON values and writes what json.Compact writes,
// and so does jsonscan.AppendStripped on those.
func FuzzCompactJSON(f *testing.F) {
	for _, s := range []string{`{"a": [1, 2.5e3, "x\u00e9\n", true, null]}`, ` "str" `, `[`, `{"a":1,}`, "\"\xff\"", `-0.0E+1`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		out, ok := jsonscan.AppendCompact(nil, in)
		want := json.Valid(in) && utf8.Valid(in)
		if ok != want {
			t.Fatalf("%q: ok=%v, want %v", in, ok, want)
		}
		stripped := jsonscan.AppendStripped(nil, in) // must not panic on any input
		if ok {
			var ref bytes.Buffer
			_ = json.Compact(&ref, in)
			if !bytes.Equal(out, ref.Bytes()) {
				t.Fatalf("%q: got %s want %s", in, out, ref.Bytes())
			}
			if !bytes.Equal(stripped, ref.Bytes()) {
				t.Fatalf("%q: jsonscan.AppendStripped wrote %s, want %s", in, stripped, ref.Bytes())
			}
		}
	})
}

// FuzzFormatRecord checks that every record, whatever its bytes, formats
// to one valid UTF-8 JSON object per line, within the size estimate. A
// json payload that is not valid JSON comes as raw, as the runtime hands
// it over (sdk.Record).
func FuzzFormatRecord(f *testing.F) {
	f.Add("orders.eu", []byte("k"), []byte(`{"a":1}`), "h", []byte("v"), uint8(0))
	f.Add("t\x00", []byte(nil), []byte("\xff\xfe"), "\xff", []byte{0x80}, uint8(2))
	schemas := []sdk.Schema{sdk.SchemaJSON, sdk.SchemaText, sdk.SchemaProto, sdk.SchemaRaw, sdk.SchemaAvro, sdk.SchemaFlatBuffer, ""}
	f.Fuzz(func(t *testing.T, topic string, key, payload []byte, hk string, hv []byte, schema uint8) {
		o := defaultOptions()
		o.IncludeHeaders = true
		fm := newFormatter(&o)
		r := sdk.Record{Topic: topic, Offset: 5, Timestamp: time.Unix(1, 0), Key: key, Payload: payload,
			Headers: []sdk.Header{{Key: hk, Value: hv}}, Schema: schemas[int(schema)%len(schemas)]}
		if r.Schema == sdk.SchemaJSON && !codec.ValidSinkPayload(r.Schema, r.Payload) {
			r.Schema = sdk.SchemaRaw // as the runtime hands it over
		}
		out := fm.appendRecord(nil, &r, true, metaTail(topic, 0))
		if est := fm.estimate(&r, len(topic)); len(out) > est {
			t.Fatalf("wrote %d bytes, estimate %d", len(out), est)
		}
		if out[len(out)-1] != '\n' || !json.Valid(out[:len(out)-1]) || !utf8.Valid(out) {
			t.Fatalf("not a valid JSON line: %q", out)
		}
	})
}
