package confgen

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// The format names the generator adds to properties of the x-types, so the
// JSON Schema check parses them too.
const (
	FormatSize     = "size"
	FormatDuration = "duration"
	FormatTemplate = "template"
)

// Formats are the custom formats registered with every compiled schema.
// Sizes may also be written as integers; non-strings pass here and are left
// to the type check.
var Formats = map[string]func(any) bool{
	FormatSize: func(v any) bool {
		if _, ok := v.(string); !ok {
			return true
		}
		_, err := AsSize(v)
		return err == nil
	},
	FormatDuration: func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return true
		}
		_, err := confkit.ParseDuration(s)
		return err == nil
	},
	FormatTemplate: func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return true
		}
		_, err := confkit.ParseTemplate(s, nil)
		return err == nil
	},
}

// CompileSchema compiles a JSON Schema (2020-12 unless it says otherwise)
// with the custom formats asserted. name is used in error messages.
func CompileSchema(name string, schema []byte) (*jsonschema.Schema, error) {
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertFormat = true
	c.Formats = Formats
	url := "picogen:///" + name + ".json"
	if err := c.AddResource(url, bytes.NewReader(schema)); err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("schema %s: %w", name, err)
	}
	return s, nil
}

// KeyInfo is what the schema check needs to know about one key.
type KeyInfo struct {
	// Secret masks the key's value in every message.
	Secret bool
	// Messages maps a rule (JSON Schema keyword or x- keyword) to the
	// schema's own message for it; {key} and {value} are filled in.
	Messages map[string]string
}

// SchemaSpec describes the keys of a schema for translating JSON Schema
// errors into Problems. The generator writes it as a literal.
type SchemaSpec struct {
	// Keys maps a dotted key path to its information.
	Keys map[string]KeyInfo
	// Known maps a dotted table path ("" for the top level) to the keys
	// allowed in it, for "did you mean" suggestions.
	Known map[string][]string
}

var dquoted = regexp.MustCompile(`"((?:[^"\\]|\\.)*)"`)

var quoted = regexp.MustCompile(`'((?:[^'\\]|\\.)*)'`)

// CheckSchema validates doc against s and translates every error into a
// Problem located by key path, at most one per key and rule.
func CheckSchema(s *jsonschema.Schema, doc map[string]any, spec *SchemaSpec) confkit.Problems {
	err := s.Validate(doc)
	if err == nil {
		return nil
	}
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return confkit.Problems{{Rule: "schema", Message: err.Error()}}
	}
	var out confkit.Problems
	seen := map[string]bool{}
	add := func(p confkit.Problem) {
		id := p.Key + "\x00" + p.Rule
		same := p.Key + "\x00\x00" + p.Message
		if !seen[id] && !seen[same] {
			seen[id], seen[same] = true, true
			out = append(out, p)
		}
	}
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) > 0 {
			for _, c := range e.Causes {
				walk(c)
			}
			return
		}
		for _, p := range translate(e, doc, spec) {
			add(p)
		}
	}
	walk(ve)
	return out
}

func translate(e *jsonschema.ValidationError, doc map[string]any, spec *SchemaSpec) []confkit.Problem {
	path := pointerPath(e.InstanceLocation)
	key := instanceKey(doc, path)
	rule := e.KeywordLocation
	if i := strings.LastIndexByte(rule, '/'); i >= 0 {
		rule = rule[i+1:]
	}
	info := spec.info(key)
	switch rule {
	case "required", "additionalProperties":
		var names []string
		known, haveKnown := spec.known(key)
		if obj, ok := valueAt(doc, path).(map[string]any); ok && rule == "additionalProperties" && haveKnown {
			// Work the unknown keys out directly: the validator's message
			// quotes them in a way that is ambiguous for keys with quotes.
			allowed := make(map[string]bool, len(known))
			for _, k := range known {
				allowed[k] = true
			}
			for k := range obj {
				if !allowed[k] {
					names = append(names, k)
				}
			}
			sort.Strings(names)
		} else {
			for _, m := range quoted.FindAllStringSubmatch(e.Message, -1) {
				names = append(names, m[1])
			}
		}
		var ps []confkit.Problem
		for _, name := range names {
			full := name
			if key != "" {
				full = key + "." + name
			}
			if rule == "required" {
				msg := "is required but not set"
				if sm := spec.info(full).Messages["required"]; sm != "" {
					msg = Expand(sm, full, "")
				}
				ps = append(ps, confkit.Problem{Key: full, Rule: "required", Message: msg})
				continue
			}
			ps = append(ps, UnknownKey(key, name, valueAt(doc, append(path, name)), known))
		}
		return ps
	}
	v, _ := valueAtOK(doc, path)
	shown := FormatValue(v)
	if info.Secret {
		shown = confkit.NewSecret(shown).String()
	}
	var msg string
	switch rule {
	case "type":
		want := strings.TrimPrefix(e.Message, "expected ")
		if i := strings.Index(want, ", but got"); i >= 0 {
			want = want[:i]
		}
		msg = fmt.Sprintf("must be %s, got %s", article(want), TypeName(v))
		if !info.Secret {
			msg += " " + quoteValue(v)
		}
	case "format":
		f := ""
		if m := quoted.FindAllStringSubmatch(e.Message, -1); len(m) > 0 {
			f = m[len(m)-1][1]
		}
		var err error
		switch f {
		case FormatSize:
			_, err = AsSize(v)
		case FormatDuration:
			_, err = AsDuration(v)
		case FormatTemplate:
			s, _ := v.(string)
			_, err = confkit.ParseTemplate(s, nil)
		}
		if err != nil {
			msg = err.Error()
		} else {
			msg = fmt.Sprintf("%q is not a valid %s", shown, f)
		}
		if info.Secret {
			msg = "is not a valid " + f
		}
	case "enum":
		msg = "must be " + strings.TrimPrefix(e.Message, "value must be ") + ", got " + quoteValue(v)
		if sv, ok := v.(string); ok {
			var cands []string
			for _, m := range dquoted.FindAllStringSubmatch(e.Message, -1) {
				if u, err := strconv.Unquote(m[0]); err == nil {
					cands = append(cands, u)
				}
			}
			msg += confkit.DidYouMean(sv, cands)
		}
		if info.Secret {
			msg = "is not one of the allowed values"
		}
	default:
		msg = e.Message
		if info.Secret {
			msg = "breaks the rule " + rule
		} else if rule == "pattern" || rule == "minLength" || rule == "maxLength" || rule == "const" {
			msg = quoteValue(v) + " " + msg
		}
	}
	if sm := info.Messages[rule]; sm != "" {
		msg = Expand(sm, key, shown)
	}
	return []confkit.Problem{{Key: key, Value: shown, Rule: rule, Message: msg}}
}

// UnknownKey builds the problem for a key no schema property or alias
// names, with a suggestion from known.
func UnknownKey(table, name string, value any, known []string) confkit.Problem {
	full := name
	if table != "" {
		full = table + "." + name
	}
	msg := "unknown key" + confkit.DidYouMean(name, known)
	if len(known) > 0 {
		msg += "; allowed keys: " + strings.Join(known, ", ")
	}
	return confkit.Problem{Key: full, Value: FormatValue(value), Rule: "unknown-key", Message: msg}
}

func article(t string) string {
	if t == "" {
		return t
	}
	switch t[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + t
	}
	return "a " + t
}

func quoteValue(v any) string {
	if s, ok := v.(string); ok {
		return strconv.Quote(s)
	}
	return FormatValue(v)
}

func pointerPath(ptr string) []string {
	if ptr == "" || ptr == "/" {
		return nil
	}
	parts := strings.Split(strings.TrimPrefix(ptr, "/"), "/")
	for i, p := range parts {
		parts[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(p)
	}
	return parts
}

func valueAt(doc map[string]any, path []string) any {
	v, _ := valueAtOK(doc, path)
	return v
}

func valueAtOK(doc map[string]any, path []string) (any, bool) {
	var cur any = doc
	for _, p := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}

// SortProblems orders problems by the position of their key in order (the
// schema's key order), then by key and rule, so output is deterministic.
func SortProblems(ps confkit.Problems, order []string) {
	pos := make(map[string]int, len(order))
	for i, k := range order {
		pos[k] = i
	}
	rank := func(k string) int {
		if _, exact := pos[k]; !exact {
			k = ElementKey(k)
		}
		for {
			if i, ok := pos[k]; ok {
				return i
			}
			j := strings.LastIndexByte(k, '.')
			if j < 0 {
				return len(order)
			}
			k = k[:j]
		}
	}
	sort.SliceStable(ps, func(i, j int) bool {
		if less, ok := indexOrder(ps[i].Key, ps[j].Key); ok {
			return less
		}
		ri, rj := rank(ps[i].Key), rank(ps[j].Key)
		if ri != rj {
			return ri < rj
		}
		if ps[i].Key != ps[j].Key {
			return ps[i].Key < ps[j].Key
		}
		return false
	})
}
