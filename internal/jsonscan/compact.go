package jsonscan

import "bytes"

// AppendCompact appends src with insignificant whitespace removed, what
// encoding/json.Compact writes, and reports whether src is exactly one
// valid JSON value in valid UTF-8. It checks and copies in one pass of the
// scanner. On false, dst is returned at its original length.
func AppendCompact(dst, src []byte) ([]byte, bool) {
	s := scanner{b: src, utf: true, emit: true, dst: dst}
	i, ok := s.value(s.space(src, 0), 0)
	if !ok || s.space(src, i) != len(src) {
		return dst, false
	}
	return append(s.dst, src[s.from:]...), true
}

// AppendStripped appends src, which must be a valid JSON value (checked
// by Valid before), without the whitespace between its tokens: what
// AppendCompact writes, without checking the grammar again. It copies runs
// of bytes as they are and finds each string's end with bytes.IndexByte.
// On invalid input it writes some bytes of src and does not fail.
func AppendStripped(dst, src []byte) []byte {
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

// stripStop[b] is true for the bytes AppendStripped stops at between
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
