package postgressource

import (
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pglogrepl"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// pgoutput messages (protocol version 1) built by hand for the seeds.

func fzStr(b []byte, s string) []byte { return append(append(b, s...), 0) }

// fzRelation is a Relation message for public.t with one column per type.
func fzRelation(id uint32) []byte {
	cols := []struct {
		name string
		oid  uint32
		key  bool
	}{
		{"id", 20, true}, {"name", 25, false}, {"amount", 1700, false}, {"doc", 3802, false},
		{"raw", 17, false}, {"at", 1184, false}, {"ok", 16, false}, {"f", 701, false},
		{"tags", 1009, false}, {"d", 1082, false}, {"u", 2950, false}, {"j", 114, false},
	}
	b := []byte{'R'}
	b = binary.BigEndian.AppendUint32(b, id)
	b = fzStr(b, "public")
	b = fzStr(b, "t")
	b = append(b, 'd')
	b = binary.BigEndian.AppendUint16(b, uint16(len(cols)))
	for _, c := range cols {
		flag := byte(0)
		if c.key {
			flag = 1
		}
		b = append(b, flag)
		b = fzStr(b, c.name)
		b = binary.BigEndian.AppendUint32(b, c.oid)
		b = binary.BigEndian.AppendUint32(b, 0xffffffff)
	}
	return b
}

func fzBegin() []byte {
	b := []byte{'B'}
	b = binary.BigEndian.AppendUint64(b, 0x16B3748)
	b = binary.BigEndian.AppendUint64(b, 778_000_000_000_000)
	return binary.BigEndian.AppendUint32(b, 740)
}

// fzTuple encodes TupleData; nil is NULL, "\x00u" is an unchanged TOAST.
func fzTuple(vals ...any) []byte {
	b := binary.BigEndian.AppendUint16(nil, uint16(len(vals)))
	for _, v := range vals {
		switch v := v.(type) {
		case nil:
			b = append(b, 'n')
		case byte:
			b = append(b, v)
		case string:
			b = append(b, 't')
			b = binary.BigEndian.AppendUint32(b, uint32(len(v)))
			b = append(b, v...)
		}
	}
	return b
}

var fzRow = []any{"42", "Zoë \"quoted\"\n", "12345678901234567890.000001", `{"a":[1,2,{"b":null}]}`, `\x00ff10`,
	"2024-01-01 10:00:00.123456+00", "t", "NaN", `{a,"b c",NULL}`, "2024-02-29", "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11", `{"x": 1}`}

func fzChange(kind byte, rel uint32, parts ...[]byte) []byte {
	b := binary.BigEndian.AppendUint32([]byte{kind}, rel)
	for _, p := range parts {
		b = append(b, p...)
	}
	return b
}

// FuzzPgoutputDecode runs the CDC decoder on a Relation message (fuzzed
// from a valid one) followed by an arbitrary message. The decoder must not
// panic (it recovers, so the zero-copy reader is also fuzzed directly) and
// every record it emits must be valid JSON, with a valid JSON key.
func FuzzPgoutputDecode(f *testing.F) {
	rel := fzRelation(16385)
	row := fzTuple(fzRow...)
	f.Add(rel, fzChange('I', 16385, []byte{'N'}, row))
	f.Add(rel, fzChange('U', 16385, []byte{'O'}, row, []byte{'N'}, fzTuple("42", nil, "1", "{}", nil, nil, "f", "-Infinity", "{}", nil, nil, "null")))
	f.Add(rel, fzChange('U', 16385, []byte{'K'}, fzTuple("41"), []byte{'N'}, fzTuple(append([]any{"42", byte('u')}, fzRow[2:]...)...)))
	f.Add(rel, fzChange('D', 16385, []byte{'K'}, fzTuple("42")))
	f.Add(rel, fzChange('D', 16385, []byte{'O'}, row))
	f.Add(rel, append(binary.BigEndian.AppendUint32([]byte{'T'}, 1), append([]byte{0}, binary.BigEndian.AppendUint32(nil, 16385)...)...))
	f.Add(rel, fzChange('I', 16385, []byte{'N'}, fzTuple("1", "\xff\xfe not utf-8")))
	f.Add(rel, fzChange('I', 16385, []byte{'N'}, fzTuple("1")[:3]))
	f.Add(rel, fzChange('I', 99, []byte{'N'}, row))
	f.Add(fzRelation(7)[:9], []byte{'I'})
	f.Fuzz(func(t *testing.T, relMsg, msg []byte) {
		if fzHugeTruncate(relMsg) || fzHugeTruncate(msg) {
			// pglogrepl.Parse allocates the declared relation count of a
			// Truncate message before reading it (gigabytes for a corrupt
			// one); a known upstream limit, not the decoder's.
			return
		}
		// The zero-copy reader on its own, without the decoder's recover.
		var c change
		_ = readChange(msg, &c)

		s, err := newSource(fuzzConfig(true),
			sdk.Env{Key: "fuzz", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: sdk.DiscardMetrics})
		if err != nil {
			t.Fatal(err)
		}
		d := &decoder{s: s, rels: map[uint32]*relation{}}
		// handle recovers from panics in pglogrepl.Parse (truncated
		// messages) and returns them as errors: an error is a fine answer.
		if err := d.handle(1, relMsg); err != nil {
			return
		}
		if err := d.handle(2, fzBegin()); err != nil {
			t.Fatalf("begin: %v", err)
		}
		if err := d.handle(3, msg); err != nil {
			if strings.Contains(err.Error(), "runtime error") && len(msg) > 0 && (msg[0] == 'I' || msg[0] == 'U' || msg[0] == 'D') {
				t.Fatalf("the tuple decoder or encoder panicked: %v", err)
			}
			return
		}
		if !fzPlausible(relMsg, msg) {
			// Values PostgreSQL would never send for the column's type
			// (numbers, booleans and json are embedded as the server
			// wrote them); the output is not checked.
			return
		}
		for _, m := range d.msgs {
			if !json.Valid(m.Payload) {
				t.Fatalf("payload is not JSON: %q", m.Payload)
			}
			if m.Key != nil && !json.Valid(m.Key) {
				t.Fatalf("key is not JSON: %q", m.Key)
			}
		}
	})
}

// TestFuzzSeedsDecode makes sure the fuzz seeds reach the record encoder:
// the insert seed decodes into one record keyed by id.
func TestFuzzSeedsDecode(t *testing.T) {
	s, err := newSource(fuzzConfig(false),
		sdk.Env{Key: "fuzz", Logger: slog.New(slog.NewTextHandler(io.Discard, nil)), Metrics: sdk.DiscardMetrics})
	if err != nil {
		t.Fatal(err)
	}
	d := &decoder{s: s, rels: map[uint32]*relation{}}
	for i, m := range [][]byte{fzRelation(16385), fzBegin(), fzChange('I', 16385, []byte{'N'}, fzTuple(fzRow...))} {
		if err := d.handle(1, m); err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
	}
	if len(d.msgs) != 1 || string(d.msgs[0].Key) != `{"id":42}` || !json.Valid(d.msgs[0].Payload) {
		t.Fatalf("got %d records: %q key %q", len(d.msgs), d.msgs, d.msgs[0].Key)
	}
	t.Logf("%s", d.msgs[0].Payload)
}

// fzHugeTruncate reports a Truncate message declaring more relations than
// it has bytes for.
func fzHugeTruncate(m []byte) bool {
	return len(m) >= 5 && m[0] == 'T' && int64(binary.BigEndian.Uint32(m[1:])) > int64(len(m))
}

// fzPlausible says whether every text value of msg's tuples is one the
// server could send for its column's type, for the types whose text the
// encoder embeds unquoted.
func fzPlausible(relMsg, msg []byte) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false // pglogrepl.Parse panics on some truncated messages
		}
	}()
	m, err := pglogrepl.Parse(relMsg)
	if err != nil {
		return false
	}
	rel, ok := m.(*pglogrepl.RelationMessage)
	if !ok {
		return false
	}
	var c change
	if len(msg) == 0 || (msg[0] != 'I' && msg[0] != 'U' && msg[0] != 'D') {
		return true
	}
	if readChange(msg, &c) != nil {
		return true
	}
	for _, tp := range []tuple{c.new, c.old} {
		for i, col := range tp.cols {
			if i >= len(rel.Columns) {
				break
			}
			if col.kind == 'b' {
				return false // binary values are not requested
			}
			if col.kind != 't' {
				continue
			}
			v := string(col.data)
			if !utf8.Valid(col.data) {
				return false // the server sends UTF-8 (client_encoding UTF8)
			}
			switch oid := rel.Columns[i].DataType; oid {
			case 20, 21, 23, 26, 700, 701, 1700:
				if v == "NaN" || v == "Infinity" || v == "-Infinity" {
					continue
				}
				if _, err := strconv.ParseFloat(v, 64); err != nil || !json.Valid(col.data) {
					return false
				}
			case 16:
				if v != "t" && v != "f" {
					return false
				}
			case 114, 3802, 199, 3807:
				if !json.Valid(col.data) {
					return false
				}
			case 17, 1082, 1083, 1114, 1184, 1266, 1186, 2950:
				// Fast paths copy the server's text: printable ASCII,
				// no quotes or backslashes (bytea is hex).
				for _, ch := range col.data {
					if ch < 0x20 || ch > 0x7e || ch == '"' || ch == '\\' && oid != 17 {
						return false
					}
				}
			}
		}
	}
	return true
}

// fuzzConfig is a CDC configuration for a server that is never reached.
func fuzzConfig(metadata bool) postgressourceconfig.Config {
	c := postgressourceconfig.Default()
	c.ConnectionString, c.Tables, c.BatchSize = confkit.NewSecret("postgres://u@127.0.0.1:1/db"), []string{"public.t"}, 10
	c.ReplicationSlot, c.Publication, c.IncludeMetadata = "s", "p", metadata
	return c
}
