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
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/gen/internal/model"
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

// Reviewed says, for every keyword of a key the model reads, what compat
// does with it; a keyword added to the model without a line here fails
// TestEveryKeywordReviewed.
var Reviewed = map[string]string{
	"type":                 "compared: a type no longer accepted",
	"x-type":               "compared: any change",
	"items":                "compared: the item type, enum and element keys",
	"properties":           "compared: every key, recursively",
	"additionalProperties": "compared: unknown keys rejected where they were allowed",
	"required":             "compared: a new required key without a default",
	"description":          "not breaking",
	"examples":             "not breaking",
	"deprecated":           "not breaking: the key still works",
	"x-deprecated":         "not breaking: the key still works",
	"x-secret":             "not breaking: only how the value is shown",
	"x-message":            "not breaking: only the words of a problem",
	"x-enum-descriptions":  "not breaking",
	"x-trim":               "not breaking: trimming keeps the values that worked",
	"x-placeholders":       "compared: a placeholder no longer accepted",
	"default":              "compared: a changed default changes what files mean",
	"enum":                 "compared: a value removed",
	"x-enum-aliases":       "compared: a value alias removed",
	"x-aliases":            "compared: a key alias removed",
	"x-minimum":            "compared: bound narrowed",
	"x-exclusive-minimum":  "compared: bound narrowed",
	"x-maximum":            "compared: bound narrowed",
	"x-exclusive-maximum":  "compared: bound narrowed",
	"x-required-if":        "compared: new or changed condition",
	"x-both-or-neither":    "compared: new pairing",
	"x-default-if":         "compared: changed conditional default",
	"x-pattern-unless":     "compared: new or changed pattern",
	"x-unique":             "compared: new or changed unique key",
	"pattern":              "compared: new or changed pattern",
}

// Compare returns the breaking changes from the schema old to the schema
// new, sorted by key. Both are JSON Schema documents in the dialect of
// schemas/README.md, read with the generator's model; schema errors that
// leave a key readable do not stop the comparison (an old version may have
// been valid under an older dialect, and picogen gen reports the new one's).
func Compare(old, new []byte) ([]Change, error) {
	o, err := read(old)
	if err != nil {
		return nil, fmt.Errorf("old schema: %w", err)
	}
	n, err := read(new)
	if err != nil {
		return nil, fmt.Errorf("new schema: %w", err)
	}
	var cs []Change
	compareObject("", o.Root, n.Root, &cs)
	slices.SortStableFunc(cs, func(a, b Change) int { return strings.Compare(a.Key, b.Key) })
	return cs, nil
}

func read(b []byte) (*model.Schema, error) {
	s, err := model.Parse("schema", "", b)
	if s == nil || s.Root == nil {
		if ps, ok := confkit.AsProblems(err); ok && len(ps) == 1 {
			return nil, errors.New(ps[0].Message)
		}
		return nil, err
	}
	return s, nil
}

// compareObject compares two tables located at path.
func compareObject(path string, o, n *model.Object, cs *[]Change) {
	add := func(key string, kind Kind, format string, args ...any) {
		*cs = append(*cs, Change{Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	op, np := props(o), props(n)
	for _, name := range slices.Sorted(maps.Keys(op)) {
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
		for _, a := range op[name].Aliases {
			if _, isKey := np[a]; isKey || slices.Contains(ns.Aliases, a) || aliasedBy(np, a) != "" {
				continue
			}
			add(key, KeyRemoved, "alias %q is no longer accepted", a)
		}
		compareKey(key, op[name], ns, cs)
	}
	for _, name := range slices.Sorted(maps.Keys(np)) {
		key := join(path, name)
		if !np[name].Required || hasDefault(np[name]) {
			continue
		}
		oldName := name
		if _, ok := op[name]; !ok {
			for _, a := range np[name].Aliases {
				if _, ok := op[a]; ok {
					oldName = a
				}
			}
		}
		old, existed := op[oldName]
		if existed && old.Required {
			continue
		}
		if existed {
			add(key, RequiredAdded, "the key was optional and is now required, with no default")
		} else {
			add(key, RequiredAdded, "files without it no longer load")
		}
	}
	// dependentRequired that is new or names more keys.
	if oc, nc := canonical(o.DependentRequired), canonical(n.DependentRequired); nc != "" && oc != nc && !isSubsetJSON(n.DependentRequired, o.DependentRequired) {
		add(cmp.Or(path, "(top level)"), RequiredAdded, "dependentRequired changed from %s to %s", cmp.Or(oc, "none"), nc)
	}
	if !o.Closed && n.Closed {
		add(cmp.Or(path, "(top level)"), BoundsNarrowed, "additional keys were allowed and are now rejected")
	}
}

// compareKey compares one key's old and new schema.
func compareKey(key string, o, n *model.Property, cs *[]Change) {
	add := func(kind Kind, format string, args ...any) {
		*cs = append(*cs, Change{Key: key, Kind: kind, Detail: fmt.Sprintf(format, args...)})
	}
	if len(o.Types) > 0 && !widens(o.Types, n.Types) {
		add(TypeChanged, "%s became %s", strings.Join(o.Types, " or "), cmp.Or(strings.Join(n.Types, " or "), "any type"))
	}
	if o.XType != n.XType {
		add(TypeChanged, "x-type %s became %s", cmp.Or(o.XType, "none"), cmp.Or(n.XType, "none"))
	}
	if of, nf := str(o.Standard["format"]), str(n.Standard["format"]); nf != "" && of != nf {
		add(TypeChanged, "format %s became %s", cmp.Or(of, "none"), nf)
	}
	if ok, nk := itemKind(o), itemKind(n); ok != "" && nk != "" && ok != nk {
		*cs = append(*cs, Change{Key: key + "[]", Kind: TypeChanged, Detail: fmt.Sprintf("items of %s became items of %s", ok, nk)})
	}

	compareEnum(enumValues(o), enumValues(n), enumAliases(o), enumAliases(n), add)
	if len(o.ItemEnum) > 0 || len(n.ItemEnum) > 0 {
		compareEnum(o.ItemEnum, n.ItemEnum, nil, nil, func(kind Kind, format string, args ...any) {
			*cs = append(*cs, Change{Key: key + "[]", Kind: kind, Detail: fmt.Sprintf(format, args...)})
		})
	}
	if oc, nc := canonical(o.Standard["const"]), canonical(n.Standard["const"]); nc != "" && oc != nc {
		add(BoundsNarrowed, "value is now fixed to %s", nc)
	}

	compareBounds(o, n, add)
	if n.Placeholders != nil {
		if o.Placeholders == nil {
			add(BoundsNarrowed, "placeholders are now limited to %s", strings.Join(n.Placeholders, ", "))
		}
		for _, ph := range o.Placeholders {
			if !slices.Contains(n.Placeholders, ph) {
				add(BoundsNarrowed, "placeholder {%s} is no longer accepted", ph)
			}
		}
	}

	// Conditional rules of the dialect: a new or changed one may reject
	// files the old schema accepted.
	if oc, nc := condText(o.RequiredIf), condText(n.RequiredIf); nc != "" && oc != nc && !hasDefault(n) {
		add(RequiredAdded, "now required when %s (was %s)", nc, cmp.Or(oc, "none"))
	}
	if n.Unique != nil && (o.Unique == nil || o.Unique.Key != n.Unique.Key) {
		add(BoundsNarrowed, "elements must now have different values of %s", n.Unique.Key)
	}
	if o.BothOrNeither != n.BothOrNeither && n.BothOrNeither != "" {
		add(RequiredAdded, "now must be set together with %s", n.BothOrNeither)
	}
	if oc, nc := patternUnless(o), patternUnless(n); nc != "" && oc != nc {
		add(BoundsNarrowed, "x-pattern-unless %s became %s", cmp.Or(oc, "none"), nc)
	}

	if o.HasDefault && !(n.HasDefault && sameValue(o.Default, n.Default, o.XType)) {
		nd := ""
		if n.HasDefault {
			nd = canonical(n.Default)
		}
		add(DefaultChanged, "%s became %s", canonical(o.Default), cmp.Or(nd, "none"))
	}
	if oc, nc := defaultIf(o), defaultIf(n); oc != "" && oc != nc {
		add(DefaultChanged, "conditional default %s became %s", oc, cmp.Or(nc, "none"))
	}

	if o.Object != nil && n.Object != nil {
		compareObject(key, o.Object, n.Object, cs)
	}
	if o.Items != nil && n.Items != nil {
		compareObject(key+"[]", o.Items, n.Items, cs)
	}
}

// compareEnum reports values (and value aliases) of the old enum that the
// new one no longer accepts; a new enum on a free key narrows it.
func compareEnum(oe, ne []string, oldAlias, alias map[string]string, add func(Kind, string, ...any)) {
	switch {
	case len(oe) > 0 && len(ne) > 0:
		for _, a := range slices.Sorted(maps.Keys(oldAlias)) {
			if alias[a] == "" && !slices.Contains(ne, a) {
				add(EnumValueRemoved, "value alias %q is no longer accepted", a)
			}
		}
		for _, v := range oe {
			if slices.Contains(ne, v) || alias[v] != "" {
				continue
			}
			add(EnumValueRemoved, "%s is no longer accepted and is not an alias", canonical(v))
		}
	case len(oe) == 0 && len(ne) > 0:
		add(BoundsNarrowed, "values are now limited to %s", canonical(ne))
	}
}

func enumValues(pr *model.Property) []string {
	var out []string
	for _, e := range pr.Enum {
		out = append(out, e.Value)
	}
	return out
}

// enumAliases returns a key's x-enum-aliases, alias → canonical value.
func enumAliases(pr *model.Property) map[string]string {
	out := map[string]string{}
	for _, a := range pr.EnumAliases {
		out[a[0]] = a[1]
	}
	return out
}

// itemKind names the items of a list, or "".
func itemKind(pr *model.Property) string {
	switch pr.Kind {
	case model.StringList:
		return "string"
	case model.IntList:
		return "integer"
	case model.NumberList:
		return "number"
	case model.ObjectList:
		return "object"
	}
	return ""
}

// standardBounds are the standard bounds keywords; lower says whether
// raising one narrows.
var standardBounds = []struct {
	kw    string
	lower bool
}{
	{"minimum", true}, {"exclusiveMinimum", true}, {"maximum", false}, {"exclusiveMaximum", false},
	{"minLength", true}, {"maxLength", false}, {"minItems", true}, {"maxItems", false},
	{"multipleOf", true},
}

func compareBounds(o, n *model.Property, add func(Kind, string, ...any)) {
	for _, b := range standardBounds {
		ov, oHas := o.Standard[b.kw]
		nv, nHas := n.Standard[b.kw]
		if !nHas {
			continue
		}
		if !oHas {
			add(BoundsNarrowed, "new %s %s", b.kw, canonical(nv))
			continue
		}
		of, ok1 := number(ov)
		nf, ok2 := number(nv)
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
	// The x- bounds of sizes and durations, compared as bytes or
	// nanoseconds.
	for _, nb := range n.Bounds {
		ob, oHas := bound(o, nb.Rule)
		lower := strings.Contains(nb.Rule, "minimum")
		switch {
		case !oHas:
			add(BoundsNarrowed, "new %s %s", nb.Rule, canonical(nb.Raw))
		case o.Kind != n.Kind:
			if ob.Raw != nb.Raw {
				add(BoundsNarrowed, "%s %s became %s", nb.Rule, canonical(ob.Raw), canonical(nb.Raw))
			}
		case (lower && nb.Value > ob.Value) || (!lower && nb.Value < ob.Value):
			add(BoundsNarrowed, "%s %s became %s", nb.Rule, canonical(ob.Raw), canonical(nb.Raw))
		}
	}
	if o.Pattern != n.Pattern && n.Pattern != "" {
		add(BoundsNarrowed, "pattern %s became %q", cmp.Or(quoteOrEmpty(o.Pattern), "none"), n.Pattern)
	}
}

func bound(pr *model.Property, rule string) (model.Bound, bool) {
	for _, b := range pr.Bounds {
		if b.Rule == rule {
			return b, true
		}
	}
	return model.Bound{}, false
}

// condText describes a condition in words, or "" for none.
func condText(c *model.Cond) string {
	if c == nil {
		return ""
	}
	if c.Present != nil {
		if *c.Present {
			return c.Key + " is set"
		}
		return c.Key + " is not set"
	}
	return fmt.Sprintf("%s is %s", c.Key, canonical(c.Equals))
}

func patternUnless(pr *model.Property) string {
	if pr.PatternUnless == nil {
		return ""
	}
	return fmt.Sprintf("%q unless %s", pr.PatternUnless.Pattern, condText(&pr.PatternUnless.Unless))
}

func defaultIf(pr *model.Property) string {
	var parts []string
	for _, d := range pr.DefaultIf {
		parts = append(parts, fmt.Sprintf("%s when %s", canonical(d.Value), condText(&d.When)))
	}
	return strings.Join(parts, ", ")
}

func quoteOrEmpty(s string) string {
	if s == "" {
		return ""
	}
	return fmt.Sprintf("%q", s)
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

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

// magnitude reads a default of a size or duration key as bytes or
// nanoseconds.
func magnitude(v any, xtype string) (float64, bool) {
	if n, ok := v.(json.Number); ok {
		f, err := n.Float64()
		return f, err == nil
	}
	s, ok := v.(string)
	if !ok {
		return 0, false
	}
	if xtype == "size" {
		n, err := confkit.ParseSize(s)
		return float64(n), err == nil
	}
	d, err := confkit.ParseDuration(s)
	return float64(d), err == nil
}

// number reads a standard bound.
func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

func props(o *model.Object) map[string]*model.Property {
	out := map[string]*model.Property{}
	for _, pr := range o.Props {
		out[pr.Key] = pr
	}
	return out
}

// aliasedBy returns the key of props that lists name as an alias, or "".
func aliasedBy(props map[string]*model.Property, name string) string {
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if slices.Contains(props[k].Aliases, name) {
			return k
		}
	}
	return ""
}

func hasDefault(pr *model.Property) bool { return pr.HasDefault || len(pr.DefaultIf) > 0 }

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
