// Package transform holds the built-in transforms a definition can list
// under [[transforms]]: add_fields, delete_fields and rename_fields. Each
// works on records whose decoded value is a JSON object (a map); any other
// value fails the record with an error naming the transform, which nacks the
// batch.
//
// Field names are dotted paths into nested objects: "meta.env" is the env
// field of the meta object.
package transform

import (
	"fmt"
	"sort"
	"strings"

	"github.com/picomq/pico-connectors/sdk"
)

func object(name string, rec *sdk.TransformRecord) (map[string]any, error) {
	m, ok := rec.Value.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the record is not a JSON object (got %s); use it with schema json or avro records", name, describe(rec.Value))
	}
	return m, nil
}

func describe(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case []any:
		return "an array"
	case []byte:
		return "bytes"
	case string:
		return "a string"
	}
	return fmt.Sprintf("%T", v)
}

func split(path string) []string { return strings.Split(path, ".") }

// lookup returns the object that holds the last segment of path, creating
// the objects on the way when create is set. ok is false when the path
// crosses a value that is not an object (or is missing and create is off).
func lookup(m map[string]any, segs []string, create bool) (map[string]any, bool) {
	cur := m
	for _, s := range segs[:len(segs)-1] {
		next, found := cur[s]
		if !found {
			if !create {
				return nil, false
			}
			n := map[string]any{}
			cur[s] = n
			cur = n
			continue
		}
		nm, isMap := next.(map[string]any)
		if !isMap {
			return nil, false
		}
		cur = nm
	}
	return cur, true
}

// AddFields returns the add_fields transform: it sets each field to its
// value, creating nested objects for dotted names. With overwrite false an
// existing field is left alone.
func AddFields(fields map[string]any, overwrite bool) sdk.Transform {
	names := make([]string, 0, len(fields))
	for k := range fields {
		names = append(names, k)
	}
	sort.Strings(names)
	return &addFields{names: names, fields: fields, overwrite: overwrite}
}

type addFields struct {
	names     []string
	fields    map[string]any
	overwrite bool
}

// Apply sets the fields on the record.
func (a *addFields) Apply(rec *sdk.TransformRecord) error {
	m, err := object("add_fields", rec)
	if err != nil {
		return err
	}
	for _, name := range a.names {
		segs := split(name)
		parent, ok := lookup(m, segs, true)
		if !ok {
			return fmt.Errorf("add_fields: cannot set %q: a part of the path is not an object", name)
		}
		last := segs[len(segs)-1]
		if _, exists := parent[last]; exists && !a.overwrite {
			continue
		}
		parent[last] = copyValue(a.fields[name])
	}
	return nil
}

// copyValue deep-copies maps and slices so records never share them.
func copyValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = copyValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = copyValue(e)
		}
		return out
	}
	return v
}

// DeleteFields returns the delete_fields transform: it removes each field;
// missing fields are ignored.
func DeleteFields(fields []string) sdk.Transform {
	return &deleteFields{fields: append([]string(nil), fields...)}
}

type deleteFields struct{ fields []string }

// Apply removes the fields from the record.
func (d *deleteFields) Apply(rec *sdk.TransformRecord) error {
	m, err := object("delete_fields", rec)
	if err != nil {
		return err
	}
	for _, name := range d.fields {
		segs := split(name)
		if parent, ok := lookup(m, segs, false); ok {
			delete(parent, segs[len(segs)-1])
		}
	}
	return nil
}

// RenameFields returns the rename_fields transform: it moves each old field
// to its new name (creating nested objects for a dotted new name); missing
// fields are ignored and an existing field under the new name is replaced.
// Renames apply in the order of the old names, sorted.
func RenameFields(fields map[string]string) sdk.Transform {
	olds := make([]string, 0, len(fields))
	for k := range fields {
		olds = append(olds, k)
	}
	sort.Strings(olds)
	return &renameFields{olds: olds, fields: fields}
}

type renameFields struct {
	olds   []string
	fields map[string]string
}

// Apply moves the fields to their new names.
func (r *renameFields) Apply(rec *sdk.TransformRecord) error {
	m, err := object("rename_fields", rec)
	if err != nil {
		return err
	}
	for _, old := range r.olds {
		segs := split(old)
		parent, ok := lookup(m, segs, false)
		if !ok {
			continue
		}
		v, found := parent[segs[len(segs)-1]]
		if !found {
			continue
		}
		delete(parent, segs[len(segs)-1])
		nsegs := split(r.fields[old])
		dst, ok := lookup(m, nsegs, true)
		if !ok {
			return fmt.Errorf("rename_fields: cannot move %q to %q: a part of the new path is not an object", old, r.fields[old])
		}
		dst[nsegs[len(nsegs)-1]] = v
	}
	return nil
}
