// Package jsonscan is the one JSON scanner of the module, and its string
// escaper. The sink loop's payload check (Valid), the S3 sink's encoder
// (AppendCompact, AppendStripped, AppendString) and its Parquet walker
// (SkipSpace, SkipString, SkipValue), and the PostgreSQL source's values
// (AppendString) are all built on it.
//
// Every function works on byte slices, allocates nothing beyond growing
// dst, and scans strings eight bytes at a time.
package jsonscan

import (
	"encoding/binary"
	"unicode/utf8"
)

// MaxDepth is encoding/json's nesting limit, which the scanner keeps, so
// hostile input cannot exhaust the stack.
const MaxDepth = 10000

// Valid reports whether b is one JSON value with optional surrounding
// whitespace, accepting exactly what encoding/json.Valid accepts (strings
// are not checked for valid UTF-8, as there; nesting is capped at the same
// depth). It runs several times faster than json.Valid, which walks a
// state machine one byte at a time.
func Valid(b []byte) bool { return valid(b, false) }

// ValidUTF8 is Valid that also requires valid UTF-8 in every string.
func ValidUTF8(b []byte) bool { return valid(b, true) }

func valid(b []byte, utf bool) bool {
	s := scanner{b: b, utf: utf}
	i, ok := s.value(s.space(b, 0), 0)
	return ok && s.space(b, i) == len(b)
}

// scanner reads one JSON text b. With emit, it also appends b to dst
// without the whitespace between tokens, as it goes: every run of
// whitespace it skips ends a run of bytes copied as they are.
type scanner struct {
	b    []byte
	utf  bool // strings must be valid UTF-8
	emit bool
	dst  []byte
	from int // emit: b[:from] is in dst or dropped
}

// space skips the whitespace at b[i], if any, and returns the index after.
// Small enough to inline: compact JSON has no whitespace to skip.
func (s *scanner) space(b []byte, i int) int {
	if i < len(b) && b[i] > ' ' {
		return i
	}
	return s.skip(i)
}

func (s *scanner) skip(i int) int {
	j := SkipSpace(s.b, i)
	if j != i && s.emit {
		s.dst = append(s.dst, s.b[s.from:i]...)
		s.from = j
	}
	return j
}

// SkipSpace returns the index of the first byte from b[i] on that is not
// JSON whitespace.
func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// SkipValue parses the value at b[i] (no leading space), by Valid's rule,
// and returns the index after it; on false, the index where it fails.
func SkipValue(b []byte, i int) (int, bool) {
	s := scanner{b: b}
	return s.value(i, 0)
}

// SkipString parses the string whose opening quote is b[i], by Valid's
// rule, and returns the index after its closing quote; on false, the
// index where it fails.
func SkipString(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return i, false
	}
	return str(b, i+1)
}

// value parses one value starting at b[i] (no leading space) and returns
// the index after it.
func (s *scanner) value(i, depth int) (int, bool) {
	b := s.b
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return s.str(i + 1)
	case c == '{':
		if depth >= MaxDepth {
			return i, false
		}
		i = s.space(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok, more bool
			if i, ok = s.str(i + 1); !ok {
				return i, false
			}
			i = s.space(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = s.value(s.space(b, i+1), depth+1); !ok {
				return i, false
			}
			if i, more, ok = s.after(i, '}'); !more {
				return i, ok
			}
		}
	case c == '[':
		if depth >= MaxDepth {
			return i, false
		}
		i = s.space(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok, more bool
			if i, ok = s.value(i, depth+1); !ok {
				return i, false
			}
			if i, more, ok = s.after(i, ']'); !more {
				return i, ok
			}
		}
	case c == '-' || c >= '0' && c <= '9':
		return number(b, i)
	case c == 't':
		return literal(b, i, "true")
	case c == 'f':
		return literal(b, i, "false")
	case c == 'n':
		return literal(b, i, "null")
	}
	return i, false
}

// str parses the rest of a string whose opening quote is b[i-1], checking
// its UTF-8 when the scanner does.
func (s *scanner) str(i int) (int, bool) {
	if s.utf {
		return strUTF8(s.b, i)
	}
	return str(s.b, i)
}

// after reads what follows a member or an element that ends before b[i]:
// a ',' (more is true, and j is where the next one starts) or the byte
// end that closes the container (j is after it); anything else fails.
func (s *scanner) after(i int, end byte) (j int, more, ok bool) {
	b := s.b
	i = s.space(b, i)
	if i >= len(b) {
		return i, false, false
	}
	switch b[i] {
	case ',':
		return s.space(b, i+1), true, true
	case end:
		return i + 1, false, true
	}
	return i, false, false
}

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// plain marks the bytes a string may hold as they are: not '"', not '\\'
// and not a control character. plainASCII also leaves out every byte that
// is not ASCII, which the UTF-8 check looks at.
var plain, plainASCII = func() (t, a [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
		a[c] = t[c] && c < utf8.RuneSelf
	}
	return t, a
}()

// Word-at-a-time constants: a byte of 0x01 and of 0x80 in every lane.
const (
	lanes01 = 0x0101010101010101
	lanes80 = 0x8080808080808080
)

// plainWord reports whether the 8 bytes of w are all plain: no '"', no
// '\\', none below 0x20. (x - 0x01...) &^ x has a lane's high bit set where
// that lane of x is 0 (exact for the question "is any lane 0"), and
// (w - 0x20...) &^ w where a lane of w is below 0x20. x = w ^ '"'... and
// w ^ '\\'... keep w's high bits ('"' and '\\' are ASCII), so one &^ w
// serves the three.
func plainWord(w uint64) bool {
	q := w ^ (lanes01 * '"')
	s := w ^ (lanes01 * '\\')
	return ((q-lanes01)|(s-lanes01)|(w-lanes01*0x20))&^w&lanes80 == 0
}

// plainASCIIWord is plainWord that also refuses a byte that is not ASCII:
// a lane whose high bit w has.
func plainASCIIWord(w uint64) bool {
	q := w ^ (lanes01 * '"')
	s := w ^ (lanes01 * '\\')
	return ((q-lanes01)|(s-lanes01)|(w-lanes01*0x20)|w)&lanes80 == 0
}

// str parses a string body from b[i] (after the opening quote), by
// json.Valid's rule: bytes that are not ASCII are not checked. It and
// strUTF8 are two loops, not one with a flag: the flag's test in the loop
// cost the sink loop's check 10%.
func str(b []byte, i int) (int, bool) {
	for i < len(b) {
		for ; i+8 <= len(b); i += 8 {
			if !plainWord(binary.LittleEndian.Uint64(b[i : i+8])) {
				break
			}
		}
		for i < len(b) && plain[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch b[i] {
		case '"':
			return i + 1, true
		case '\\':
			var ok bool
			if i, ok = escape(b, i+1); !ok {
				return i, false
			}
		default: // a control character
			return i, false
		}
	}
	return i, false
}

// strUTF8 is str that also requires valid UTF-8.
func strUTF8(b []byte, i int) (int, bool) {
	for i < len(b) {
		for ; i+8 <= len(b); i += 8 {
			if !plainASCIIWord(binary.LittleEndian.Uint64(b[i : i+8])) {
				break
			}
		}
		for i < len(b) && plainASCII[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, true
		case c == '\\':
			var ok bool
			if i, ok = escape(b, i+1); !ok {
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return i, false
			}
			i += size
		}
	}
	return i, false
}

// escape parses the escape whose backslash is b[i-1] and returns the index
// after it.
func escape(b []byte, i int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch b[i] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		return i + 1, true
	case 'u':
		if len(b)-i < 5 {
			return i, false
		}
		for _, h := range b[i+1 : i+5] {
			if !isHex(h) {
				return i, false
			}
		}
		return i + 5, true
	}
	return i, false
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

func digits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// number parses -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
func number(b []byte, i int) (int, bool) {
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = digits(b, i+1)
	default:
		return i, false
	}
	if i < len(b) && b[i] == '.' {
		j := digits(b, i+1)
		if j == i+1 {
			return j, false
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := digits(b, i)
		if j == i {
			return j, false
		}
		i = j
	}
	return i, true
}
