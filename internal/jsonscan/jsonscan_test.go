package jsonscan

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

var cases = []string{
	``, ` `, `{}`, `[]`, `{"a":1}`, ` {"a" : [1, 2.5, -3e10, true, false, null, "x\n\u00e9\"\\/"]} `,
	`{"a":1,}`, `[1,]`, `{"a"}`, `{"a":}`, `{1:2}`, `01`, `-`, `-0`, `1.`, `1e`, `.5`, `"abc`, `"a\x"`,
	`"\u12G4"`, "\"a\tb\"", "\"\xff\xfe\"", "\"caf\xc3\xa9 \xe2\x98\x83 0123456789\"", `tru`, `true false`,
	`{"a":1}x`, `[` + strings.Repeat(`[`, 20000) + `]`,
	strings.Repeat(`[`, MaxDepth) + strings.Repeat(`]`, MaxDepth), strings.Repeat(`[`, MaxDepth+1) + strings.Repeat(`]`, MaxDepth+1),
}

func check(t *testing.T, in []byte) {
	t.Helper()
	if got, want := Valid(in), json.Valid(in); got != want {
		t.Fatalf("Valid(%.40q) = %v, json.Valid says %v", in, got, want)
	}
	want := json.Valid(in) && utf8.Valid(in)
	if got := ValidUTF8(in); got != want {
		t.Fatalf("ValidUTF8(%.40q) = %v, want %v", in, got, want)
	}
	out, ok := AppendCompact([]byte("p"), in)
	if ok != want {
		t.Fatalf("AppendCompact(%.40q) ok = %v, want %v", in, ok, want)
	}
	if !ok && string(out) != "p" {
		t.Fatalf("AppendCompact(%.40q) wrote %q on failure", in, out)
	}
	if ok {
		var ref bytes.Buffer
		_ = json.Compact(&ref, in)
		if string(out) != "p"+ref.String() {
			t.Fatalf("AppendCompact(%.40q) = %s, want %s", in, out[1:], ref.Bytes())
		}
		i, ok := SkipValue(in, SkipSpace(in, 0))
		if !ok || SkipSpace(in, i) != len(in) {
			t.Fatalf("SkipValue(%.40q) = %d, %v", in, i, ok)
		}
	}
	if s := AppendBytesString(nil, in); len(s) != StringLen(in) || !json.Valid(s) || !utf8.Valid(s) {
		t.Fatalf("AppendBytesString(%.40q) = %q, StringLen %d", in, s, StringLen(in))
	}
}

func TestScannerMatchesEncodingJSON(t *testing.T) {
	for _, c := range cases {
		check(t, []byte(c))
	}
}

func FuzzScanner(f *testing.F) {
	for _, c := range cases {
		if len(c) < 1000 {
			f.Add([]byte(c))
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) { check(t, b) })
}

// A word is plain ASCII unless a byte of it is a control character, '"',
// '\\' or not ASCII.
func TestPlainASCIIWord(t *testing.T) {
	for b := 0; b < 256; b++ {
		for pos := 0; pos < 8; pos++ {
			w := []byte("abcdefgh")
			w[pos] = byte(b)
			var x uint64
			for i := 7; i >= 0; i-- {
				x = x<<8 | uint64(w[i])
			}
			want := b < 0x20 || b == '"' || b == '\\' || b >= 0x80
			if got := !plainASCIIWord(x); got != want {
				t.Fatalf("byte %#x at %d: %v", b, pos, got)
			}
		}
	}
}
