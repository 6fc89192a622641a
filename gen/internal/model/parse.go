package model

import (
	"fmt"
	"sort"
	"strings"

	"github.com/picomq/pico-connectors/gen/internal/jsonx"
	"github.com/picomq/pico-connectors/gen/internal/naming"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

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
