package confgen

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Normalize returns a deep copy of a decoded TOML or JSON value using only
// the types the JSON Schema validator understands: map[string]any, []any,
// string, bool, int64, float64 and json.Number. Times become RFC 3339
// strings; other unknown types become their fmt representation.
func Normalize(v any) any {
	if plain(v) {
		return v
	}
	switch x := v.(type) {
	case int, int8, int16, int32:
		return reflect.ValueOf(x).Int()
	case uint, uint8, uint16, uint32, uint64:
		u := reflect.ValueOf(x).Uint()
		if u > math.MaxInt64 {
			return float64(u)
		}
		return int64(u)
	case float32:
		return float64(x)
	case time.Time:
		return x.Format(time.RFC3339Nano)
	case map[string]any:
		if x == nil {
			return map[string]any{}
		}
		// Cloning copies the table whole, which is cheaper than inserting
		// every key again; only the values that are not plain yet change.
		out := maps.Clone(x)
		for k, e := range out {
			if !plain(e) {
				out[k] = Normalize(e)
			}
		}
		return out
	case []any:
		return normalizeList(x)
	case []string:
		return normalizeList(x)
	case []map[string]any:
		return normalizeList(x)
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		out := make([]any, rv.Len())
		for i := range out {
			out[i] = Normalize(rv.Index(i).Interface())
		}
		return out
	case reflect.Map:
		if rv.Type().Key().Kind() == reflect.String {
			out := make(map[string]any, rv.Len())
			it := rv.MapRange()
			for it.Next() {
				out[it.Key().String()] = Normalize(it.Value().Interface())
			}
			return out
		}
	case reflect.String:
		return rv.String()
	}
	return fmt.Sprint(v)
}

// plain reports whether Normalize returns v as it is.
func plain(v any) bool {
	switch v.(type) {
	case nil, string, bool, int64, float64, json.Number:
		return true
	}
	return false
}

// normalizeList is Normalize for a list.
func normalizeList[T any](l []T) []any {
	out := make([]any, len(l))
	for i, e := range l {
		out[i] = Normalize(e)
	}
	return out
}

// NormalizeTable is Normalize for a whole table; nil gives an empty table.
func NormalizeTable(raw map[string]any) map[string]any {
	if raw == nil {
		return map[string]any{}
	}
	return Normalize(raw).(map[string]any)
}

// AsString returns v as a string.
func AsString(v any) (string, bool) {
	s, ok := v.(string)
	return s, ok
}

// AsBool returns v as a bool.
func AsBool(v any) (bool, bool) {
	b, ok := v.(bool)
	return b, ok
}

// AsInt returns v as an int when it is an integer that fits (floats with no
// fraction count).
func AsInt(v any) (int, bool) {
	switch x := v.(type) {
	case int64:
		if int64(int(x)) == x {
			return int(x), true
		}
	case int:
		return x, true
	case float64:
		if x == math.Trunc(x) && x >= math.MinInt64 && x < math.MaxInt64 {
			return int(x), true
		}
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return int(n), true
		}
	}
	return 0, false
}

// AsFloat returns v as a float64.
func AsFloat(v any) (float64, bool) {
	switch x := v.(type) {
	case float64:
		return x, true
	case int64:
		return float64(x), true
	case int:
		return float64(x), true
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	}
	return 0, false
}

// AsStrings returns v as a list of strings.
func AsStrings(v any) ([]string, bool) {
	if x, ok := v.([]string); ok {
		return append([]string(nil), x...), true
	}
	return asList(v, AsString)
}

// AsInts returns v as a list of ints.
func AsInts(v any) ([]int, bool) { return asList(v, AsInt) }

// AsFloats returns v as a list of float64.
func AsFloats(v any) ([]float64, bool) { return asList(v, AsFloat) }

// asList converts each element of a TOML array with conv, or fails.
func asList[T any](v any, conv func(any) (T, bool)) ([]T, bool) {
	l, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]T, 0, len(l))
	for _, e := range l {
		x, ok := conv(e)
		if !ok {
			return nil, false
		}
		out = append(out, x)
	}
	return out, true
}

// AsSize returns v as a Size: a string parsed by ParseSize or a
// non-negative integer byte count.
func AsSize(v any) (confkit.Size, error) {
	switch x := v.(type) {
	case string:
		return confkit.ParseSize(x)
	default:
		if n, ok := AsInt(v); ok {
			if n < 0 {
				return 0, fmt.Errorf("invalid size %d: must not be negative", n)
			}
			return confkit.Size(n), nil
		}
	}
	return 0, fmt.Errorf("must be a size such as 8MiB or 10MB, got %s", TypeName(v))
}

// AsDuration returns v as a duration parsed by ParseDuration.
func AsDuration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("must be a duration string such as 100ms or 1s, got %s", TypeName(v))
	}
	return confkit.ParseDuration(s)
}

// TypeName names the JSON type of v for messages.
func TypeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case bool:
		return "boolean"
	case int, int64, json.Number:
		return "integer"
	case float64:
		return "number"
	case map[string]any:
		return "table"
	case []any:
		return "array"
	}
	return fmt.Sprintf("%T", v)
}

// FormatValue renders a value for a Problem: strings as they are, other
// values in JSON-like form.
func FormatValue(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "null"
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = k + " = " + FormatValue(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = FormatValue(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// Expand fills the {key} and {value} placeholders of a schema message.
func Expand(msg, key, value string) string {
	if !strings.Contains(msg, "{") {
		return msg
	}
	return strings.NewReplacer("{key}", key, "{value}", value).Replace(msg)
}
