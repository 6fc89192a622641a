// Package model reads a schema in picogen's dialect (JSON Schema 2020-12
// plus x- keywords, see schemas/README.md) into the form the code and docs
// generators use. Every error names the schema file and a JSON pointer.
package model

import (
	"strings"
)

// Kind is the Go shape of a property.
type Kind int

// The kinds of property.
const (
	String Kind = iota
	Int
	Number
	Bool
	Enum
	Size
	Duration
	Template
	Secret
	StringList
	IntList
	NumberList
	Nested
	Map
	// ObjectList is an array of tables: "type": "array" with "items" an
	// object with properties. Its element table is Items.
	ObjectList
)

// Schema is one parsed schema file.
type Schema struct {
	// File is the path the schema was read from, for messages.
	File string
	// Name is the file name without .json, such as s3_sink.
	Name string
	// Package is the generated package name, such as s3sinkconfig.
	Package string
	// Kind is sink, source or transform.
	Kind string
	// Path is x-path.
	Path        string
	Title       string
	Description string
	Root        *Object
	// Unknown lists the x- keywords the dialect does not have.
	Unknown []Unknown
	// Embedded is the schema as embedded in the generated package: the
	// source with a format added to every x-type property.
	Embedded []byte
}

// Object is a table: the top level or a nested object property.
type Object struct {
	Pointer string
	// Path is the key path from the top ("" parts for the top level).
	Path  []string
	Props []*Property
	// TypeName is the Go struct type: Config for the top level.
	TypeName string
	Closed   bool // additionalProperties: false
	// DependentRequired is the standard keyword as written, or nil.
	DependentRequired any
	// Element: the table is the element of an array of tables, or inside
	// one, so its keys are known only at run time (columns[2].type); its
	// Path has "[]" for the array.
	Element bool
}

// Cond is a condition on a sibling key.
type Cond struct {
	Key     string
	Present *bool
	Equals  any // string, bool, json.Number
	Prop    *Property
}

// DefaultIf is one x-default-if entry.
type DefaultIf struct {
	When  Cond
	Value any
}

// Bound is an x-minimum-style bound of a size or duration.
type Bound struct {
	Rule  string // x-minimum, x-exclusive-minimum, x-maximum, x-exclusive-maximum
	Raw   string
	Value int64
}

// EnumValue is one enum value and its Go constant.
type EnumValue struct {
	Value string
	Const string
}

// Property is one key.
type Property struct {
	Key     string
	Pointer string
	Path    []string // key path from the top
	GoName  string
	Kind    Kind
	// Pointer types: optional integer/bool without a default.
	Optional    bool
	Required    bool
	Default     any // plain Go value from JSON: string, bool, json.Number, []any, map[string]any
	HasDefault  bool
	Description string
	Examples    []any
	Enum        []EnumValue
	EnumType    string
	EnumAliases [][2]string // alias, value; sorted by alias
	Aliases     []string
	Secret      bool
	// SecretSet: x-secret is written (true or false).
	SecretSet bool
	// EnumDescriptions is x-enum-descriptions: enum value → text.
	EnumDescriptions map[string]string
	// ItemEnum and ItemDescription are the enum and description of the
	// items of a list of strings.
	ItemEnum        []string
	ItemDescription string
	// Types is the JSON type as written, sorted; XType is x-type.
	Types []string
	XType string
	// Pattern is the standard pattern keyword.
	Pattern string
	// Schema is the key's JSON Schema as written, for checks that need the
	// validator (picogen lint checks the default against it).
	Schema map[string]any
	// Standard holds the other standard JSON Schema keywords as written
	// (minimum, maxLength, format, const, ...), which the run-time JSON
	// Schema check enforces.
	Standard map[string]any
	// Placeholders of a template; nil means none declared (any accepted).
	Placeholders  []string
	Bounds        []Bound
	RequiredIf    *Cond
	BothOrNeither string
	DefaultIf     []DefaultIf
	PatternUnless *PatternUnless
	Trim          string
	Messages      map[string]string
	Deprecated    bool
	DeprecatedMsg string
	Object        *Object // Kind Nested
	Items         *Object // Kind ObjectList: the element table
	// Unique is x-unique of an array of tables: the element key no two
	// elements may share.
	Unique *Property
	// Parent is the table the key is in.
	Parent  *Object
	MapElem Kind // Kind Map: String, Int, Number, Bool, or -1 for any
	// TypeList is the JSON type as written, for docs.
	JSONType string
	// Constraints in words, for docs.
	Words []string
}

// PatternUnless is x-pattern-unless.
type PatternUnless struct {
	Pattern string
	Unless  Cond
}

// AnyElem marks a map of any values.
const AnyElem Kind = -1

// KeyPath joins a key path as problems and docs write it: by ".", with the
// element of an array as "[]", as in columns[].type.
func KeyPath(path []string) string {
	var b strings.Builder
	for i, p := range path {
		if i > 0 && p != "[]" {
			b.WriteByte('.')
		}
		b.WriteString(p)
	}
	return b.String()
}

// Walk calls f for every property, depth first in schema order, the keys
// of array elements included (their Parent is Element).
func (o *Object) Walk(f func(*Property)) {
	for _, pr := range o.Props {
		f(pr)
		if pr.Object != nil {
			pr.Object.Walk(f)
		}
		if pr.Items != nil {
			pr.Items.Walk(f)
		}
	}
}

// InElement reports whether the key is in the element of an array.
func (pr *Property) InElement() bool { return pr.Parent != nil && pr.Parent.Element }

// DotPath returns the key path joined by ".", an array's element written
// "[]" (columns[].type).
func (pr *Property) DotPath() string { return KeyPath(pr.Path) }

// Key returns the table's key path ("" for the top level), an array's
// element written "[]".
func (o *Object) Key() string { return KeyPath(o.Path) }

// Objects returns o and every nested object and array element, depth first.
func (o *Object) Objects() []*Object {
	out := []*Object{o}
	for _, pr := range o.Props {
		if pr.Object != nil {
			out = append(out, pr.Object.Objects()...)
		}
		if pr.Items != nil {
			out = append(out, pr.Items.Objects()...)
		}
	}
	return out
}
