package confgen

import (
	"strconv"
	"strings"
)

// Arrays of tables (a schema's "type": "array" whose items are objects):
// problems name an element by its index, as in columns[2].type, while the
// generated SchemaSpec describes every element once, as columns[].type.

// instanceKey joins the path of a JSON pointer into doc as a key, writing
// the index of an array element as [n]: /columns/2/type is columns[2].type.
func instanceKey(doc map[string]any, path []string) string {
	var b strings.Builder
	var cur any = doc
	for _, p := range path {
		if l, ok := cur.([]any); ok {
			b.WriteString("[" + p + "]")
			if i, err := strconv.Atoi(p); err == nil && i >= 0 && i < len(l) {
				cur = l[i]
			} else {
				cur = nil
			}
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(p)
		m, _ := cur.(map[string]any)
		cur = m[p]
	}
	return b.String()
}

// ElementKey returns key with every array index [n] written as [], the form
// the generated SchemaSpec uses: columns[2].type is columns[].type.
func ElementKey(key string) string {
	if !strings.Contains(key, "[") {
		return key
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(key, '[')
		if i < 0 {
			break
		}
		j := i + 1
		for j < len(key) && key[j] >= '0' && key[j] <= '9' {
			j++
		}
		if j == i+1 || j >= len(key) || key[j] != ']' {
			b.WriteString(key[:i+1])
			key = key[i+1:]
			continue
		}
		b.WriteString(key[:i] + "[]")
		key = key[j+1:]
	}
	return b.String() + key
}

// info returns the KeyInfo of key, falling back to its element form.
func (s *SchemaSpec) info(key string) KeyInfo {
	if k, ok := s.Keys[key]; ok {
		return k
	}
	return s.Keys[ElementKey(key)]
}

// known returns the keys allowed in the table at key, falling back to its
// element form.
func (s *SchemaSpec) known(key string) ([]string, bool) {
	if k, ok := s.Known[key]; ok {
		return k, true
	}
	k, ok := s.Known[ElementKey(key)]
	return k, ok
}

// indexOrder orders two keys in the same array by their element index
// (columns[2].x before columns[10].a); ok is false when they are not in
// different elements of one array.
func indexOrder(a, b string) (less, ok bool) {
	for {
		i := strings.IndexByte(a, '[')
		if i < 0 || i >= len(b) || a[:i+1] != b[:i+1] {
			return false, false
		}
		na, ra, okA := index(a[i+1:])
		nb, rb, okB := index(b[i+1:])
		if !okA || !okB {
			return false, false
		}
		if na != nb {
			return na < nb, true
		}
		a, b = ra, rb
	}
}

// index reads "n]" at the start of s.
func index(s string) (n int, rest string, ok bool) {
	j := strings.IndexByte(s, ']')
	if j <= 0 {
		return 0, "", false
	}
	n, err := strconv.Atoi(s[:j])
	return n, s[j+1:], err == nil
}
