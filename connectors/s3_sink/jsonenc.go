package s3sink

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"unicode/utf8"
	"unsafe"
)

// This file holds the append-style JSON primitives the formatter is built
// from. None of them allocates beyond growing dst.

const hexDigits = "0123456789abcdef"

// safeASCII[b] is true for ASCII bytes that go into a JSON string as they
// are.
var safeASCII = func() (t [utf8.RuneSelf]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// appendString appends s as a JSON string. Invalid UTF-8 becomes U+FFFD,
// as encoding/json does; U+2028 and U+2029 are escaped so the output is
// also valid JavaScript. HTML characters are not escaped.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if safeASCII[b] {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// stringLen returns the exact length appendBytesString writes for b.
func stringLen(b []byte) int {
	n := 2
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			switch {
			case safeASCII[c]:
				n++
			case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t':
				n += 2
			default:
				n += 6
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1, r == '\u2028', r == '\u2029':
			n += 6
		default:
			n += size
		}
		i += size
	}
	return n
}

// appendBytesString appends b as a JSON string, like appendString.
func appendBytesString(dst, b []byte) []byte {
	if len(b) == 0 {
		return append(dst, '"', '"')
	}
	// The string is only read while b is alive and unchanged.
	return appendString(dst, unsafe.String(unsafe.SliceData(b), len(b)))
}

// appendBase64 appends b as a JSON string holding its standard base64.
func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}

// maxDepth bounds the nesting appendCompactJSON accepts, as encoding/json
// does, so hostile input cannot exhaust the stack.
const maxDepth = 10000

// appendCompactJSON appends src with insignificant whitespace removed, and
// reports whether src is exactly one valid JSON value. On false, dst is
// returned at its original length.
func appendCompactJSON(dst, src []byte) ([]byte, bool) {
	orig := len(dst)
	c := compactor{src: src, dst: dst}
	c.skipSpace()
	if !c.value(0) {
		return dst[:orig], false
	}
	c.skipSpace()
	if c.i != len(src) {
		return c.dst[:orig], false
	}
	return c.dst, true
}

// appendStripped appends src, which must be a valid JSON value (the
// runtime checked it: sdk.Record), without the whitespace between its
// tokens: what appendCompactJSON writes, without checking the grammar
// again. It copies runs of bytes as they are and finds each string's end
// with bytes.IndexByte, 2-7x faster than appendCompactJSON
// (BenchmarkCompactValid). On invalid input it writes some bytes of src
// and does not fail.
func appendStripped(dst, src []byte) []byte {
	start := 0
	for i := 0; i < len(src); i++ {
		if !stripStop[src[i]] {
			continue
		}
		if src[i] == '"' {
			i = closingQuote(src, i)
		} else {
			dst = append(dst, src[start:i]...)
			start = i + 1
		}
	}
	return append(dst, src[start:]...)
}

// stripStop[b] is true for the bytes appendStripped stops at between
// tokens: JSON's four whitespace bytes and the quote that opens a string.
var stripStop = [256]bool{' ': true, '\t': true, '\n': true, '\r': true, '"': true}

// closingQuote returns the index of the quote that ends the string opened
// at src[open], or len(src) when none does.
func closingQuote(src []byte, open int) int {
	// Most strings are short: a byte loop finds their end before a call
	// of IndexByte would have begun.
	i := open + 1
	for end := min(len(src), i+16); i < end; i++ {
		switch src[i] {
		case '"':
			return i
		case '\\':
			i++
		}
	}
	if i >= len(src) {
		return len(src)
	}
	for {
		q := bytes.IndexByte(src[i:], '"')
		if q < 0 {
			return len(src)
		}
		i += q
		// The quote is escaped if an odd number of backslashes runs up
		// to it.
		b := i - 1
		for b > open && src[b] == '\\' {
			b--
		}
		if (i-1-b)%2 == 0 {
			return i
		}
		i++
	}
}

type compactor struct {
	src []byte
	dst []byte
	i   int
}

func (c *compactor) skipSpace() {
	if c.i < len(c.src) && c.src[c.i] > ' ' {
		return
	}
	for c.i < len(c.src) {
		switch c.src[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *compactor) value(depth int) bool {
	if c.i >= len(c.src) {
		return false
	}
	switch b := c.src[c.i]; {
	case b == '{':
		return c.object(depth + 1)
	case b == '[':
		return c.array(depth + 1)
	case b == '"':
		return c.str()
	case b == '-' || (b >= '0' && b <= '9'):
		return c.number()
	case b == 't':
		return c.literal("true")
	case b == 'f':
		return c.literal("false")
	case b == 'n':
		return c.literal("null")
	}
	return false
}

func (c *compactor) literal(lit string) bool {
	if len(c.src)-c.i < len(lit) || string(c.src[c.i:c.i+len(lit)]) != lit {
		return false
	}
	c.dst = append(c.dst, lit...)
	c.i += len(lit)
	return true
}

func (c *compactor) object(depth int) bool {
	if depth > maxDepth {
		return false
	}
	c.dst = append(c.dst, '{')
	c.i++
	c.skipSpace()
	if c.i < len(c.src) && c.src[c.i] == '}' {
		c.dst = append(c.dst, '}')
		c.i++
		return true
	}
	for {
		if c.i >= len(c.src) || c.src[c.i] != '"' || !c.str() {
			return false
		}
		c.skipSpace()
		if c.i >= len(c.src) || c.src[c.i] != ':' {
			return false
		}
		c.dst = append(c.dst, ':')
		c.i++
		c.skipSpace()
		if !c.value(depth) {
			return false
		}
		if more, ok := c.sep('}'); !more {
			return ok
		}
	}
}

func (c *compactor) array(depth int) bool {
	if depth > maxDepth {
		return false
	}
	c.dst = append(c.dst, '[')
	c.i++
	c.skipSpace()
	if c.i < len(c.src) && c.src[c.i] == ']' {
		c.dst = append(c.dst, ']')
		c.i++
		return true
	}
	for {
		if !c.value(depth) {
			return false
		}
		if more, ok := c.sep(']'); !more {
			return ok
		}
	}
}

// sep reads what follows a member or an element: a comma, when more follow,
// or close, which ends the object or array. ok is false on anything else.
func (c *compactor) sep(close byte) (more, ok bool) {
	c.skipSpace()
	if c.i >= len(c.src) {
		return false, false
	}
	switch c.src[c.i] {
	case ',':
		c.dst = append(c.dst, ',')
		c.i++
		c.skipSpace()
		return true, true
	case close:
		c.dst = append(c.dst, close)
		c.i++
		return false, true
	}
	return false, false
}

// plainStr[b] is true for bytes a JSON string token holds without a
// closer look: ASCII from 0x20 other than '"' and '\\'.
var plainStr = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// specialInWord reports whether any of the eight bytes of w is a control
// character, '"', '\\' or not ASCII. It may not report which one. A lane's
// high bit is set in (x - 0x01...) &^ x where that lane of x is 0, and in
// (w - 0x20...) &^ w where it is below 0x20; w ^ '"'... and w ^ '\\'...
// keep w's high bits, so one &^ w serves the three, and a lane whose high
// bit w has is not ASCII anyway.
func specialInWord(w uint64) bool {
	q := w ^ (ones * '"')
	b := w ^ (ones * '\\')
	return ((w-ones*0x20)|(q-ones)|(b-ones)|w)&highs != 0
}

// str copies a string token as it is, checking escapes, control
// characters and UTF-8.
func (c *compactor) str() bool {
	src := c.src
	start := c.i
	i := c.i + 1 // opening quote
	for {
		// Eight bytes at a time while none needs a closer look, then
		// byte by byte.
		for ; i+8 <= len(src); i += 8 {
			if specialInWord(binary.LittleEndian.Uint64(src[i : i+8])) {
				break
			}
		}
		for i < len(src) && plainStr[src[i]] {
			i++
		}
		if i >= len(src) {
			return false
		}
		switch b := src[i]; {
		case b == '"':
			i++
			c.dst = append(c.dst, src[start:i]...)
			c.i = i
			return true
		case b == '\\':
			i++
			if i >= len(src) {
				return false
			}
			switch src[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i++
			case 'u':
				if len(src)-i < 5 {
					return false
				}
				for _, h := range src[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 5
			default:
				return false
			}
		case b < 0x20:
			return false
		default:
			r, size := utf8.DecodeRune(src[i:])
			if r == utf8.RuneError && size == 1 {
				return false
			}
			i += size
		}
	}
}

func isHex(b byte) bool {
	return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F')
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }

func (c *compactor) number() bool {
	start := c.i
	s := c.src
	i := c.i
	if s[i] == '-' {
		i++
	}
	if i >= len(s) {
		return false
	}
	if s[i] == '0' {
		i++
	} else if s[i] >= '1' && s[i] <= '9' {
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	} else {
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if i >= len(s) || !isDigit(s[i]) {
			return false
		}
		for i < len(s) && isDigit(s[i]) {
			i++
		}
	}
	c.dst = append(c.dst, s[start:i]...)
	c.i = i
	return true
}
