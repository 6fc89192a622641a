// Package jsonx parses JSON into a tree that keeps object key order, so the
// generator can follow a schema's property order and rewrite a schema
// without reordering it.
package jsonx

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Node is one JSON value.
type Node struct {
	// Value holds a scalar: nil, bool, json.Number or string. For objects
	// and arrays it is nil.
	Value any
	// Keys lists an object's keys in document order; Fields holds their
	// values. Both are nil for non-objects.
	Keys   []string
	Fields map[string]*Node
	// Items holds an array's elements; nil (not empty) for non-arrays.
	Items []*Node
	kind  byte // 'o', 'a' or 's'
}

// IsObject reports whether n is a JSON object.
func (n *Node) IsObject() bool { return n != nil && n.kind == 'o' }

// IsArray reports whether n is a JSON array.
func (n *Node) IsArray() bool { return n != nil && n.kind == 'a' }

// Get returns the value of an object's key, or nil.
func (n *Node) Get(key string) *Node {
	if n == nil || n.Fields == nil {
		return nil
	}
	return n.Fields[key]
}

// String returns a string scalar.
func (n *Node) String() (string, bool) {
	if n == nil {
		return "", false
	}
	s, ok := n.Value.(string)
	return s, ok && n.kind == 's'
}

// Bool returns a boolean scalar.
func (n *Node) Bool() (bool, bool) {
	if n == nil {
		return false, false
	}
	b, ok := n.Value.(bool)
	return b, ok
}

// Number returns a number scalar.
func (n *Node) Number() (json.Number, bool) {
	if n == nil {
		return "", false
	}
	x, ok := n.Value.(json.Number)
	return x, ok
}

// Set adds or replaces a key of an object; a new key goes after the key
// named after (or at the end when after is "" or absent).
func (n *Node) Set(key string, v *Node, after string) {
	if _, ok := n.Fields[key]; ok {
		n.Fields[key] = v
		return
	}
	n.Fields[key] = v
	for i, k := range n.Keys {
		if k == after {
			n.Keys = append(n.Keys[:i+1], append([]string{key}, n.Keys[i+1:]...)...)
			return
		}
	}
	n.Keys = append(n.Keys, key)
}

// NewString returns a string node.
func NewString(s string) *Node { return &Node{Value: s, kind: 's'} }

// Parse reads one JSON document. Duplicate keys are an error naming their
// JSON pointer.
func Parse(data []byte) (*Node, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	n, err := parse(dec, "")
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("unexpected data after the top-level value")
	}
	return n, nil
}

func parse(dec *json.Decoder, ptr string) (*Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, fmt.Errorf("at %q: %w", pointerOrRoot(ptr), err)
	}
	switch t := tok.(type) {
	case json.Delim:
		switch t {
		case '{':
			n := &Node{Fields: map[string]*Node{}, Keys: []string{}, kind: 'o'}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, fmt.Errorf("at %q: %w", pointerOrRoot(ptr), err)
				}
				k := kt.(string)
				child := ptr + "/" + Escape(k)
				if _, dup := n.Fields[k]; dup {
					return nil, fmt.Errorf("at %q: duplicate key %q", child, k)
				}
				v, err := parse(dec, child)
				if err != nil {
					return nil, err
				}
				n.Keys = append(n.Keys, k)
				n.Fields[k] = v
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		case '[':
			n := &Node{Items: []*Node{}, kind: 'a'}
			for i := 0; dec.More(); i++ {
				v, err := parse(dec, ptr+"/"+strconv.Itoa(i))
				if err != nil {
					return nil, err
				}
				n.Items = append(n.Items, v)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return n, nil
		}
		return nil, fmt.Errorf("at %q: unexpected %v", pointerOrRoot(ptr), t)
	case string:
		return &Node{Value: t, kind: 's'}, nil
	default:
		return &Node{Value: t}, nil
	}
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// Escape escapes a key for a JSON pointer.
func Escape(k string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(k)
}

// Interface converts n to plain Go values: map[string]any, []any, string,
// bool, nil, and json.Number.
func (n *Node) Interface() any {
	switch {
	case n == nil:
		return nil
	case n.kind == 'o':
		m := make(map[string]any, len(n.Keys))
		for _, k := range n.Keys {
			m[k] = n.Fields[k].Interface()
		}
		return m
	case n.kind == 'a':
		l := make([]any, len(n.Items))
		for i, it := range n.Items {
			l[i] = it.Interface()
		}
		return l
	}
	return n.Value
}

// Marshal writes n as indented JSON (two spaces), keys in their order,
// ending with a newline.
func Marshal(n *Node) []byte {
	var b bytes.Buffer
	write(&b, n, "")
	b.WriteByte('\n')
	return b.Bytes()
}

func write(b *bytes.Buffer, n *Node, indent string) {
	switch {
	case n.kind == 'o':
		writeList(b, "{", "}", len(n.Keys), indent, func(i int) {
			writeString(b, n.Keys[i])
			b.WriteString(": ")
			write(b, n.Fields[n.Keys[i]], indent+"  ")
		})
	case n.kind == 'a':
		writeList(b, "[", "]", len(n.Items), indent, func(i int) {
			write(b, n.Items[i], indent+"  ")
		})
	case n.kind == 's':
		writeString(b, n.Value.(string))
	default:
		switch v := n.Value.(type) {
		case nil:
			b.WriteString("null")
		case bool:
			b.WriteString(strconv.FormatBool(v))
		case json.Number:
			b.WriteString(string(v))
		}
	}
}

// writeList writes n items between opening and closing, one a line indented
// below indent and written by item, or opening and closing alone when n is 0.
func writeList(b *bytes.Buffer, opening, closing string, n int, indent string, item func(i int)) {
	if n == 0 {
		b.WriteString(opening + closing)
		return
	}
	b.WriteString(opening + "\n")
	for i := range n {
		b.WriteString(indent + "  ")
		item(i)
		if i < n-1 {
			b.WriteByte(',')
		}
		b.WriteByte('\n')
	}
	b.WriteString(indent + closing)
}

func writeString(b *bytes.Buffer, s string) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s)
	b.Write(bytes.TrimRight(buf.Bytes(), "\n"))
}
