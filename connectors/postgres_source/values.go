package postgressource

import (
	"encoding/base64"
	"encoding/hex"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/internal/jsonscan"
)

// valueKind says how the text form of a PostgreSQL value becomes JSON.
type valueKind uint8

const (
	kindString      valueKind = iota // JSON string of the text form
	kindBool                         // t/f → true/false
	kindInt                          // integer literal as is
	kindFloat                        // float literal; NaN and infinities as strings
	kindNumeric                      // exact decimal literal; NaN and infinities as strings
	kindJSON                         // json/jsonb embedded as is
	kindBytea                        // hex text form → base64 string
	kindTimestampTZ                  // → RFC 3339 in UTC
	kindTimestamp                    // without time zone → RFC 3339, taken as UTC
	kindArray                        // {..} → JSON array of elem values
)

// pgType is what the encoder knows of one type OID.
type pgType struct {
	kind  valueKind
	elem  *pgType // arrays
	delim byte    // arrays: element delimiter (',' except box)
}

// Built-in type OIDs (pg_type.h). Arrays are resolved through elemOf.
var builtinKinds = map[uint32]valueKind{
	16: kindBool, 17: kindBytea, 20: kindInt, 21: kindInt, 23: kindInt, 26: kindInt,
	28: kindInt, 29: kindInt, 114: kindJSON, 3802: kindJSON, 700: kindFloat, 701: kindFloat,
	1700: kindNumeric, 1114: kindTimestamp, 1184: kindTimestampTZ,
}

// builtinArrays maps an array type OID to its element type OID.
var builtinArrays = map[uint32]uint32{
	1000: 16, 1001: 17, 1002: 18, 1003: 19, 1016: 20, 1005: 21, 1007: 23, 1009: 25, 1028: 26,
	199: 114, 3807: 3802, 143: 142, 1021: 700, 1022: 701, 791: 790, 1014: 1042, 1015: 1043,
	1182: 1082, 1183: 1083, 1115: 1114, 1185: 1184, 1187: 1186, 1270: 1266, 1561: 1560,
	1563: 1562, 1231: 1700, 2951: 2950, 1041: 869, 651: 650, 1040: 829, 1011: 28, 1012: 29,
	3643: 3614, 1017: 600, 1018: 601, 1019: 602, 1027: 604, 719: 718, 629: 628,
}

// builtinType returns the type of a built-in OID, or nil when the OID is
// not one of them (domains, enums, user arrays: resolved from pg_type).
func builtinType(oid uint32) *pgType {
	if k, ok := builtinKinds[oid]; ok {
		return &pgType{kind: k}
	}
	if elem, ok := builtinArrays[oid]; ok {
		e := builtinType(elem)
		if e == nil {
			e = &pgType{kind: kindString}
		}
		return &pgType{kind: kindArray, elem: e, delim: ','}
	}
	if oid == 1020 { // box[] uses ';'
		return &pgType{kind: kindArray, elem: &pgType{kind: kindString}, delim: ';'}
	}
	if oid < 10000 {
		// Any other built-in scalar: its text form as a string.
		return &pgType{kind: kindString}
	}
	return nil
}

// encoder writes values as JSON.
type encoder struct {
	numericAsString bool
}

// appendValue appends the JSON form of the text value v of type t.
func (e *encoder) appendValue(buf []byte, t *pgType, v []byte) []byte {
	switch t.kind {
	case kindBool:
		if len(v) == 1 && v[0] == 't' {
			return append(buf, "true"...)
		}
		if len(v) == 1 && v[0] == 'f' {
			return append(buf, "false"...)
		}
	case kindInt:
		if isNumberLiteral(v) {
			return append(buf, v...)
		}
	case kindFloat:
		if isNumberLiteral(v) {
			return append(buf, v...)
		}
	case kindNumeric:
		if !e.numericAsString && isNumberLiteral(v) {
			return append(buf, v...)
		}
	case kindJSON:
		if len(v) > 0 {
			return append(buf, v...)
		}
	case kindBytea:
		if len(v) >= 2 && v[0] == '\\' && v[1] == 'x' {
			raw := make([]byte, hex.DecodedLen(len(v)-2))
			if _, err := hex.Decode(raw, v[2:]); err == nil {
				buf = append(buf, '"')
				buf = base64.StdEncoding.AppendEncode(buf, raw)
				return append(buf, '"')
			}
		}
	case kindTimestampTZ, kindTimestamp:
		if out, ok := appendTimestamp(buf, v, t.kind == kindTimestampTZ); ok {
			return out
		}
	case kindArray:
		if out, ok := e.appendArray(buf, t, v); ok {
			return out
		}
	}
	return jsonscan.AppendBytesString(buf, v)
}

// isNumberLiteral reports whether v is a valid JSON number (so NaN,
// Infinity and anything odd are written as strings instead).
func isNumberLiteral(v []byte) bool {
	i := 0
	if i < len(v) && v[i] == '-' {
		i++
	}
	if i >= len(v) {
		return false
	}
	if v[i] == '0' {
		i++
	} else if v[i] >= '1' && v[i] <= '9' {
		i = skipDigits(v, i)
	} else {
		return false
	}
	if i < len(v) && v[i] == '.' {
		start := i + 1
		if i = skipDigits(v, start); i == start {
			return false
		}
	}
	if i < len(v) && (v[i] == 'e' || v[i] == 'E') {
		i++
		if i < len(v) && (v[i] == '+' || v[i] == '-') {
			i++
		}
		start := i
		if i = skipDigits(v, start); i == start {
			return false
		}
	}
	return i == len(v)
}

// skipDigits returns the index of the first byte from v[i] on that is not
// a decimal digit.
func skipDigits(v []byte, i int) int {
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		i++
	}
	return i
}

// appendTimestamp turns the ISO text form ("2024-01-02 03:04:05.5+00",
// sessions run with TimeZone=UTC) into RFC 3339. A timestamp without time
// zone is taken to be UTC. Values RFC 3339 cannot hold (BC years, years
// past 9999, infinity) are left to the caller, which writes the text form.
func appendTimestamp(buf, v []byte, withZone bool) ([]byte, bool) {
	if len(v) < 19 || v[4] != '-' || v[10] != ' ' || v[13] != ':' {
		return buf, false
	}
	for _, c := range v {
		// The fast paths copy the text as is: only these may pass.
		if (c < '0' || c > '9') && c != '-' && c != ':' && c != '.' && c != ' ' && c != '+' {
			return buf, false
		}
	}
	if withZone && len(v) >= 22 && v[len(v)-3] == '+' && v[len(v)-2] == '0' && v[len(v)-1] == '0' {
		buf = append(buf, '"')
		buf = append(buf, v[:10]...)
		buf = append(buf, 'T')
		buf = append(buf, v[11:len(v)-3]...)
		return append(buf, 'Z', '"'), true
	}
	if !withZone {
		for _, c := range v[11:] {
			if (c < '0' || c > '9') && c != ':' && c != '.' {
				return buf, false
			}
		}
		buf = append(buf, '"')
		buf = append(buf, v[:10]...)
		buf = append(buf, 'T')
		buf = append(buf, v[11:]...)
		return append(buf, 'Z', '"'), true
	}
	// Another zone offset (a session not in UTC): parse and convert.
	for _, layout := range []string{"2006-01-02 15:04:05.999999999-07", "2006-01-02 15:04:05.999999999-07:00", "2006-01-02 15:04:05.999999999-07:00:00"} {
		if ts, err := time.Parse(layout, string(v)); err == nil {
			buf = append(buf, '"')
			buf = ts.UTC().AppendFormat(buf, time.RFC3339Nano)
			return append(buf, '"'), true
		}
	}
	return buf, false
}

// appendArray turns the text form of an array ("{1,2,NULL}",
// "{{a,b},{c,d}}", `{"x y","q\"r"}`, "[0:1]={1,2}") into nested JSON arrays.
func (e *encoder) appendArray(buf []byte, t *pgType, v []byte) ([]byte, bool) {
	return parseArray(buf, v, t.delim, func(buf, item []byte) []byte { return e.appendValue(buf, t.elem, item) })
}

// parseArray turns the text form of an array into nested JSON arrays,
// each element's value appended by item (the flat or the Debezium form).
func parseArray(buf, v []byte, delim byte, item func(buf, v []byte) []byte) ([]byte, bool) {
	if i := indexByte(v, '='); len(v) > 0 && v[0] == '[' && i > 0 {
		v = v[i+1:] // explicit bounds: the values are all we keep
	}
	start := len(buf)
	p := arrayParser{src: v, delim: delim, item: item}
	out, ok := p.parse(buf)
	if !ok || p.pos != len(v) {
		return buf[:start], false
	}
	return out, true
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

type arrayParser struct {
	src   []byte
	pos   int
	delim byte
	tmp   []byte
	item  func(buf, v []byte) []byte
}

func (p *arrayParser) parse(buf []byte) ([]byte, bool) {
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		return buf, false
	}
	p.pos++
	buf = append(buf, '[')
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return append(buf, ']'), true
	}
	for first := true; ; first = false {
		if !first {
			buf = append(buf, ',')
		}
		if p.pos >= len(p.src) {
			return buf, false
		}
		switch c := p.src[p.pos]; {
		case c == '{':
			var ok bool
			if buf, ok = p.parse(buf); !ok {
				return buf, false
			}
		case c == '"':
			p.pos++
			p.tmp = p.tmp[:0]
			for {
				if p.pos >= len(p.src) {
					return buf, false
				}
				c := p.src[p.pos]
				p.pos++
				if c == '\\' && p.pos < len(p.src) {
					p.tmp = append(p.tmp, p.src[p.pos])
					p.pos++
					continue
				}
				if c == '"' {
					break
				}
				p.tmp = append(p.tmp, c)
			}
			buf = p.item(buf, p.tmp)
		default:
			s := p.pos
			for p.pos < len(p.src) && p.src[p.pos] != p.delim && p.src[p.pos] != '}' {
				p.pos++
			}
			item := p.src[s:p.pos]
			if len(item) == 4 && strings.EqualFold(string(item), "NULL") {
				buf = append(buf, "null"...)
			} else {
				buf = p.item(buf, item)
			}
		}
		if p.pos >= len(p.src) {
			return buf, false
		}
		if p.src[p.pos] == '}' {
			p.pos++
			return append(buf, ']'), true
		}
		if p.src[p.pos] != p.delim {
			return buf, false
		}
		p.pos++
	}
}
