package model

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/gen/internal/jsonx"
	"github.com/picomq/pico-connectors/gen/internal/naming"
	"github.com/picomq/pico-connectors/runtime/confkit"
)

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
	slices.Sort(out)
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
	slices.Sort(out)
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
	slices.SortFunc(pr.EnumAliases, func(a, b [2]string) int { return strings.Compare(a[0], b[0]) })
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

var placeholderName = regexp.MustCompile(`^[A-Za-z0-9_]+(\[[a-z]*\]|:[a-z_]+)?$`)

func parsePlaceholders(p *parser, pr *Property, v *jsonx.Node, ptr string) {
	if pr.Kind != Template || !v.IsArray() {
		p.fail(ptr, "x-placeholders needs x-type template and must be an array of names")
		return
	}
	pr.Placeholders = []string{}
	for i, it := range v.Items {
		s, ok := it.String()
		if !ok || !placeholderName.MatchString(s) {
			p.fail(fmt.Sprintf("%s/%d", ptr, i), "a placeholder is a name such as \"topic\", \"name[n]\" for an indexed one, or \"name:what\" for one that takes text after a colon")
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
