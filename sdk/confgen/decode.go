package confgen

import (
	"strings"
	"sync/atomic"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Spec is what Load needs to know of one generated package's schema.
type Spec struct {
	// Checker runs the JSON Schema check and words its errors.
	Checker *Checker
	// KeyAliases maps a table path ("" for the top) to alias → key.
	KeyAliases map[string]map[string]string
	// Env lists every key an environment variable can override.
	Env []EnvBinding
	// EnumAliases maps a key path to alias → enum value.
	EnumAliases map[string]map[string]string
	// KeyOrder is every key path in schema order, for sorting problems.
	KeyOrder []string

	lastEnv atomic.Pointer[prefixNames] // see envNames
}

// Load is the body of every generated Load: it normalizes raw, applies the
// key aliases, then the environment variables prefix + suffix read through
// env (nil reads none), resolves the enum aliases, checks the table against
// the schema, and decodes it into a C with decode. It returns every problem
// at once as confkit.Problems, sorted in key order; the problem of a value
// read from the environment names the variable.
func Load[C any](raw map[string]any, prefix string, env func(string) (string, bool), spec *Spec, decode func(c *C, m map[string]any, ps *confkit.Problems)) (C, error) {
	doc := NormalizeTable(raw)
	ps := ApplyKeyAliases(doc, spec.KeyAliases)
	if env != nil {
		ps = append(ps, bindEnvAll(doc, spec.Env, spec.envNames(prefix), env)...)
	}
	ApplyEnumAliases(doc, spec.EnumAliases)
	ps = append(ps, spec.Checker.Check(doc)...)
	var c C
	decode(&c, doc, &ps)
	if len(ps) > 0 {
		NameEnvSources(ps, spec.Env, prefix, env)
		SortProblems(ps, spec.KeyOrder)
		var zero C
		return zero, ps
	}
	return c, nil
}

// Validate checks a Config built in code, given as the table its generated
// table method returns, the way Load checks a table from a file, with the
// same rules and problems.
func Validate[C any](table map[string]any, spec *Spec, decode func(c *C, m map[string]any, ps *confkit.Problems)) error {
	_, err := Load(table, "", nil, spec, decode)
	return err
}

// Decoder reads the keys of one table for a generated decode function.
type Decoder struct {
	// Table is the table (nil when absent).
	Table map[string]any
	// Problems collects the problems found.
	Problems *confkit.Problems
	// At is the table's key path with a trailing dot ("" for the top), such
	// as "tls." or "columns[2].": problems name at + key.
	At string
}

// A Kind converts a table value into a T. When it cannot, it returns the
// rule the value breaks and the message: for the rule "type", what the
// value must be, such as "a string".
type Kind[T any] func(v any) (x T, rule, msg string)

// Decode sets *dst from the key name of d's table when the key is set, has
// no problem yet and kind converts it; a value kind refuses is a problem
// (masked when dst is a confkit.Secret). It reports whether it set *dst.
func Decode[T any](d Decoder, name string, kind Kind[T], dst *T) bool {
	v, ok := d.Table[name]
	if !ok {
		return false
	}
	if len(*d.Problems) > 0 && d.Problems.Has(d.At+name) {
		return false
	}
	x, rule, msg := kind(v)
	if rule == "" {
		*dst = x
		return true
	}
	key := d.At + name
	_, secret := any(dst).(*confkit.Secret)
	if rule == "type" {
		*d.Problems = append(*d.Problems, WrongType(key, v, secret, msg))
	} else {
		*d.Problems = append(*d.Problems, NewProblem(key, v, secret, rule, msg))
	}
	return false
}

// Bound adds the problem rule with msg for the key name when broken; the
// generated code checks an x-minimum or x-maximum with it.
func (d Decoder) Bound(name string, broken bool, rule, msg string) {
	if broken {
		*d.Problems = append(*d.Problems, NewProblem(d.At+name, d.Table[name], false, rule, msg))
	}
}

// okKind makes a Kind of a converter that says only yes or no.
func okKind[T any](conv func(any) (T, bool), want string) Kind[T] {
	return func(v any) (T, string, string) {
		x, ok := conv(v)
		if !ok {
			return x, "type", want
		}
		return x, "", ""
	}
}

// errKind makes a Kind of a parser whose error is a problem of rule.
func errKind[T any](parse func(any) (T, error), rule string) Kind[T] {
	return func(v any) (T, string, string) {
		x, err := parse(v)
		if err != nil {
			return x, rule, err.Error()
		}
		return x, "", ""
	}
}

// The kinds of table value.
var (
	// String is a string.
	String = okKind(AsString, "a string")
	// Int is an integer that fits an int.
	Int = okKind(AsInt, "an integer")
	// Float is a number.
	Float = okKind(AsFloat, "a number")
	// Bool is a boolean.
	Bool = okKind(AsBool, "a boolean")
	// Strings is an array of strings.
	Strings = okKind(AsStrings, "an array of strings")
	// Ints is an array of integers.
	Ints = okKind(AsInts, "an array of integers")
	// Floats is an array of numbers.
	Floats = okKind(AsFloats, "an array of numbers")
	// Size is a size (see AsSize); a bad one breaks the rule "format".
	Size = errKind(AsSize, "format")
	// Duration is a duration (see AsDuration); a bad one breaks the rule
	// "format".
	Duration = errKind(AsDuration, "format")
	// Secret is a string kept as a confkit.Secret.
	Secret Kind[confkit.Secret] = func(v any) (confkit.Secret, string, string) {
		s, ok := AsString(v)
		if !ok {
			return confkit.Secret{}, "type", "a string"
		}
		return confkit.NewSecret(s), "", ""
	}
)

// Enum is a string of the enum type E.
func Enum[E ~string](v any) (E, string, string) {
	s, ok := AsString(v)
	if !ok {
		return "", "type", "a string"
	}
	return E(s), "", ""
}

// Trimmed is a string with the characters of cutset trimmed from both ends.
func Trimmed(cutset string) Kind[string] {
	return func(v any) (string, string, string) {
		s, ok := AsString(v)
		if !ok {
			return "", "type", "a string"
		}
		return strings.Trim(s, cutset), "", ""
	}
}

// Template is a template that uses only the placeholders allowed (nil
// allows any); a bad one breaks the rule "x-placeholders".
func Template(allowed []string) Kind[confkit.Template] {
	return func(v any) (confkit.Template, string, string) {
		s, ok := AsString(v)
		if !ok {
			return confkit.Template{}, "type", "a string"
		}
		t, err := confkit.ParseTemplate(s, allowed)
		if err != nil {
			return t, "x-placeholders", err.Error()
		}
		return t, "", ""
	}
}

// Map is a table whose values all convert with conv.
func Map[T any](conv func(any) (T, bool)) Kind[map[string]T] {
	return okKind(func(v any) (map[string]T, bool) { return AsMap(v, conv) }, "a table")
}

// Optional is kind kept behind a pointer, nil when the key is not set.
func Optional[T any](kind Kind[T]) Kind[*T] {
	return func(v any) (*T, string, string) {
		x, rule, msg := kind(v)
		if rule != "" {
			return nil, rule, msg
		}
		return &x, "", ""
	}
}

// Reworded is kind with the schema's message for the rule it words:
// the problems of that rule say msg instead.
func Reworded[T any](kind Kind[T], rule, msg string) Kind[T] {
	return func(v any) (T, string, string) {
		x, r, m := kind(v)
		if r == rule {
			m = msg
		}
		return x, r, m
	}
}

// PutIf sets m[key] to v when set; a generated table method leaves out
// with it the keys a Config does not set.
func PutIf(m map[string]any, set bool, key string, v any) {
	if set {
		m[key] = v
	}
}

// PutPtr sets m[key] to *p unless p is nil.
func PutPtr[T any](m map[string]any, key string, p *T) {
	if p != nil {
		m[key] = *p
	}
}

// Checked returns load followed by checks, a connector's rules between keys
// that its schema cannot state, whose problems come out as Load's do: a
// plain error is a problem of the whole table (confkit.ProblemsOf), a
// problem of a key that an
// environment variable set names the variable, and they are in key order.
func Checked[C any, E ~func(string) (string, bool)](load func(map[string]any, string, E) (C, error), spec *Spec, checks []func(C) error) func(map[string]any, string, E) (C, error) {
	return func(raw map[string]any, prefix string, env E) (C, error) {
		c, err := load(raw, prefix, env)
		if err != nil || len(checks) == 0 {
			return c, err
		}
		var ps confkit.Problems
		for _, check := range checks {
			ps = append(ps, confkit.ProblemsOf(check(c))...)
		}
		if len(ps) == 0 {
			return c, nil
		}
		NameEnvSources(ps, spec.Env, prefix, (func(string) (string, bool))(env))
		SortProblems(ps, spec.KeyOrder)
		var zero C
		return zero, ps
	}
}
