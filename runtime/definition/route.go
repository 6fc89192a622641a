package definition

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// routeKeys are the keys of a routing rule table, in the order of
// Route.ruleFields.
var routeKeys = []string{"strategy", "path", "template", "fallback"}

// ruleFields are the rule's fields, in the order of routeKeys.
func (r *Route) ruleFields() []*string {
	return []*string{&r.Strategy, &r.Path, &r.Template, &r.Fallback}
}

// IsRule reports whether the route is a rule rather than a literal name.
func (r Route) IsRule() bool {
	return r.Literal == "" && r.hasRuleKeys()
}

// IsZero reports whether topic was not set at all.
func (r Route) IsZero() bool { return r == Route{} }

// String renders a literal as its name and a rule as its template.
func (r Route) String() string {
	if r.Literal != "" {
		return r.Literal
	}
	return r.Template
}

// UnmarshalTOML decodes topic from a string (a literal name) or an inline
// table (a rule), so Route also works with toml.Decode.
func (r *Route) UnmarshalTOML(v any) error {
	switch t := v.(type) {
	case string:
		*r = Route{Literal: t}
		return nil
	case map[string]any:
		out, ps := decodeRule(t)
		if len(ps) > 0 {
			return fmt.Errorf("topic.%s: %s", ps[0].Key, ps[0].Message)
		}
		*r = out
		return nil
	}
	return fmt.Errorf("topic: expected a topic name or a routing rule table, got %s", describe(v, false))
}

// decodeRule reads a routing-rule table: each key is one of routeKeys and
// holds a string. The problems are keyed by the rule's own key.
func decodeRule(t map[string]any) (Route, confkit.Problems) {
	var r Route
	var ps confkit.Problems
	for _, k := range slices.Sorted(maps.Keys(t)) {
		s, ok := t[k].(string)
		switch {
		case !slices.Contains(routeKeys, k):
			ps = append(ps, confkit.Problem{Key: k, Message: fmt.Sprintf("unknown key %q in a routing rule%s", k, confkit.DidYouMeanOrAllowed(k, routeKeys))})
		case !ok:
			ps = append(ps, confkit.Problem{Key: k, Message: "expected a string, got " + describe(t[k], false)})
		default:
			r.setRuleKey(k, s)
		}
	}
	return r, ps
}

// setRuleKey sets the field of rule key k, one of routeKeys.
func (r *Route) setRuleKey(k, s string) {
	if i := slices.Index(routeKeys, k); i >= 0 {
		*r.ruleFields()[i] = s
	}
}

// MarshalJSON encodes a literal as a string and a rule as an object.
func (r Route) MarshalJSON() ([]byte, error) {
	if r.Literal != "" || !r.IsRule() {
		return json.Marshal(r.Literal)
	}
	return json.Marshal(r.ruleMap())
}

// UnmarshalJSON accepts what MarshalJSON writes.
func (r *Route) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	return r.UnmarshalTOML(v)
}

// ruleMap is the rule as a table: strategy, and each other key that is set.
func (r Route) ruleMap() map[string]any {
	m := map[string]any{}
	for i, f := range r.ruleFields() {
		if *f != "" || routeKeys[i] == "strategy" {
			m[routeKeys[i]] = *f
		}
	}
	return m
}

// CheckTopicName reports why name is not a valid topic name: 1 to 249
// characters from ASCII letters, digits, '.', '_' and '-', and not "." or
// "..". The error quotes the name. It is the one statement of the rule, for
// the definition files and for topics a routing rule renders at run time.
func CheckTopicName(name string) error {
	if msg := validTopicName(name); msg != "" {
		return fmt.Errorf("%q %s", name, msg)
	}
	return nil
}

// Check reports what is wrong with a source's topic, the route key at key
// (such as "topics[0].topic"): a literal must be a valid topic name; a rule
// needs strategy "field" (with the JSON path of the field), "key" (no
// path) or "header" (with the header's name), a template with {value} that
// renders a valid name, and a valid fallback when it has one. It returns
// confkit.Problems, or nil. Load reports these for every block it reads;
// the source loop's router asks again for routes built in code, so the
// rule is written once, here.
func (r Route) Check(key string) error {
	if ps := r.check(key, func(string) string { return "" }); len(ps) > 0 {
		return ps
	}
	return nil
}

// check is Check; origin says where a key's value came from
// (" (from environment variable X)"), or "".
func (r Route) check(key string, origin func(key string) string) confkit.Problems {
	var ps confkit.Problems
	add := func(k, format string, args ...any) {
		ps = append(ps, confkit.Problem{Key: k, Message: fmt.Sprintf(format, args...)})
	}
	switch {
	case r.IsZero():
		add(key, "missing: set topic = \"orders\" or a rule such as { strategy = \"field\", path = \"tenant\", template = \"orders.{value}\" }")
		return ps
	case r.Literal != "" && r.hasRuleKeys():
		add(key, "give a topic name or a routing rule, not both")
		return ps
	case r.Literal != "":
		if msg := validTopicName(r.Literal); msg != "" {
			add(key, "%q %s", r.Literal, msg)
		}
		return ps
	}
	switch r.Strategy {
	case "field":
		path := strings.TrimPrefix(strings.TrimPrefix(r.Path, "$"), ".")
		switch {
		case path == "":
			add(key+".path", "missing: strategy = \"field\" needs the JSON field to route by, such as path = \"tenant\"")
		case slices.Contains(strings.Split(path, "."), ""):
			add(key+".path", "%q has an empty segment; name nested fields as \"customer.region\"", r.Path)
		}
	case "header":
		if r.Path == "" {
			add(key+".path", "missing: strategy = \"header\" needs the header to route by, such as path = \"tenant\"")
		}
	case "key":
		if r.Path != "" {
			add(key+".path", "strategy = \"key\" routes by the record key; remove path")
		}
	case "":
		add(key+".strategy", "missing: a routing rule needs strategy = \"field\", \"key\" or \"header\"")
	default:
		add(key+".strategy", "%s", notAllowed(r.Strategy, origin(key+".strategy"), []string{"field", "key", "header"}))
	}
	if msg := checkTemplate(r.Template); msg != "" {
		add(key+".template", "%s", msg)
	}
	if r.Fallback != "" {
		if msg := validTopicName(r.Fallback); msg != "" {
			add(key+".fallback", "%q %s", r.Fallback, msg)
		}
	}
	return ps
}

// hasRuleKeys reports whether any key of a routing rule is set, even beside
// a literal (which only a Route built in code can have).
func (r Route) hasRuleKeys() bool {
	return r.Strategy != "" || r.Template != "" || r.Path != "" || r.Fallback != ""
}

// validTopicName reports why name is not a valid Kafka topic name, or "".
func validTopicName(name string) string {
	if name == "" {
		return "must not be empty"
	}
	if len(name) > 249 {
		return "is longer than 249 characters"
	}
	if name == "." || name == ".." {
		return "must not be . or .."
	}
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Sprintf("contains %q; topic names use only ASCII letters, digits, '.', '_' and '-'", c)
		}
	}
	return ""
}

// checkTemplate reports why a rule's template cannot render, or "".
func checkTemplate(tpl string) string {
	if tpl == "" {
		return "" // {value}: the value is the topic name
	}
	t, err := confkit.ParsePlaceholders(tpl, nil)
	if err != nil {
		return err.Error() + "; the only placeholder is {value}"
	}
	for _, p := range t.Parts {
		if p.Name != "" && (p.Name != "value" || p.HasArg || p.HasParam) {
			body := p.Name
			if p.HasArg {
				body += "[" + strconv.Itoa(p.Arg) + "]"
			}
			if p.HasParam {
				body += ":" + p.Param
			}
			return fmt.Sprintf("%q uses {%s}; the only placeholder is {value}", tpl, body)
		}
	}
	if !slices.ContainsFunc(t.Parts, func(p confkit.TemplatePart) bool { return p.Name == "value" }) {
		return fmt.Sprintf("%q has no {value} placeholder, so every record would go to one topic; use a literal topic instead", tpl)
	}
	sample, _ := t.Render(func(confkit.TemplatePart) (string, error) { return "x", nil })
	if msg := validTopicName(sample); msg != "" {
		return fmt.Sprintf("%q %s", tpl, msg)
	}
	return ""
}
