// Package compat finds the changes between two versions of a connector
// schema that would break definition files written against the old one:
// a key removed or renamed without an alias, a type changed, a new
// required key without a default, an enum value removed, bounds narrowed,
// a default changed.
//
// Changes that keep every old file valid and meaning the same thing pass:
// new optional keys, new enum values, aliases, widened bounds, new or
// edited descriptions.
package compat

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Kind names one kind of breaking change.
type Kind string

// The kinds of breaking change.
const (
	KeyRemoved       Kind = "key removed"
	TypeChanged      Kind = "type changed"
	RequiredAdded    Kind = "new required key without default"
	EnumValueRemoved Kind = "enum value removed"
	BoundsNarrowed   Kind = "bounds narrowed"
	DefaultChanged   Kind = "default changed"
)

// Change is one breaking change.
type Change struct {
	// Key is the dotted key path, such as "file_rotation" or "tls.ca_file".
	Key    string
	Kind   Kind
	Detail string
}

// String formats the change as "key: kind: detail".
func (c Change) String() string {
	if c.Detail == "" {
		return c.Key + ": " + string(c.Kind)
	}
	return c.Key + ": " + string(c.Kind) + ": " + c.Detail
}

// Compare returns the breaking changes from the schema old to the schema
// new, sorted by key. Both are JSON Schema documents in the dialect of
// schemas/README.md.
func Compare(old, new []byte) ([]Change, error) {
	o, err := decode(old)
	if err != nil {
		return nil, fmt.Errorf("old schema: %w", err)
	}
	n, err := decode(new)
	if err != nil {
		return nil, fmt.Errorf("new schema: %w", err)
	}
	var cs []Change
	compareObject("", o, n, &cs)
	sort.SliceStable(cs, func(i, j int) bool { return cs[i].Key < cs[j].Key })
	return cs, nil
}

func decode(b []byte) (map[string]any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v map[string]any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if v == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	return v, nil
}

// compareObject compares two object schemas located at path.
func compareObject(path string, o, n map[string]any, cs *[]Change) {
	add := func(key string, kind Kind, format string, args ...any) {
		*cs = append(*cs, Change{Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	op, np := props(o), props(n)
	oldRequired, newRequired := stringSet(o["required"]), stringSet(n["required"])

	for _, name := range sortedKeys(op) {
		key := join(path, name)
		ns, ok := np[name]
		if !ok {
			if by := aliasedBy(np, name); by != "" {
				ns = np[by]
			} else {
				add(key, KeyRemoved, "no key in the new schema has %q as an alias", name)
				continue
			}
		}
		// Every alias files may use must still be accepted.
		for _, a := range aliases(op[name]) {
			if _, isKey := np[a]; isKey || slices.Contains(aliases(ns), a) || aliasedBy(np, a) != "" {
				continue
			}
			add(key, KeyRemoved, "alias %q is no longer accepted", a)
		}
		compareKey(key, op[name], ns, cs)
	}
	for _, name := range sortedKeys(np) {
		key := join(path, name)
		if !newRequired[name] || hasDefault(np[name]) {
			continue
		}
		oldName := name
		if _, ok := op[name]; !ok {
			for _, a := range aliases(np[name]) {
				if _, ok := op[a]; ok {
					oldName = a
				}
			}
		}
		if oldRequired[oldName] {
			continue
		}
		if _, existed := op[oldName]; existed {
			add(key, RequiredAdded, "the key was optional and is now required, with no default")
		} else {
			add(key, RequiredAdded, "files without it no longer load")
		}
	}
	// dependentRequired that is new or names more keys.
	if oc, nc := canonical(o["dependentRequired"]), canonical(n["dependentRequired"]); nc != "" && oc != nc && !isSubsetJSON(n["dependentRequired"], o["dependentRequired"]) {
		add(orTop(path), RequiredAdded, "dependentRequired changed from %s to %s", orNone(oc), nc)
	}
	if additional(o) && !additional(n) {
		add(orTop(path), BoundsNarrowed, "additional keys were allowed and are now rejected")
	}
}

// compareKey compares the schemas of one key.
func compareKey(key string, o, n map[string]any, cs *[]Change) {
	add := func(kind Kind, format string, args ...any) {
		*cs = append(*cs, Change{Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	ot, nt := typeSet(o), typeSet(n)
	if len(ot) > 0 && !widens(ot, nt) {
		add(TypeChanged, "%s became %s", strings.Join(ot, " or "), orAny(strings.Join(nt, " or ")))
	}
	if ox, nx := str(o["x-type"]), str(n["x-type"]); ox != nx {
		add(TypeChanged, "x-type %s became %s", orNone(ox), orNone(nx))
	}
	if of, nf := str(o["format"]), str(n["format"]); nf != "" && of != nf {
		add(TypeChanged, "format %s became %s", orNone(of), nf)
	}

	if oe, ok := o["enum"].([]any); ok {
		ne, restricted := n["enum"].([]any)
		if restricted {
			alias := enumAliases(n)
			for _, a := range sortedKeys(enumAliases(o)) {
				if alias[a] == "" && !containsJSON(ne, a) {
					add(EnumValueRemoved, "value alias %q is no longer accepted", a)
				}
			}
			for _, v := range oe {
				if containsJSON(ne, v) {
					continue
				}
				if s, ok := v.(string); ok && alias[s] != "" {
					continue
				}
				add(EnumValueRemoved, "%s is no longer accepted and is not an alias", canonical(v))
			}
		}
	} else if ne, ok := n["enum"].([]any); ok {
		add(BoundsNarrowed, "values are now limited to %s", canonical(ne))
	}
	if oc, nc := canonical(o["const"]), canonical(n["const"]); nc != "" && oc != nc {
		add(BoundsNarrowed, "value is now fixed to %s", nc)
	}

	compareBounds(o, n, add)

	// Conditional rules of the dialect: a new or changed one may reject
	// files the old schema accepted.
	if oc, nc := canonical(o["x-required-if"]), canonical(n["x-required-if"]); nc != "" && oc != nc && !hasDefault(n) {
		add(RequiredAdded, "now required when %s (was %s)", condition(n["x-required-if"]), orNone(oc))
	}
	if oc, nc := canonical(o["x-both-or-neither"]), canonical(n["x-both-or-neither"]); nc != "" && oc != nc {
		add(RequiredAdded, "now must be set together with %s", nc)
	}
	if oc, nc := canonical(o["x-pattern-unless"]), canonical(n["x-pattern-unless"]); nc != "" && oc != nc {
		add(BoundsNarrowed, "x-pattern-unless %s became %s", orNone(oc), nc)
	}

	od, nd := canonical(o["default"]), canonical(n["default"])
	if od != "" && od != nd && !sameValue(o["default"], n["default"], str(o["x-type"])) {
		add(DefaultChanged, "%s became %s", od, orNone(nd))
	}
	if oc, nc := canonical(o["x-default-if"]), canonical(n["x-default-if"]); oc != "" && oc != nc {
		add(DefaultChanged, "conditional default %s became %s", oc, orNone(nc))
	}

	if isObject(o) || isObject(n) {
		compareObject(key, o, n, cs)
	}
	if oi, ok := o["items"].(map[string]any); ok {
		if ni, ok := n["items"].(map[string]any); ok {
			compareKey(key+"[]", oi, ni, cs)
		}
	}
}

// bound is one bounds keyword; lower says whether raising it narrows.
type bound struct {
	kw    string
	lower bool
}

var bounds = []bound{
	{"minimum", true}, {"exclusiveMinimum", true}, {"maximum", false}, {"exclusiveMaximum", false},
	{"minLength", true}, {"maxLength", false}, {"minItems", true}, {"maxItems", false},
	{"x-minimum", true}, {"x-exclusive-minimum", true}, {"x-maximum", false}, {"x-exclusive-maximum", false},
	{"multipleOf", true},
}

func compareBounds(o, n map[string]any, add func(Kind, string, ...any)) {
	xt := str(n["x-type"])
	for _, b := range bounds {
		ov, oHas := o[b.kw]
		nv, nHas := n[b.kw]
		if !nHas {
			continue
		}
		if !oHas {
			add(BoundsNarrowed, "new %s %s", b.kw, canonical(nv))
			continue
		}
		of, ok1 := magnitude(ov, xt)
		nf, ok2 := magnitude(nv, xt)
		if !ok1 || !ok2 {
			if canonical(ov) != canonical(nv) {
				add(BoundsNarrowed, "%s %s became %s", b.kw, canonical(ov), canonical(nv))
			}
			continue
		}
		if b.kw == "multipleOf" {
			if nf != of && (of == 0 || math.Mod(nf, of) != 0 || nf > of) {
				add(BoundsNarrowed, "multipleOf %s became %s", canonical(ov), canonical(nv))
			}
			continue
		}
		if (b.lower && nf > of) || (!b.lower && nf < of) {
			add(BoundsNarrowed, "%s %s became %s", b.kw, canonical(ov), canonical(nv))
		}
	}
	if op, np := str(o["pattern"]), str(n["pattern"]); np != "" && op != np {
		add(BoundsNarrowed, "pattern %s became %q", orNone(quoteOrEmpty(op)), np)
	}
}

// condition describes an x-required-if condition in words.
func condition(v any) string {
	m, ok := v.(map[string]any)
	if !ok {
		return canonical(v)
	}
	k := str(m["key"])
	if eq, ok := m["equals"]; ok {
		return fmt.Sprintf("%s is %s", k, canonical(eq))
	}
	if p, ok := m["present"].(bool); ok {
		if p {
			return k + " is set"
		}
		return k + " is not set"
	}
	return canonical(v)
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("%q", s)
}

// magnitude reads a bound as a number: a JSON number, or a size or
// duration string for keys of those x-types.
func magnitude(v any, xtype string) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case string:
		if s, err := confkit.ParseSize(x); err == nil && xtype != "duration" {
			return float64(s), true
		}
		if d, err := confkit.ParseDuration(x); err == nil {
			return float64(d), true
		}
	}
	return 0, false
}

// sameValue reports whether two defaults mean the same value: "8MiB" and
// 8388608 for a size, "1s" and "1000ms" for a duration.
func sameValue(a, b any, xtype string) bool {
	if a == nil || b == nil {
		return false
	}
	if xtype == "size" || xtype == "duration" {
		fa, ok1 := magnitude(a, xtype)
		fb, ok2 := magnitude(b, xtype)
		return ok1 && ok2 && fa == fb
	}
	if na, ok := a.(json.Number); ok {
		if nb, ok := b.(json.Number); ok {
			fa, _ := na.Float64()
			fb, _ := nb.Float64()
			return fa == fb
		}
	}
	return reflect.DeepEqual(a, b)
}

func typeSet(s map[string]any) []string {
	switch t := s["type"].(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, v := range t {
			if s, ok := v.(string); ok {
				out = append(out, s)
			}
		}
		sort.Strings(out)
		return out
	}
	return nil
}

// widens reports whether every type of old is accepted by new.
func widens(old, new []string) bool {
	if len(new) == 0 {
		return true // no type constraint any more
	}
	for _, t := range old {
		if slices.Contains(new, t) || (t == "integer" && slices.Contains(new, "number")) {
			continue
		}
		return false
	}
	return true
}

func props(s map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	if p, ok := s["properties"].(map[string]any); ok {
		for k, v := range p {
			if m, ok := v.(map[string]any); ok {
				out[k] = m
			}
		}
	}
	return out
}

func isObject(s map[string]any) bool {
	_, ok := s["properties"].(map[string]any)
	return ok
}

func additional(s map[string]any) bool {
	v, ok := s["additionalProperties"]
	if !ok {
		return isObject(s) // JSON Schema default: allowed
	}
	b, isBool := v.(bool)
	return !isBool || b
}

// aliases returns a key's x-aliases.
func aliases(s map[string]any) []string {
	var out []string
	for _, kw := range []string{"x-aliases", "x-alias"} {
		switch a := s[kw].(type) {
		case string:
			out = append(out, a)
		case []any:
			for _, v := range a {
				if s, ok := v.(string); ok {
					out = append(out, s)
				}
			}
		}
	}
	return out
}

// aliasedBy returns the key of props that lists name as an alias, or "".
func aliasedBy(props map[string]map[string]any, name string) string {
	for _, k := range sortedKeys(props) {
		if slices.Contains(aliases(props[k]), name) {
			return k
		}
	}
	return ""
}

// enumAliases returns a key's value aliases, alias → canonical value, from
// x-enum-aliases.
func enumAliases(s map[string]any) map[string]string {
	out := map[string]string{}
	for _, kw := range []string{"x-enum-aliases", "x-value-aliases"} {
		m, ok := s[kw].(map[string]any)
		if !ok {
			continue
		}
		for k, v := range m {
			switch x := v.(type) {
			case string:
				out[k] = x // alias → canonical value
			case []any:
				for _, a := range x {
					if as, ok := a.(string); ok {
						out[as] = k
					}
				}
			}
		}
	}
	return out
}

func hasDefault(s map[string]any) bool {
	_, ok := s["default"]
	if !ok {
		_, ok = s["x-default-if"]
	}
	return ok
}

func stringSet(v any) map[string]bool {
	out := map[string]bool{}
	if a, ok := v.([]any); ok {
		for _, x := range a {
			if s, ok := x.(string); ok {
				out[s] = true
			}
		}
	}
	return out
}

func containsJSON(list []any, v any) bool {
	c := canonical(v)
	for _, x := range list {
		if canonical(x) == c {
			return true
		}
	}
	return false
}

// isSubsetJSON reports whether the conditional requirements in a are all
// in b (so a requires nothing b did not).
func isSubsetJSON(a, b any) bool {
	am, ok1 := a.(map[string]any)
	bm, ok2 := b.(map[string]any)
	if !ok1 || !ok2 {
		return false
	}
	for k, v := range am {
		if canonical(bm[k]) != canonical(v) {
			return false
		}
	}
	return true
}

// canonical is v as compact JSON with sorted keys, or "" for nil.
func canonical(v any) string {
	if v == nil {
		return ""
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orAny(s string) string {
	if s == "" {
		return "any type"
	}
	return s
}

func orTop(path string) string {
	if path == "" {
		return "(top level)"
	}
	return path
}
