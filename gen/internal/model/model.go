// Package model reads a schema in picogen's dialect (JSON Schema 2020-12
// plus x- keywords, see schemas/README.md) into the form the code and docs
// generators use. Every error names the schema file and a JSON pointer.
package model

import (
	"encoding/json"
	"fmt"
	"math/big"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/gen/internal/jsonx"
	"github.com/picomq/pico-connectors/gen/internal/naming"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk/confgen"
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

type parser struct {
	file  string
	types *naming.Scope
	errs  confkit.Problems
	// inElement counts the arrays of tables being parsed.
	inElement int
	unknown   []Unknown
}

func (p *parser) fail(ptr, format string, a ...any) {
	p.errs = append(p.errs, schemaProblem(p.file, ptr, fmt.Sprintf(format, a...)))
}

// schemaProblem is a problem of the schema file at JSON pointer ptr ("" for
// the whole document).
func schemaProblem(file, ptr, msg string) confkit.Problem {
	return confkit.Problem{File: file, Key: ptr, Rule: "schema", Message: msg}
}

// Reserved package-level names of a generated package.
var reserved = []string{
	"Config", "Load", "Name", "Path", "Schema", "Summary", "RegisterSink", "RegisterSource",
	"RegisterTransform", "Registration",
}

// Parse reads one schema. name is the file name without .json. On schema
// errors it returns them as confkit.Problems, each keyed by its JSON
// pointer, with what could be read (nil when the file is not a JSON
// object), for picogen lint and compat to go on with.
func Parse(file, name string, data []byte) (*Schema, error) {
	root, err := jsonx.Parse(data)
	if err != nil {
		return nil, confkit.Problems{schemaProblem(file, "", "not valid JSON: "+err.Error())}
	}
	p := &parser{file: file, types: naming.NewScope(reserved...)}
	if !root.IsObject() {
		return nil, confkit.Problems{schemaProblem(file, "", "a schema must be a JSON object")}
	}
	s := &Schema{File: file, Name: name, Package: naming.Package(name)}
	s.Title, _ = root.Get("title").String()
	if s.Title != "" && s.Title != name {
		p.fail("/title", "title %q must equal the file name %q", s.Title, name)
	}
	p.unknownKeywords(root, "", []string{"x-kind", "x-path"})
	s.Description, _ = root.Get("description").String()
	s.Kind, _ = root.Get("x-kind").String()
	switch s.Kind {
	case "sink", "source", "transform":
	case "":
		p.fail("/x-kind", "x-kind is required: sink, source or transform")
	default:
		p.fail("/x-kind", "x-kind %q is not sink, source or transform", s.Kind)
	}
	s.Path, _ = root.Get("x-path").String()
	if s.Path == "" {
		if s.Kind == "transform" {
			s.Path = name
		} else {
			p.fail("/x-path", "x-path is required for a %s, such as \"libpicomq_connector_%s\"", s.Kind, name)
		}
	}
	if ty, _ := root.Get("type").String(); ty != "object" {
		p.fail("/type", "the top level must be \"type\": \"object\"")
	}
	s.Root = p.object(root, "", nil, "Config")
	p.injectFormats(root, "")
	if len(p.errs) == 0 {
		s.Embedded = jsonx.Marshal(root)
		if _, err := confgen.CompileSchema(name, s.Embedded); err != nil {
			p.fail("", "not a valid JSON Schema 2020-12: %v", err)
		}
	}
	s.Unknown = p.unknown
	if len(p.errs) > 0 {
		return s, p.errs
	}
	return s, nil
}

// injectFormats adds "format" to each x-type property, and
// "additionalProperties": false to each table that does not say, so
// unknown keys are rejected; recursively.
func (p *parser) injectFormats(n *jsonx.Node, ptr string) {
	props := n.Get("properties")
	if !props.IsObject() {
		return
	}
	if n.Get("additionalProperties") == nil {
		n.Set("additionalProperties", &jsonx.Node{Value: false}, "")
	}
	for _, k := range props.Keys {
		pn := props.Fields[k]
		if !pn.IsObject() {
			continue
		}
		if xt, ok := pn.Get("x-type").String(); ok && pn.Get("format") == nil {
			pn.Set("format", jsonx.NewString(xt), "x-type")
		}
		p.injectFormats(pn, "")
		if items := pn.Get("items"); items.IsObject() {
			p.injectFormats(items, "")
		}
	}
}

func (p *parser) object(n *jsonx.Node, ptr string, path []string, typeName string) *Object {
	o := &Object{Pointer: ptr, Path: path, TypeName: typeName, Closed: true, DependentRequired: n.Get("dependentRequired").Interface()}
	if ap := n.Get("additionalProperties"); ap != nil {
		if b, ok := ap.Bool(); !ok || b {
			o.Closed = false
		}
	}
	required := map[string]bool{}
	if r := n.Get("required"); r != nil {
		if !r.IsArray() {
			p.fail(ptr+"/required", "required must be an array of key names")
		} else {
			for i, it := range r.Items {
				s, ok := it.String()
				if !ok {
					p.fail(fmt.Sprintf("%s/required/%d", ptr, i), "required entries must be strings")
					continue
				}
				required[s] = true
			}
		}
	}
	props := n.Get("properties")
	if props == nil {
		return o
	}
	if !props.IsObject() {
		p.fail(ptr+"/properties", "properties must be an object")
		return o
	}
	fields := naming.NewScope("Redacted", "Warnings")
	for k := range required {
		if props.Get(k) == nil {
			p.fail(ptr+"/required", "required names %q, which is not a property", k)
		}
	}
	for _, k := range props.Keys {
		pptr := ptr + "/properties/" + jsonx.Escape(k)
		pn := props.Fields[k]
		if !pn.IsObject() {
			p.fail(pptr, "a property must be an object")
			continue
		}
		if k == "" {
			p.fail(pptr, "empty key names are not supported")
			continue
		}
		prop := p.property(pn, pptr, k, append(append([]string(nil), path...), k), required[k], fields)
		if prop != nil {
			prop.Parent = o
			o.Props = append(o.Props, prop)
		}
	}
	// Aliases must not collide with keys or each other.
	seen := map[string]string{}
	for _, pr := range o.Props {
		seen[pr.Key] = pr.Pointer
	}
	for _, pr := range o.Props {
		for _, a := range pr.Aliases {
			if other, dup := seen[a]; dup {
				p.fail(pr.Pointer+"/x-aliases", "alias %q is already used at %s", a, other)
			}
			seen[a] = pr.Pointer
		}
	}
	p.resolveConds(o)
	return o
}

func (p *parser) property(n *jsonx.Node, ptr, key string, path []string, required bool, fields *naming.Scope) *Property {
	pr := &Property{Key: key, Pointer: ptr, Path: path, Required: required, Messages: map[string]string{}, Standard: map[string]any{}}
	pr.Schema, _ = n.Interface().(map[string]any)
	pr.GoName = fields.Take(naming.Exported(key))
	if !p.shape(n, ptr, pr) {
		return nil
	}
	for _, kw := range propertyKeywords {
		if v := n.Get(kw.name); v != nil {
			kw.parse(p, pr, v, ptr+"/"+jsonx.Escape(kw.name))
		}
	}
	for _, k := range n.Keys {
		if !strings.HasPrefix(k, "x-") && !structural[k] && propertyKeyword(k) == nil {
			pr.Standard[k] = n.Fields[k].Interface()
		}
	}
	p.unknownKeywords(n, ptr, propertyKeywordNames)
	if pr.Kind == ObjectList && pr.HasDefault {
		p.fail(ptr+"/default", "an array of objects takes no default: give the element keys defaults instead")
		pr.HasDefault, pr.Default = false, nil
	}
	// Type of the pointer and check of the default.
	pr.Optional = !pr.Required && !pr.HasDefault && (pr.Kind == Int || pr.Kind == Bool)
	if pr.HasDefault && !p.valueFits(pr, pr.Default) {
		p.fail(ptr+"/default", "default %s does not fit the key's type or rules", compact(pr.Default))
	}
	pr.Words = constraintWords(n, pr)
	return pr
}

// structural are the keywords shape reads: the Go type of a key.
var structural = map[string]bool{"type": true, "x-type": true, "items": true, "properties": true, "additionalProperties": true, "required": true}

// shape reads a key's type (type, x-type, items, properties,
// additionalProperties) into pr.Kind; false when there is none to generate.
func (p *parser) shape(n *jsonx.Node, ptr string, pr *Property) bool {
	path := pr.Path
	types := jsonTypes(n.Get("type"))
	pr.JSONType = strings.Join(types, " or ")
	pr.Types = append([]string(nil), types...)
	sort.Strings(pr.Types)
	xtype, _ := n.Get("x-type").String()
	pr.XType = xtype
	if n.Get("x-type") != nil && xtype == "" {
		p.fail(ptr+"/x-type", "x-type must be a string: size, duration or template")
	}
	nonNull := without(types, "null")
	switch {
	case xtype != "":
		switch xtype {
		case "size":
			pr.Kind = Size
			if !subset(nonNull, "string", "integer") || len(nonNull) == 0 {
				p.fail(ptr+"/type", "x-type size needs \"type\": \"string\" or [\"string\", \"integer\"]")
			}
		case "duration":
			pr.Kind = Duration
		case "template":
			pr.Kind = Template
		default:
			p.fail(ptr+"/x-type", "unknown x-type %q: use size, duration or template", xtype)
		}
		if xtype != "size" && !(len(nonNull) == 1 && nonNull[0] == "string") {
			p.fail(ptr+"/type", "x-type %s needs \"type\": \"string\"", xtype)
		}
		return true
	case len(nonNull) != 1:
		if len(nonNull) == 0 {
			p.fail(ptr+"/type", "type is required: string, integer, number, boolean, array or object")
		} else {
			p.fail(ptr+"/type", "a union type %v needs an x-type that explains it", nonNull)
		}
		return false
	}
	switch nonNull[0] {
	case "string":
		pr.Kind = String
	case "integer":
		pr.Kind = Int
	case "number":
		pr.Kind = Number
	case "boolean":
		pr.Kind = Bool
	case "array":
		items := n.Get("items")
		it := jsonTypes(items.Get("type"))
		if !items.IsObject() || len(it) != 1 {
			p.fail(ptr+"/items", "an array needs \"items\" with one type: string, integer, number, or object with properties")
			return false
		}
		switch it[0] {
		case "object":
			if !items.Get("properties").IsObject() {
				p.fail(ptr+"/items", "an array of objects needs \"items\" with \"properties\" (the keys of each element)")
				return false
			}
			pr.Kind = ObjectList
			p.unknownKeywords(items, ptr+"/items", nil)
			p.inElement++
			pr.Items = p.object(items, ptr+"/items", append(append([]string(nil), path...), "[]"), p.types.Take(naming.Exported(goPath(path)+"_item")))
			p.inElement--
			for _, o := range pr.Items.Objects() {
				o.Element = true
			}
			return true
		case "string":
			pr.Kind = StringList
			if e := items.Get("enum"); e.IsArray() {
				for _, v := range e.Items {
					s, _ := v.String()
					pr.ItemEnum = append(pr.ItemEnum, s)
				}
			}
			pr.ItemDescription, _ = items.Get("description").String()
		case "integer":
			pr.Kind = IntList
		case "number":
			pr.Kind = NumberList
		default:
			p.fail(ptr+"/items/type", "arrays of %s are not supported: use string, integer, number or object items", it[0])
			return false
		}
		p.unknownKeywords(items, ptr+"/items", nil)
	case "object":
		if props := n.Get("properties"); props != nil {
			pr.Kind = Nested
			pr.Object = p.object(n, ptr, path, p.types.Take(naming.Exported(goPath(path))))
			return true
		}
		pr.Kind = Map
		pr.MapElem = AnyElem
		if ap := n.Get("additionalProperties"); ap.IsObject() {
			switch t := jsonTypes(ap.Get("type")); {
			case len(t) == 0:
			case len(t) == 1 && t[0] == "string":
				pr.MapElem = String
			case len(t) == 1 && t[0] == "integer":
				pr.MapElem = Int
			case len(t) == 1 && t[0] == "number":
				pr.MapElem = Number
			case len(t) == 1 && t[0] == "boolean":
				pr.MapElem = Bool
			}
		} else if b, ok := ap.Bool(); ok && !b {
			p.fail(ptr, "an object needs properties, or additionalProperties for a map")
			return false
		}
	default:
		p.fail(ptr+"/type", "unknown type %q", nonNull[0])
		return false
	}
	return true
}

// keyword is one keyword of a property: parse reads its value v (at the
// JSON pointer ptr) into pr, after shape has set pr.Kind.
type keyword struct {
	name  string
	parse func(p *parser, pr *Property, v *jsonx.Node, ptr string)
}

// propertyKeywords is every keyword of a property the generator reads
// beside the structural ones, in the order they are parsed (enum before
// x-enum-aliases, x-placeholders before defaults that are templates).
// Adding a keyword starts here; see schemas/README.md.
var propertyKeywords = []keyword{
	{"description", func(p *parser, pr *Property, v *jsonx.Node, ptr string) { pr.Description, _ = v.String() }},
	{"default", func(p *parser, pr *Property, v *jsonx.Node, ptr string) {
		pr.Default, pr.HasDefault = v.Interface(), true
	}},
	{"examples", parseExamples},
	{"deprecated", func(p *parser, pr *Property, v *jsonx.Node, ptr string) {
		if b, ok := v.Bool(); ok {
			pr.Deprecated = b
		}
	}},
	{"x-deprecated", func(p *parser, pr *Property, v *jsonx.Node, ptr string) {
		if m, ok := v.String(); ok {
			pr.Deprecated, pr.DeprecatedMsg = true, m
		}
	}},
	{"x-secret", parseSecret},
	{"x-trim", func(p *parser, pr *Property, v *jsonx.Node, ptr string) { pr.Trim, _ = v.String() }},
	{"x-message", parseMessages},
	{"enum", parseEnum},
	{"x-enum-aliases", parseEnumAliases},
	{"x-enum-descriptions", parseEnumDescriptions},
	{"x-aliases", parseAliases},
	{"x-placeholders", parsePlaceholders},
	{"x-minimum", parseBound},
	{"x-exclusive-minimum", parseBound},
	{"x-maximum", parseBound},
	{"x-exclusive-maximum", parseBound},
	{"x-required-if", func(p *parser, pr *Property, v *jsonx.Node, ptr string) {
		if cond, ok := p.cond(v, ptr); ok {
			pr.RequiredIf = &cond
		}
	}},
	{"x-both-or-neither", func(p *parser, pr *Property, v *jsonx.Node, ptr string) {
		s, ok := v.String()
		if !ok || s == pr.Key {
			p.fail(ptr, "x-both-or-neither must name another key of the same table")
			return
		}
		pr.BothOrNeither = s
	}},
	{"x-default-if", parseDefaultIf},
	{"x-unique", parseUnique},
	{"x-pattern-unless", parsePatternUnless},
	{"pattern", func(p *parser, pr *Property, v *jsonx.Node, ptr string) {
		if pat, ok := v.String(); ok {
			if _, err := regexp.Compile(pat); err != nil {
				p.fail(ptr, "pattern is not a regular expression Go can run: %v", err)
			}
			pr.Pattern = pat
		}
	}},
}

// propertyKeywordNames are the x- keywords a property may have.
var propertyKeywordNames = func() []string {
	var out []string
	for k := range structural {
		if strings.HasPrefix(k, "x-") {
			out = append(out, k)
		}
	}
	for _, kw := range propertyKeywords {
		if strings.HasPrefix(kw.name, "x-") {
			out = append(out, kw.name)
		}
	}
	sort.Strings(out)
	return out
}()

// PropertyKeywords returns the keywords of a key the model reads, the
// structural ones (type, items, ...) included, sorted.
func PropertyKeywords() []string {
	var out []string
	for k := range structural {
		out = append(out, k)
	}
	for _, kw := range propertyKeywords {
		out = append(out, kw.name)
	}
	sort.Strings(out)
	return out
}

func propertyKeyword(name string) *keyword {
	for i := range propertyKeywords {
		if propertyKeywords[i].name == name {
			return &propertyKeywords[i]
		}
	}
	return nil
}

// Unknown is an x- keyword the dialect does not have, at Pointer. The
// generator ignores it; picogen lint reports it.
type Unknown struct {
	Pointer string
	Keyword string
	// Known is the keywords the dialect has at Pointer, for a suggestion
	// (confkit.DidYouMean).
	Known []string
}

// unknownKeywords records the x- keywords of n that are not in known.
func (p *parser) unknownKeywords(n *jsonx.Node, ptr string, known []string) {
	for _, k := range n.Keys {
		if strings.HasPrefix(k, "x-") && !slices.Contains(known, k) {
			p.unknown = append(p.unknown, Unknown{Pointer: ptr + "/" + jsonx.Escape(k), Keyword: k, Known: known})
		}
	}
}

func parseExamples(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if !v.IsArray() {
		p.fail(ptr, "examples must be an array")
		return
	}
	for _, it := range v.Items {
		pr.Examples = append(pr.Examples, it.Interface())
	}
}

func parseSecret(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	b, ok := v.Bool()
	if !ok {
		p.fail(ptr, "x-secret must be true or false")
		return
	}
	pr.SecretSet, pr.Secret = true, b
	if !b {
		return
	}
	if pr.Kind != String {
		p.fail(ptr, "x-secret applies only to string keys")
		return
	}
	pr.Kind = Secret
}

func parseMessages(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if !v.IsObject() {
		p.fail(ptr, "x-message must be an object of rule name to message")
		return
	}
	for _, rk := range v.Keys {
		s, ok := v.Fields[rk].String()
		if !ok {
			p.fail(ptr+"/"+jsonx.Escape(rk), "a message must be a string")
			continue
		}
		pr.Messages[rk] = s
	}
}

func parseEnum(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if pr.Kind != String || !v.IsArray() || len(v.Items) == 0 {
		p.fail(ptr, "enum is supported on string keys only, as a non-empty array of strings")
		return
	}
	pr.Kind = Enum
	pr.EnumType = p.types.Take(naming.Exported(goPath(pr.Path)))
	consts := naming.NewScope()
	for i, it := range v.Items {
		s, ok := it.String()
		if !ok {
			p.fail(fmt.Sprintf("%s/%d", ptr, i), "enum values must be strings")
			continue
		}
		c := pr.EnumType + naming.Part(s)
		if naming.Part(s) == "" {
			c = pr.EnumType + "Value"
		}
		c = p.types.Take(consts.Take(c))
		pr.Enum = append(pr.Enum, EnumValue{Value: s, Const: c})
	}
}

func parseEnumAliases(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if p.refuseInElement(ptr) {
		return
	}
	if pr.Kind != Enum || !v.IsObject() {
		p.fail(ptr, "x-enum-aliases needs an enum and must be an object of alias to value")
		return
	}
	for _, a := range v.Keys {
		val, ok := v.Fields[a].String()
		if !ok || !pr.hasEnum(val) {
			p.fail(ptr+"/"+jsonx.Escape(a), "alias %q must map to one of the enum values", a)
			continue
		}
		if pr.hasEnum(a) {
			p.fail(ptr+"/"+jsonx.Escape(a), "alias %q is itself an enum value", a)
			continue
		}
		pr.EnumAliases = append(pr.EnumAliases, [2]string{a, val})
	}
	sort.Slice(pr.EnumAliases, func(i, j int) bool { return pr.EnumAliases[i][0] < pr.EnumAliases[j][0] })
}

func parseEnumDescriptions(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if pr.Kind != Enum || !v.IsObject() {
		p.fail(ptr, "x-enum-descriptions needs an enum and must be an object of value to text")
		return
	}
	pr.EnumDescriptions = map[string]string{}
	for _, k := range v.Keys {
		s, ok := v.Fields[k].String()
		if !ok || !pr.hasEnum(k) {
			p.fail(ptr+"/"+jsonx.Escape(k), "%q must be one of the enum values, with a text", k)
			continue
		}
		pr.EnumDescriptions[k] = s
	}
}

func parseAliases(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if p.refuseInElement(ptr) {
		return
	}
	if !v.IsArray() {
		p.fail(ptr, "x-aliases must be an array of key names")
		return
	}
	for i, it := range v.Items {
		s, ok := it.String()
		if !ok || s == "" || s == pr.Key {
			p.fail(fmt.Sprintf("%s/%d", ptr, i), "an alias must be a non-empty string other than the key")
			continue
		}
		pr.Aliases = append(pr.Aliases, s)
	}
}

var placeholderName = regexp.MustCompile(`^[A-Za-z0-9_]+(\[[a-z]*\])?$`)

func parsePlaceholders(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if pr.Kind != Template || !v.IsArray() {
		p.fail(ptr, "x-placeholders needs x-type template and must be an array of names")
		return
	}
	pr.Placeholders = []string{}
	for i, it := range v.Items {
		s, ok := it.String()
		if !ok || !placeholderName.MatchString(s) {
			p.fail(fmt.Sprintf("%s/%d", ptr, i), "a placeholder is a name such as \"topic\", or \"name[n]\" for an indexed one")
			continue
		}
		pr.Placeholders = append(pr.Placeholders, s)
	}
}

func parseBound(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	rule := ptr[strings.LastIndexByte(ptr, '/')+1:]
	raw, ok := v.String()
	if !ok {
		if num, isNum := v.Number(); isNum {
			raw, ok = string(num), true
		}
	}
	var n int64
	var err error
	switch {
	case !ok:
		err = fmt.Errorf("must be a string")
	case pr.Kind == Size:
		var s confkit.Size
		s, err = confkit.ParseSize(raw)
		n = int64(s)
	case pr.Kind == Duration:
		var d time.Duration
		d, err = confkit.ParseDuration(raw)
		n = int64(d)
	default:
		err = fmt.Errorf("applies only to x-type size or duration; use the standard keyword for numbers")
	}
	if err != nil {
		p.fail(ptr, "%s: %v", rule, err)
		return
	}
	pr.Bounds = append(pr.Bounds, Bound{Rule: rule, Raw: raw, Value: n})
}

func parseDefaultIf(p *parser, pr *Property, d *jsonx.Node, ptr string) {
	items := []*jsonx.Node{d}
	if d.IsArray() {
		items = d.Items
	}
	for i, it := range items {
		ip := ptr
		if d.IsArray() {
			ip = fmt.Sprintf("%s/%d", ptr, i)
		}
		if !it.IsObject() || it.Get("when") == nil || it.Get("value") == nil {
			p.fail(ip, "x-default-if needs {\"when\": CONDITION, \"value\": V}")
			continue
		}
		cond, ok := p.cond(it.Get("when"), ip+"/when")
		if !ok {
			continue
		}
		val := it.Get("value").Interface()
		if !p.valueFits(pr, val) {
			p.fail(ip+"/value", "value %v does not fit the key's type", val)
			continue
		}
		pr.DefaultIf = append(pr.DefaultIf, DefaultIf{When: cond, Value: val})
	}
}

func parseUnique(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	k, ok := v.String()
	if pr.Kind != ObjectList || !ok {
		p.fail(ptr, "x-unique applies to an array of tables and names one of its element keys")
		return
	}
	for _, e := range pr.Items.Props {
		if e.Key == k {
			if e.Kind != String && e.Kind != Enum && e.Kind != Int {
				p.fail(ptr, "x-unique names %q, which is not a string, enum or integer key", k)
				return
			}
			pr.Unique = e
			return
		}
	}
	p.fail(ptr, "x-unique names %q, which is not a key of the elements", k)
}

func parsePatternUnless(p *parser, pr *Property, pu *jsonx.Node, ptr string) {
	pat, ok := pu.Get("pattern").String()
	if !ok || pu.Get("unless") == nil {
		p.fail(ptr, "x-pattern-unless needs {\"pattern\": REGEXP, \"unless\": CONDITION}")
		return
	}
	if _, err := regexp.Compile(pat); err != nil {
		p.fail(ptr+"/pattern", "not a valid regular expression: %v", err)
		return
	}
	if pr.Kind != String && pr.Kind != Secret && pr.Kind != Enum {
		p.fail(ptr, "x-pattern-unless applies only to string keys")
		return
	}
	if cond, ok := p.cond(pu.Get("unless"), ptr+"/unless"); ok {
		pr.PatternUnless = &PatternUnless{Pattern: pat, Unless: cond}
	}
}

// refuseInElement reports (and returns true) when the keyword at ptr is
// used in the element of an array of tables, where it is not supported.
func (p *parser) refuseInElement(ptr string) bool {
	if p.inElement == 0 {
		return false
	}
	p.fail(ptr, "%s is not supported on the keys of an array's elements", ptr[strings.LastIndexByte(ptr, '/')+1:])
	return true
}

// goPath joins a key path for Go names, leaving out the "[]" of arrays.
func goPath(path []string) string {
	var parts []string
	for _, p := range path {
		if p != "[]" {
			parts = append(parts, p)
		}
	}
	return strings.Join(parts, "_")
}

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

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (pr *Property) hasEnum(v string) bool {
	for _, e := range pr.Enum {
		if e.Value == v {
			return true
		}
	}
	return false
}

// valueFits reports whether a JSON value can be the key's value.
func (p *parser) valueFits(pr *Property, v any) bool {
	switch pr.Kind {
	case String, Secret:
		_, ok := v.(string)
		return ok
	case Enum:
		s, ok := v.(string)
		return ok && pr.hasEnum(s)
	case Int:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case Number:
		_, ok := v.(json.Number)
		return ok
	case Bool:
		_, ok := v.(bool)
		return ok
	case Size:
		if s, ok := v.(string); ok {
			_, err := confkit.ParseSize(s)
			return err == nil
		}
		if n, ok := v.(json.Number); ok {
			i, err := n.Int64()
			return err == nil && i >= 0
		}
		return false
	case Duration:
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, err := confkit.ParseDuration(s)
		return err == nil
	case Template:
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, err := confkit.ParseTemplate(s, pr.Placeholders)
		return err == nil
	case StringList, IntList, NumberList:
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range l {
			switch pr.Kind {
			case StringList:
				if _, ok := e.(string); !ok {
					return false
				}
			case IntList:
				n, ok := e.(json.Number)
				if !ok {
					return false
				}
				if _, err := n.Int64(); err != nil {
					return false
				}
			default:
				if _, ok := e.(json.Number); !ok {
					return false
				}
			}
		}
		return true
	case Map:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if pr.MapElem == AnyElem {
			return true
		}
		for _, e := range m {
			if !p.valueFits(&Property{Kind: pr.MapElem}, e) {
				return false
			}
		}
		return true
	case Nested:
		return false
	}
	return false
}

func (p *parser) cond(n *jsonx.Node, ptr string) (Cond, bool) {
	if !n.IsObject() {
		p.fail(ptr, "a condition is {\"key\": K, \"equals\": V} or {\"key\": K, \"present\": true}")
		return Cond{}, false
	}
	k, ok := n.Get("key").String()
	if !ok || k == "" {
		p.fail(ptr+"/key", "a condition needs the key of a sibling property")
		return Cond{}, false
	}
	c := Cond{Key: k}
	if pr := n.Get("present"); pr != nil {
		b, ok := pr.Bool()
		if !ok {
			p.fail(ptr+"/present", "present must be true or false")
			return Cond{}, false
		}
		c.Present = &b
	}
	if eq := n.Get("equals"); eq != nil {
		c.Equals = eq.Interface()
		if c.Present != nil {
			p.fail(ptr, "use either equals or present, not both")
			return Cond{}, false
		}
	}
	if c.Present == nil && c.Equals == nil {
		p.fail(ptr, "a condition needs equals or present")
		return Cond{}, false
	}
	return c, true
}

// resolveConds links each condition to its sibling property and checks
// that the compared value fits.
func (p *parser) resolveConds(o *Object) {
	byKey := map[string]*Property{}
	for _, pr := range o.Props {
		byKey[pr.Key] = pr
	}
	link := func(c *Cond, ptr string) {
		sib := byKey[c.Key]
		if sib == nil {
			p.fail(ptr, "condition names %q, which is not a key of the same table", c.Key)
			return
		}
		c.Prop = sib
		if c.Equals != nil {
			switch sib.Kind {
			case String, Enum, Int, Number, Bool:
				if !p.valueFits(sib, c.Equals) {
					p.fail(ptr, "equals %s does not fit key %q", compact(c.Equals), c.Key)
				}
			default:
				p.fail(ptr, "equals compares only string, enum, integer, number and boolean keys; %q is none", c.Key)
			}
		}
	}
	for _, pr := range o.Props {
		if pr.RequiredIf != nil {
			link(pr.RequiredIf, pr.Pointer+"/x-required-if")
		}
		for i := range pr.DefaultIf {
			link(&pr.DefaultIf[i].When, pr.Pointer+"/x-default-if")
		}
		if pr.PatternUnless != nil {
			link(&pr.PatternUnless.Unless, pr.Pointer+"/x-pattern-unless/unless")
		}
		if pr.BothOrNeither != "" && byKey[pr.BothOrNeither] == nil {
			p.fail(pr.Pointer+"/x-both-or-neither", "x-both-or-neither names %q, which is not a key of the same table", pr.BothOrNeither)
		}
	}
}

func jsonTypes(n *jsonx.Node) []string {
	if n == nil {
		return nil
	}
	if s, ok := n.String(); ok {
		return []string{s}
	}
	var out []string
	for _, it := range n.Items {
		if s, ok := it.String(); ok {
			out = append(out, s)
		}
	}
	return out
}

func without(l []string, x string) []string {
	var out []string
	for _, s := range l {
		if s != x {
			out = append(out, s)
		}
	}
	return out
}

func subset(l []string, allowed ...string) bool {
	for _, s := range l {
		ok := false
		for _, a := range allowed {
			ok = ok || s == a
		}
		if !ok {
			return false
		}
	}
	return true
}

// constraintWords describes standard constraints for the docs.
func constraintWords(n *jsonx.Node, pr *Property) []string {
	var out []string
	num := func(k, words string, unit ...string) {
		if v, ok := n.Get(k).Number(); ok {
			r, _ := new(big.Rat).SetString(string(v))
			s := string(v)
			if r != nil {
				s = r.RatString()
			}
			w := words + " " + s
			if len(unit) == 2 {
				if s == "1" {
					w += " " + unit[0]
				} else {
					w += " " + unit[1]
				}
			}
			out = append(out, w)
		}
	}
	num("minimum", "at least")
	num("exclusiveMinimum", "above")
	num("maximum", "at most")
	num("exclusiveMaximum", "below")
	num("minLength", "at least", "character", "characters")
	num("maxLength", "at most", "character", "characters")
	num("minItems", "at least", "item", "items")
	num("maxItems", "at most", "item", "items")
	num("minProperties", "at least", "entry", "entries")
	num("maxProperties", "at most", "entry", "entries")
	if s, ok := n.Get("pattern").String(); ok {
		out = append(out, "matches `"+s+"`")
	}
	for _, b := range pr.Bounds {
		switch b.Rule {
		case "x-minimum":
			out = append(out, "at least "+b.Raw)
		case "x-exclusive-minimum":
			out = append(out, "above "+b.Raw)
		case "x-maximum":
			out = append(out, "at most "+b.Raw)
		case "x-exclusive-maximum":
			out = append(out, "below "+b.Raw)
		}
	}
	return out
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
