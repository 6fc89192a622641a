package api_test

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
)

// jsonSchema is the part of a connector's plugin_config schema the
// secrets test reads.
type jsonSchema struct {
	Type       any                    `json:"type"`
	Properties map[string]*jsonSchema `json:"properties"`
	Required   []string               `json:"required"`
	Default    any                    `json:"default"`
	Enum       []any                  `json:"enum"`
	Examples   []any                  `json:"examples"`
	Secret     bool                   `json:"x-secret"`
	XType      string                 `json:"x-type"`
	Items      *jsonSchema            `json:"items"`
	Minimum    *float64               `json:"minimum"`
	Pattern    string                 `json:"pattern"`
}

func parseSchema(b []byte) (*jsonSchema, error) {
	var s jsonSchema
	if err := json.Unmarshal(b, &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// secretPaths lists the key paths of every x-secret property, nested
// objects included, sorted.
func secretPaths(s *jsonSchema) [][]string {
	var out [][]string
	var walk func(s *jsonSchema, prefix []string)
	walk = func(s *jsonSchema, prefix []string) {
		for name, p := range s.Properties {
			path := append(append([]string{}, prefix...), name)
			if p.Secret {
				out = append(out, path)
			}
			if len(p.Properties) > 0 {
				walk(p, path)
			}
		}
	}
	walk(s, nil)
	sort.Slice(out, func(i, j int) bool { return strings.Join(out[i], ".") < strings.Join(out[j], ".") })
	return out
}

// envName is the env variable that overrides path of a plugin_config.
func envName(prefix string, path []string) string {
	return prefix + strings.ToUpper(strings.Join(path, "_"))
}

func setPath(m map[string]any, path []string, v any) {
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

func typeOf(s *jsonSchema) string {
	switch t := s.Type.(type) {
	case string:
		return t
	case []any:
		for _, x := range t {
			if x != "null" {
				return fmt.Sprint(x)
			}
		}
	}
	if len(s.Properties) > 0 {
		return "object"
	}
	return "string"
}

// sampleValue makes up a value for a required key the test has no value
// for: the default, the first example or enum value, or a plain value of
// the key's type.
func sampleValue(s *jsonSchema) any {
	switch {
	case s.Default != nil:
		return s.Default
	case len(s.Examples) > 0:
		return s.Examples[0]
	case len(s.Enum) > 0:
		return s.Enum[0]
	}
	switch s.XType {
	case "duration":
		return "1s"
	case "size":
		return "1MiB"
	}
	switch typeOf(s) {
	case "integer", "number":
		if s.Minimum != nil && *s.Minimum > 1 {
			return *s.Minimum
		}
		return 1
	case "boolean":
		return false
	case "array":
		return []any{"sample"}
	case "object":
		m := map[string]any{}
		for _, k := range s.Required {
			m[k] = sampleValue(s.Properties[k])
		}
		return m
	}
	return "sample"
}
