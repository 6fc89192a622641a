package postgressource

import (
	"encoding/json"
	"math/rand/v2"
	"testing"
)

func TestAppendValueEdges(t *testing.T) {
	e := &encoder{}
	arr := func(elem valueKind, delim byte) *pgType {
		return &pgType{kind: kindArray, elem: &pgType{kind: elem}, delim: delim}
	}
	cases := []struct {
		typ  *pgType
		in   string
		want string
	}{
		{&pgType{kind: kindString}, "a\x01b\xffc\u2028", `"a\u0001b\ufffdc\u2028"`}, // the S3 sink's escaping, encoding/json's
		{&pgType{kind: kindInt}, "12x", `"12x"`},
		{&pgType{kind: kindFloat}, "-Infinity", `"-Infinity"`},
		{&pgType{kind: kindFloat}, "1e+30", `1e+30`},
		{&pgType{kind: kindNumeric}, "-0.000", `-0.000`},
		{&pgType{kind: kindBool}, "x", `"x"`},
		{&pgType{kind: kindBytea}, `\xzz`, `"\\xzz"`},
		{&pgType{kind: kindBytea}, `\x`, `""`},
		{&pgType{kind: kindTimestampTZ}, "0044-03-15 12:00:00+00 BC", `"0044-03-15 12:00:00+00 BC"`},
		{&pgType{kind: kindTimestampTZ}, "2024-01-02 03:04:05+05:30", `"2024-01-01T21:34:05Z"`},
		{&pgType{kind: kindTimestamp}, "2024-01-02 03:04:05", `"2024-01-02T03:04:05Z"`},
		{&pgType{kind: kindTimestamp}, "-infinity", `"-infinity"`},
		{&pgType{kind: kindTimestampTZ}, "2024-01-01 10:00:00.12345\x16+00", `"2024-01-01 10:00:00.12345\u0016+00"`},
		{&pgType{kind: kindTimestamp}, "2024-01-01\"10:00:00", `"2024-01-01\"10:00:00"`},
		{arr(kindInt, ','), "[0:1]={1,2}", `[1,2]`},
		{arr(kindString, ';'), "{(1,1),(0,0);(2,2),(1,1)}", `["(1,1),(0,0)","(2,2),(1,1)"]`},
		{arr(kindString, ','), `{"a\\b",nUlL,""}`, `["a\\b",null,""]`},
		{arr(kindInt, ','), "{{1},{2}", `"{{1},{2}"`}, // malformed: the text form
		{arr(kindInt, ','), "{}", `[]`},
	}
	for _, c := range cases {
		got := string(e.appendValue(nil, c.typ, []byte(c.in)))
		if got != c.want {
			t.Errorf("%q: got %s, want %s", c.in, got, c.want)
		}
		if !json.Valid([]byte(got)) {
			t.Errorf("%q: invalid JSON %s", c.in, got)
		}
	}
}

// Malformed pgoutput tuple messages are errors, never panics, and any
// text value of any kind encodes to valid JSON.
func TestMalformedInputNoPanic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var c change
	valid := []byte{'I', 0, 0, 0, 1, 'N', 0, 2, 't', 0, 0, 0, 1, '7', 'n'}
	if err := readChange(valid, &c); err != nil || len(c.new.cols) != 2 || string(c.new.cols[0].data) != "7" {
		t.Fatalf("valid insert: %v %+v", err, c)
	}
	e := &encoder{}
	kinds := []*pgType{{kind: kindString}, {kind: kindBool}, {kind: kindInt}, {kind: kindFloat}, {kind: kindNumeric},
		{kind: kindJSON}, {kind: kindBytea}, {kind: kindTimestampTZ}, {kind: kindTimestamp},
		{kind: kindArray, elem: &pgType{kind: kindInt}, delim: ','}}
	const alphabet = "IUDNKOtnub{}\",\\x0 \x00\x01\xff19-:"
	for i := 0; i < 20000; i++ {
		b := make([]byte, rng.IntN(40))
		for j := range b {
			b[j] = alphabet[rng.IntN(len(alphabet))]
		}
		if i%3 == 0 && len(b) > 0 {
			b[0] = "IUD"[rng.IntN(3)]
		}
		_ = readChange(b, &c)
		for _, k := range kinds {
			if k.kind == kindJSON {
				continue // embedded as sent by the server, which sends valid JSON
			}
			if out := e.appendValue(nil, k, b); !json.Valid(out) {
				t.Fatalf("kind %d, input %q: invalid JSON %s", k.kind, b, out)
			}
		}
	}
}
