// Package route computes the destination topic of each record a source
// produces, from a [[topics]] block's topic: a literal name, or a rule.
//
//	topic = "orders"                                                    literal
//	topic = { strategy = "field", path = "tenant", template = "orders.{value}" }
//	topic = { strategy = "key", template = "by-key.{value}", fallback = "misc" }
//	topic = { strategy = "header", path = "region", template = "orders.{value}" }
//
// A field path is dot-separated, with an optional leading "$." and numeric
// segments indexing arrays ("customer.addresses.0.country"). The routed
// value must be a string, number or boolean; the rendered topic must be a
// valid topic name. A record without a usable value goes to the fallback
// topic, or is unroutable when there is none.
package route

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

// ErrUnroutable is wrapped by Router.Topic when a record has no usable
// value and the rule has no fallback.
var ErrUnroutable = errors.New("record cannot be routed")

// Strategies lists the rule strategies.
var Strategies = []string{"field", "key", "header"}

// Input is what a rule reads from one record.
type Input struct {
	Key     []byte
	Headers []sdk.Header
	// Value is the decoded payload (see package codec).
	Value any
}

// Router routes records by one rule. It is safe for concurrent use.
type Router struct {
	literal  string
	strategy string
	path     []string
	header   string
	template string // contains {value} at least once
	fallback string
}

// Compile checks a route (definition.Route.Check: the rules Load applies)
// and prepares it.
func Compile(r definition.Route) (*Router, error) {
	if err := r.Check("topic"); err != nil {
		return nil, err
	}
	if r.Literal != "" {
		return &Router{literal: r.Literal}, nil
	}
	rt := &Router{strategy: r.Strategy, fallback: r.Fallback, template: r.Template}
	if rt.template == "" {
		rt.template = "{value}"
	}
	switch r.Strategy {
	case "field":
		rt.path = strings.Split(strings.TrimPrefix(strings.TrimPrefix(r.Path, "$"), "."), ".")
	case "header":
		rt.header = r.Path
	}
	return rt, nil
}

// NeedsValue reports whether the rule reads the decoded payload, so the
// caller must decode it even with no transforms.
func (r *Router) NeedsValue() bool { return r.strategy == "field" }

// Static returns the topics known before any record is seen: the literal
// name, or the fallback.
func (r *Router) Static() []string {
	switch {
	case r.literal != "":
		return []string{r.literal}
	case r.fallback != "":
		return []string{r.fallback}
	}
	return nil
}

// Topic returns the destination of one record. The error wraps
// ErrUnroutable when the record has no usable value and there is no
// fallback.
func (r *Router) Topic(in Input) (string, error) {
	if r.literal != "" {
		return r.literal, nil
	}
	v, why := r.value(in)
	if why == "" {
		t := strings.ReplaceAll(r.template, "{value}", v)
		if err := ValidTopic(t); err == nil {
			return t, nil
		} else {
			why = err.Error()
		}
	}
	if r.fallback != "" {
		return r.fallback, nil
	}
	return "", fmt.Errorf("%w: %s and no fallback topic is set", ErrUnroutable, why)
}

func (r *Router) value(in Input) (string, string) {
	switch r.strategy {
	case "key":
		if in.Key == nil {
			return "", "the record has no key"
		}
		return string(in.Key), ""
	case "header":
		for i := len(in.Headers) - 1; i >= 0; i-- {
			if in.Headers[i].Key == r.header {
				return string(in.Headers[i].Value), ""
			}
		}
		return "", fmt.Sprintf("the record has no header %q", r.header)
	}
	cur := in.Value
	for i, seg := range r.path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[seg]
			if !ok {
				return "", fmt.Sprintf("field %q is missing", strings.Join(r.path[:i+1], "."))
			}
			cur = v
		case []any:
			n, err := strconv.Atoi(seg)
			if err != nil || n < 0 || n >= len(c) {
				return "", fmt.Sprintf("field %q: no element %q", strings.Join(r.path[:i], "."), seg)
			}
			cur = c[n]
		default:
			return "", fmt.Sprintf("field %q: the payload is not a JSON object there", strings.Join(r.path[:i+1], "."))
		}
	}
	switch v := cur.(type) {
	case string:
		return v, ""
	case json.Number:
		return v.String(), ""
	case bool:
		return strconv.FormatBool(v), ""
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64), ""
	case float32:
		return strconv.FormatFloat(float64(v), 'f', -1, 32), ""
	case int:
		return strconv.Itoa(v), ""
	case int32:
		return strconv.FormatInt(int64(v), 10), ""
	case int64:
		return strconv.FormatInt(v, 10), ""
	case nil:
		return "", fmt.Sprintf("field %q is null", strings.Join(r.path, "."))
	}
	return "", fmt.Sprintf("field %q is not a string, number or boolean", strings.Join(r.path, "."))
}

// ValidTopic checks a topic name (definition.CheckTopicName).
func ValidTopic(t string) error { return definition.CheckTopicName(t) }

func topicChar(c rune) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
}
