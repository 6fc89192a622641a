package jsonscan

import (
	"bytes"
	"encoding/json"
)

// Lookup returns the raw JSON value at path in the object b: path[0] is a
// key of the top-level object, path[1] a key of the object found there,
// and so on. It scans only as far as the value, skipping the others
// without decoding them. found is false when a key is missing, a value on
// the way is not an object, or b is not valid JSON before the value. Of a
// key written twice, the first counts.
func Lookup(b []byte, path []string) (raw []byte, found bool) {
	i := SkipSpace(b, 0)
	for _, key := range path {
		if i >= len(b) || b[i] != '{' {
			return nil, false
		}
		start, end, ok := member(b, i, key)
		if !ok {
			return nil, false
		}
		raw, i = b[start:end], start
	}
	return raw, len(path) > 0
}

// member finds key in the object at b[i] and returns where its value
// starts and ends.
func member(b []byte, i int, key string) (int, int, bool) {
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return 0, 0, false
	}
	for {
		ks := i
		ke, ok := SkipString(b, i)
		if !ok {
			return 0, 0, false
		}
		i = SkipSpace(b, ke)
		if i >= len(b) || b[i] != ':' {
			return 0, 0, false
		}
		vs := SkipSpace(b, i+1)
		ve, ok := SkipValue(b, vs)
		if !ok {
			return 0, 0, false
		}
		if keyIs(b[ks:ke], key) {
			return vs, ve, true
		}
		i = SkipSpace(b, ve)
		if i >= len(b) || b[i] != ',' {
			return 0, 0, false
		}
		i = SkipSpace(b, i+1)
	}
}

// keyIs reports whether the quoted JSON string q spells key.
func keyIs(q []byte, key string) bool {
	body := q[1 : len(q)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return string(body) == key
	}
	var s string
	return json.Unmarshal(q, &s) == nil && s == key
}

// AppendUnquoted appends the text of the JSON string raw (quotes included),
// escapes resolved; false when raw is not a valid JSON string.
func AppendUnquoted(dst, raw []byte) ([]byte, bool) {
	if len(raw) < 2 || raw[0] != '"' || raw[len(raw)-1] != '"' {
		return dst, false
	}
	if body := raw[1 : len(raw)-1]; bytes.IndexByte(body, '\\') < 0 {
		return append(dst, body...), true
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return dst, false
	}
	return append(dst, s...), true
}
