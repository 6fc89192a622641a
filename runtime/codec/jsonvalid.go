package codec

import "encoding/binary"

// validJSON reports whether b is one JSON value with optional surrounding
// whitespace, accepting exactly what encoding/json.Valid accepts (strings
// are not checked for valid UTF-8, as there; nesting is capped at the same
// depth). It does not allocate and runs several times faster than
// json.Valid, which walks a state machine one byte at a time.
func validJSON(b []byte) bool {
	i := skipSpace(b, 0)
	i, ok := value(b, i, 0)
	if !ok {
		return false
	}
	return skipSpace(b, i) == len(b)
}

// maxDepth is encoding/json's nesting limit.
const maxDepth = 10000

func skipSpace(b []byte, i int) int {
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

// value parses one value starting at b[i] (no leading space) and returns
// the index after it.
func value(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return i, false
	}
	switch c := b[i]; {
	case c == '"':
		return str(b, i+1)
	case c == '{':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == '}' {
			return i + 1, true
		}
		for {
			if i >= len(b) || b[i] != '"' {
				return i, false
			}
			var ok bool
			if i, ok = str(b, i+1); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, false
			}
			if i, ok = value(b, skipSpace(b, i+1), depth+1); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case '}':
				return i + 1, true
			default:
				return i, false
			}
		}
	case c == '[':
		if depth >= maxDepth {
			return i, false
		}
		i = skipSpace(b, i+1)
		if i < len(b) && b[i] == ']' {
			return i + 1, true
		}
		for {
			var ok bool
			if i, ok = value(b, i, depth+1); !ok {
				return i, false
			}
			i = skipSpace(b, i)
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case ',':
				i = skipSpace(b, i+1)
			case ']':
				return i + 1, true
			default:
				return i, false
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

func literal(b []byte, i int, lit string) (int, bool) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, false
	}
	return i + len(lit), true
}

// plain marks the bytes a string may hold as they are: not '"', not '\\'
// and not a control character.
var plain = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
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

// str parses a string body from b[i] (after the opening quote).
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
		c := b[i]
		switch {
		case c == '"':
			return i + 1, true
		case c == '\\':
			i++
			if i >= len(b) {
				return i, false
			}
			switch b[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(b)-i < 5 {
					return i, false
				}
				for _, h := range b[i+1 : i+5] {
					if !isHex(h) {
						return i, false
					}
				}
				i += 5
			default:
				return i, false
			}
		case c < 0x20:
			return i, false
		default:
			i++
		}
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
