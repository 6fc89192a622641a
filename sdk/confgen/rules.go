package confgen

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Has reports whether key is set in the table m.
func Has(m map[string]any, key string) bool {
	_, ok := m[key]
	return ok
}

// NewProblem builds a Problem for key with value v (masked when secret);
// {key} and {value} in msg are filled in.
func NewProblem(key string, v any, secret bool, rule, msg string) confkit.Problem {
	shown := ""
	if v != nil {
		shown = FormatValue(v)
		if secret {
			shown = confkit.NewSecret(shown).String()
		}
	}
	return confkit.Problem{Key: key, Value: shown, Rule: rule, Message: Expand(msg, key, shown)}
}

// BothOrNeither checks that keys a and b of table m (at dotted path
// table, "" for the top) are both set or both unset. msg may use {set} and
// {missing}; the problem is reported on the missing key.
func BothOrNeither(m map[string]any, table, a, b, msg string) *confkit.Problem {
	ha, hb := Has(m, a), Has(m, b)
	if ha == hb {
		return nil
	}
	set, missing := a, b
	if hb {
		set, missing = b, a
	}
	if msg == "" {
		msg = "{set} is set but {missing} is not: set both or neither"
	}
	key := missing
	if table != "" {
		key = table + "." + missing
	}
	return &confkit.Problem{Key: key, Rule: "x-both-or-neither",
		Message: strings.NewReplacer("{set}", set, "{missing}", missing, "{key}", key, "{value}", "").Replace(msg)}
}

// ApplyKeyAliases renames alias keys to their canonical key. aliases maps
// a dotted table path ("" for the top) to alias → key. Setting both a key
// and its alias is a problem.
func ApplyKeyAliases(doc map[string]any, aliases map[string]map[string]string) confkit.Problems {
	var ps confkit.Problems
	tables := make([]string, 0, len(aliases))
	for t := range aliases {
		tables = append(tables, t)
	}
	sort.Strings(tables)
	for _, t := range tables {
		m := tableAt(doc, t)
		if m == nil {
			continue
		}
		names := make([]string, 0, len(aliases[t]))
		for a := range aliases[t] {
			names = append(names, a)
		}
		sort.Strings(names)
		for _, a := range names {
			v, ok := m[a]
			if !ok {
				continue
			}
			key := aliases[t][a]
			delete(m, a)
			if _, both := m[key]; both {
				full := joinKey(t, a)
				ps = append(ps, confkit.Problem{Key: full, Value: FormatValue(v), Rule: "x-aliases",
					Message: fmt.Sprintf("%s is an alias of %s, which is also set: keep only one", a, key)})
				continue
			}
			m[key] = v
		}
	}
	return ps
}

// ApplyEnumAliases replaces alias spellings of enum values. aliases maps a
// dotted key path to alias → value.
func ApplyEnumAliases(doc map[string]any, aliases map[string]map[string]string) {
	for path, as := range aliases {
		t, k := "", path
		if i := strings.LastIndexByte(path, '.'); i >= 0 {
			t, k = path[:i], path[i+1:]
		}
		m := tableAt(doc, t)
		if m == nil {
			continue
		}
		if s, ok := m[k].(string); ok {
			if v, ok := as[s]; ok {
				m[k] = v
			}
		}
	}
}

func joinKey(table, key string) string {
	if table == "" {
		return key
	}
	return table + "." + key
}

func tableAt(doc map[string]any, path string) map[string]any {
	if path == "" {
		return doc
	}
	m := doc
	for _, p := range strings.Split(path, ".") {
		next, ok := m[p].(map[string]any)
		if !ok {
			return nil
		}
		m = next
	}
	return m
}

// Table returns the nested table at key of m, or nil.
func Table(m map[string]any, key string) map[string]any {
	t, _ := m[key].(map[string]any)
	return t
}

// Checker validates documents against one embedded schema, compiled on
// first use.
type Checker struct {
	name   string
	schema []byte
	spec   *SchemaSpec
	once   sync.Once
	s      *jsonschema.Schema
	err    error
}

// NewChecker returns a Checker for a schema and its key information.
func NewChecker(name string, schema []byte, spec *SchemaSpec) *Checker {
	return &Checker{name: name, schema: schema, spec: spec}
}

// Check validates doc and returns every problem (see CheckSchema).
func (c *Checker) Check(doc map[string]any) confkit.Problems {
	c.once.Do(func() { c.s, c.err = CompileSchema(c.name, c.schema) })
	if c.err != nil {
		return confkit.Problems{{Rule: "schema", Message: c.err.Error()}}
	}
	return CheckSchema(c.s, doc, c.spec)
}

// AsMap converts a table whose values all convert with conv.
func AsMap[T any](v any, conv func(any) (T, bool)) (map[string]T, bool) {
	m, ok := v.(map[string]any)
	if !ok {
		return nil, false
	}
	out := make(map[string]T, len(m))
	for k, e := range m {
		x, ok := conv(e)
		if !ok {
			return nil, false
		}
		out[k] = x
	}
	return out, true
}

// AsAny accepts any value; it is the converter of map[string]any tables.
func AsAny(v any) (any, bool) { return v, true }

// PtrValue returns *p, or nil when p is nil, for redacted views.
func PtrValue[T any](p *T) any {
	if p == nil {
		return nil
	}
	return *p
}

// WrongType is the problem for a value of the wrong JSON type.
func WrongType(key string, v any, secret bool, want string) confkit.Problem {
	msg := fmt.Sprintf("must be %s, got %s", want, TypeName(v))
	if !secret {
		msg += " " + quoteValue(v)
	}
	return NewProblem(key, v, secret, "type", msg)
}
