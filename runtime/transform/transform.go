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
	"maps"
	"slices"
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

// parentOf returns the object that holds the last segment of the dotted
// path, and that segment, creating the objects on the way when create is
// set. ok is false when the path crosses a value that is not an object (or
// is missing and create is off).
func parentOf(m map[string]any, path string, create bool) (parent map[string]any, last string, ok bool) {
	segs := strings.Split(path, ".")
	cur := m
	for _, s := range segs[:len(segs)-1] {
		next, found := cur[s]
		if !found {
			if !create {
				return nil, "", false
			}
			n := map[string]any{}
			cur[s] = n
			cur = n
			continue
		}
		nm, isMap := next.(map[string]any)
		if !isMap {
			return nil, "", false
		}
		cur = nm
	}
	return cur, segs[len(segs)-1], true
}

// remove deletes the field at the dotted path from m and returns its value;
// found is false when there is no such field.
func remove(m map[string]any, path string) (v any, found bool) {
	parent, last, ok := parentOf(m, path, false)
	if !ok {
		return nil, false
	}
	v, found = parent[last]
	delete(parent, last)
	return v, found
}

// AddFields returns the add_fields transform: it sets each field to its
// value, creating nested objects for dotted names. With overwrite false an
// existing field is left alone.
func AddFields(fields map[string]any, overwrite bool) sdk.Transform {
	return &addFields{names: slices.Sorted(maps.Keys(fields)), fields: fields, overwrite: overwrite}
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
		parent, last, ok := parentOf(m, name, true)
		if !ok {
			return fmt.Errorf("add_fields: cannot set %q: a part of the path is not an object", name)
		}
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
		remove(m, name)
	}
	return nil
}

// RenameFields returns the rename_fields transform: it moves each old field
// to its new name (creating nested objects for a dotted new name); missing
// fields are ignored and an existing field under the new name is replaced.
// Renames apply in the order of the old names, sorted.
func RenameFields(fields map[string]string) sdk.Transform {
	return &renameFields{olds: slices.Sorted(maps.Keys(fields)), fields: fields}
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
		v, found := remove(m, old)
		if !found {
			continue
		}
		dst, dstLast, ok := parentOf(m, r.fields[old], true)
		if !ok {
			return fmt.Errorf("rename_fields: cannot move %q to %q: a part of the new path is not an object", old, r.fields[old])
		}
		dst[dstLast] = v
	}
	return nil
}
