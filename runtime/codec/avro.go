package codec

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unsafe"

	"github.com/hamba/avro/v2"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

// Conform converts a decoded JSON value (numbers as json.Number or
// float64, bytes as strings) to the Go types hamba/avro encodes for schema
// s: int, int64, float32, float64, []byte, maps for records, and
// map[string]any{branch: value} for unions other than null-or-one-type.
//
// A value that could match several branches of a union is tried against
// each; the result of each try of a record, array or map value is
// remembered, so a union of recursive records takes time linear in the
// value's size, not exponential in its depth.
func Conform(s avro.Schema, v any) (any, error) {
	var c conformer
	return c.conform(s, v, "")
}

// conformer remembers the outcome of conforming a composite value to a
// union branch.
type conformer struct {
	tried map[triedKey]tried
}

// triedKey is a union branch and a composite value (a map or an []any),
// by identity.
type triedKey struct {
	branch avro.Schema
	value  unsafe.Pointer
	len    int
}

type tried struct {
	v   any
	err error
}

// try conforms v to union branch b, or returns the outcome of an earlier
// try of the same value.
func (c *conformer) try(b avro.Schema, v any, at string) (any, error) {
	rv := reflect.ValueOf(v)
	if k := rv.Kind(); k != reflect.Map && k != reflect.Slice {
		return c.conform(b, v, at)
	}
	key := triedKey{branch: b, value: rv.UnsafePointer(), len: rv.Len()}
	if t, ok := c.tried[key]; ok {
		return t.v, t.err
	}
	cv, err := c.conform(b, v, at)
	if c.tried == nil {
		c.tried = map[triedKey]tried{}
	}
	c.tried[key] = tried{cv, err}
	return cv, err
}

func (c *conformer) conform(s avro.Schema, v any, at string) (any, error) {
	where := func() string {
		if at == "" {
			return "value"
		}
		return "field " + at
	}
	switch t := s.(type) {
	case *avro.RefSchema:
		return c.conform(t.Schema(), v, at)
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("avro: %s: want an object for record %s, got %T", where(), t.Name(), v)
		}
		out := make(map[string]any, len(t.Fields()))
		for _, f := range t.Fields() {
			name := f.Name()
			if at != "" {
				name = at + "." + f.Name()
			}
			fv, present := m[f.Name()]
			if !present {
				if f.HasDefault() {
					continue
				}
				if isNullable(f.Type()) {
					out[f.Name()] = nil
					continue
				}
				return nil, fmt.Errorf("avro: field %s is missing and has no default", name)
			}
			cv, err := c.conform(f.Type(), fv, name)
			if err != nil {
				return nil, err
			}
			out[f.Name()] = cv
		}
		return out, nil
	case *avro.ArraySchema:
		a, ok := v.([]any)
		if !ok {
			return nil, fmt.Errorf("avro: %s: want an array, got %T", where(), v)
		}
		out := make([]any, len(a))
		for i, e := range a {
			cv, err := c.conform(t.Items(), e, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case *avro.MapSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("avro: %s: want an object for a map, got %T", where(), v)
		}
		out := make(map[string]any, len(m))
		for k, e := range m {
			cv, err := c.conform(t.Values(), e, at+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = cv
		}
		return out, nil
	case *avro.UnionSchema:
		return c.conformUnion(t, v, at)
	case *avro.EnumSchema:
		str, ok := v.(string)
		if !ok {
			return nil, fmt.Errorf("avro: %s: want a string for enum %s, got %T", where(), t.Name(), v)
		}
		for _, sym := range t.Symbols() {
			if sym == str {
				return str, nil
			}
		}
		return nil, fmt.Errorf("avro: %s: %q is not a symbol of enum %s", where(), str, t.Name())
	case *avro.FixedSchema:
		b, err := toBytes(v)
		if err != nil {
			return nil, fmt.Errorf("avro: %s: %v", where(), err)
		}
		if len(b) != t.Size() {
			return nil, fmt.Errorf("avro: %s: fixed %s needs %d bytes, got %d", where(), t.Name(), t.Size(), len(b))
		}
		arr := make([]byte, t.Size())
		copy(arr, b)
		return arr, nil
	case *avro.PrimitiveSchema:
		cv, err := conformPrimitive(t.Type(), v)
		if err != nil {
			return nil, fmt.Errorf("avro: %s: %v", where(), err)
		}
		return cv, nil
	}
	return nil, fmt.Errorf("avro: %s: unsupported schema type %s", where(), s.Type())
}

func isNullable(s avro.Schema) bool {
	u, ok := s.(*avro.UnionSchema)
	if !ok {
		return false
	}
	for _, b := range u.Types() {
		if b.Type() == avro.Null {
			return true
		}
	}
	return false
}

func (c *conformer) conformUnion(u *avro.UnionSchema, v any, at string) (any, error) {
	types := u.Types()
	if v == nil {
		for _, b := range types {
			if b.Type() == avro.Null {
				return nil, nil
			}
		}
		return nil, fmt.Errorf("avro: field %s: null is not allowed by the union", at)
	}
	// The Avro JSON encoding of a union: {"branch": value}.
	if m, ok := v.(map[string]any); ok && len(m) == 1 {
		for k, inner := range m {
			for _, b := range types {
				if branchName(b) == k {
					cv, err := c.conform(b, inner, at)
					if err != nil {
						return nil, err
					}
					return wrapUnion(u, b, cv), nil
				}
			}
		}
	}
	var firstErr error
	for _, b := range types {
		if b.Type() == avro.Null {
			continue
		}
		cv, err := c.try(b, v, at)
		if err == nil {
			return wrapUnion(u, b, cv), nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, fmt.Errorf("avro: field %s: value matches no branch of the union: %v", at, firstErr)
}

// wrapUnion returns cv as hamba encodes it for the union: bare for a
// null-or-one-type union, {name: value} otherwise.
func wrapUnion(u *avro.UnionSchema, b avro.Schema, cv any) any {
	if len(u.Types()) == 2 && isNullable(u) {
		return cv
	}
	return map[string]any{branchName(b): cv}
}

func branchName(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	if r, ok := s.(*avro.RefSchema); ok {
		return r.Schema().FullName()
	}
	return string(s.Type())
}

func conformPrimitive(t avro.Type, v any) (any, error) {
	switch t {
	case avro.Null:
		if v != nil {
			return nil, fmt.Errorf("want null, got %T", v)
		}
		return nil, nil
	case avro.Boolean:
		return want[bool](v, "a boolean")
	case avro.Int, avro.Long:
		n, err := toInt(v)
		if err != nil {
			return nil, err
		}
		if t == avro.Int {
			if n < math.MinInt32 || n > math.MaxInt32 {
				return nil, fmt.Errorf("%d does not fit an Avro int", n)
			}
			return int(n), nil
		}
		return n, nil
	case avro.Float, avro.Double:
		f, err := toFloat(v)
		if err != nil {
			return nil, err
		}
		if t == avro.Float {
			return float32(f), nil
		}
		return f, nil
	case avro.String:
		return want[string](v, "a string")
	case avro.Bytes:
		return toBytes(v)
	}
	return nil, fmt.Errorf("unsupported Avro type %s", t)
}

// want returns v when it is a T, else an error that names what, the value
// the schema wants, and v's type.
func want[T any](v any, what string) (any, error) {
	if _, ok := v.(T); !ok {
		return nil, fmt.Errorf("want %s, got %T", what, v)
	}
	return v, nil
}

func toInt(v any) (int64, error) {
	switch n := v.(type) {
	case json.Number:
		i, err := strconv.ParseInt(string(n), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("want an integer, got %s", n)
		}
		return i, nil
	case float64:
		if n != math.Trunc(n) || math.IsInf(n, 0) {
			return 0, fmt.Errorf("want an integer, got %v", n)
		}
		return int64(n), nil
	case int:
		return int64(n), nil
	case int32:
		return int64(n), nil
	case int64:
		return n, nil
	}
	return 0, fmt.Errorf("want an integer, got %T", v)
}

// toFloat reads a number the way config values are read
// (confgen.AsFloat), and a float32 besides.
func toFloat(v any) (float64, error) {
	if f, ok := v.(float32); ok {
		return float64(f), nil
	}
	if f, ok := confgen.AsFloat(v); ok {
		return f, nil
	}
	if n, ok := v.(json.Number); ok {
		return 0, fmt.Errorf("want a number, got %s", n)
	}
	return 0, fmt.Errorf("want a number, got %T", v)
}

// toBytes accepts []byte, or a string: the Avro JSON encoding maps each
// code point 0-255 to one byte; a string that is not all such code points
// is read as base64.
func toBytes(v any) ([]byte, error) {
	switch b := v.(type) {
	case []byte:
		return b, nil
	case string:
		out := make([]byte, 0, len(b))
		for _, r := range b {
			if r > 255 {
				if d, err := base64.StdEncoding.DecodeString(b); err == nil {
					return d, nil
				}
				return nil, fmt.Errorf("string is neither Avro JSON bytes nor base64")
			}
			out = append(out, byte(r))
		}
		return out, nil
	}
	return nil, fmt.Errorf("want bytes or a string, got %T", v)
}
