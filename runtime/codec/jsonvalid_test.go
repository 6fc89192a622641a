package codec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

var jsonCases = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, ` {"a" : [1, 2.5, -3e10, true, false, null, "x\n\u00e9\"\\/"]} `,
	`{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{1:2}`, `01`, `-`, `-0`, `1.`, `1.e5`, `1e`, `1e+`, `1E-7`,
	`.5`, `+1`, `"abc`, `"a\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"\xff\xfe\"", `tru`, `true false`,
	`nul`, `nullx`, `[[[[]]]]`, `{"a":{"b":{"c":[]}}}`, `"\/"`, `[1 2]`, `{"a":1 "b":2}`, "\u00a0{}",
	`{"a":1}x`, `123`, `-0.0e-0`, `[-]`, `{"":""}`, `[` + strings.Repeat(`[`, 20000) + `]`,
	strings.Repeat(`[`, 10000) + strings.Repeat(`]`, 10000), strings.Repeat(`[`, 10001) + strings.Repeat(`]`, 10001),
}

func TestValidJSONMatchesEncodingJSON(t *testing.T) {
	for _, c := range jsonCases {
		if got, want := jsonscan.Valid([]byte(c)), json.Valid([]byte(c)); got != want {
			t.Errorf("jsonscan.Valid(%.40q) = %v, json.Valid says %v", c, got, want)
		}
	}
	// Every byte value at every position of the words str scans 8 at a
	// time, and at the byte-by-byte tail.
	for pos := 0; pos < 19; pos++ {
		for c := 0; c < 256; c++ {
			for _, tail := range []string{`"`, `x"`, `\n"`, `\"`} {
				in := []byte(`"` + strings.Repeat("a", pos) + string(rune(0)) + strings.Repeat("b", 9) + tail)
				in[1+pos] = byte(c)
				if got, want := jsonscan.Valid(in), json.Valid(in); got != want {
					t.Fatalf("jsonscan.Valid(%q) = %v, json.Valid says %v", in, got, want)
				}
			}
		}
	}
	if ValidSinkPayload(sdk.SchemaJSON, []byte(`{"a"`)) || !ValidSinkPayload(sdk.SchemaJSON, []byte(`{"a":1}`)) {
		t.Fatal("ValidSinkPayload does not use the JSON rule")
	}
}

func FuzzValidJSON(f *testing.F) {
	for _, c := range jsonCases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if got, want := jsonscan.Valid(b), json.Valid(b); got != want {
			t.Fatalf("jsonscan.Valid(%q) = %v, json.Valid says %v", b, got, want)
		}
	})
}

// benchPayload is a record like the S3 bench's: an object with a few
// fields and a padding string, 256 bytes.
var benchPayload = []byte(`{"id":123456,"ts":"2026-11-29T22:27:23.711Z","tenant":"acme","amount":12.50,"tags":["a","b","c"],"nested":{"ok":true,"n":null},"pad":"` + strings.Repeat("abcdefghij", 11) + `"}`)

// BenchmarkValidSinkPayload compares the sink's JSON check (jsonscan.Valid)
// with encoding/json.Valid, which it replaced, on the same payload.
func BenchmarkValidSinkPayload(b *testing.B) {
	b.Run("encoding-json-Valid", func(b *testing.B) {
		b.SetBytes(int64(len(benchPayload)))
		for b.Loop() {
			if !json.Valid(benchPayload) {
				b.Fatal("invalid")
			}
		}
	})
	b.Run("validJSON", func(b *testing.B) {
		b.SetBytes(int64(len(benchPayload)))
		for b.Loop() {
			if !jsonscan.Valid(benchPayload) {
				b.Fatal("invalid")
			}
		}
	})
}
