package definition

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// routeKeys are the keys of a routing rule table.
var routeKeys = []string{"strategy", "path", "template", "fallback"}

// IsRule reports whether the route is a rule rather than a literal name.
func (r Route) IsRule() bool {
	return r.Literal == "" && (r.Strategy != "" || r.Template != "" || r.Path != "" || r.Fallback != "")
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

func (r *Route) setRuleKey(k, s string) {
	switch k {
	case "strategy":
		r.Strategy = s
	case "path":
		r.Path = s
	case "template":
		r.Template = s
	case "fallback":
		r.Fallback = s
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

func (r Route) ruleMap() map[string]any {
	m := map[string]any{"strategy": r.Strategy}
	if r.Path != "" {
		m["path"] = r.Path
	}
	if r.Template != "" {
		m["template"] = r.Template
	}
	if r.Fallback != "" {
		m["fallback"] = r.Fallback
	}
	return m
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
		return "is required for a routing rule, such as \"orders.{value}\""
	}
	rest := tpl
	for {
		i := strings.IndexByte(rest, '{')
		if i < 0 {
			break
		}
		j := strings.IndexByte(rest[i:], '}')
		if j < 0 {
			return fmt.Sprintf("%q has an unclosed {", tpl)
		}
		if name := rest[i+1 : i+j]; name != "value" {
			return fmt.Sprintf("%q uses {%s}; the only placeholder is {value}", tpl, name)
		}
		rest = rest[i+j+1:]
	}
	if !strings.Contains(tpl, "{value}") {
		return fmt.Sprintf("%q has no {value} placeholder, so every record would go to one topic; use a literal topic instead", tpl)
	}
	if msg := validTopicName(strings.ReplaceAll(tpl, "{value}", "x")); msg != "" {
		return fmt.Sprintf("%q %s", tpl, msg)
	}
	return ""
}
