package route

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

func mustCompile(t *testing.T, r definition.Route) *Router {
	t.Helper()
	rt, err := Compile(r)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

func TestStrategies(t *testing.T) {
	value := map[string]any{"tenant": "eu", "n": json.Number("42"), "customer": map[string]any{"tags": []any{"vip", true}}}
	in := Input{Key: []byte("k1"), Headers: []sdk.Header{{Key: "region", Value: []byte("us")}}, Value: value}
	cases := []struct {
		r    definition.Route
		want string
	}{
		{definition.Route{Literal: "orders"}, "orders"},
		{definition.Route{Strategy: "field", Path: "tenant", Template: "orders.{value}"}, "orders.eu"},
		{definition.Route{Strategy: "field", Path: "$.n"}, "42"},
		{definition.Route{Strategy: "field", Path: "customer.tags.0", Template: "{value}-x"}, "vip-x"},
		{definition.Route{Strategy: "field", Path: "customer.tags.1", Template: "t.{value}"}, "t.true"},
		{definition.Route{Strategy: "key", Template: "by-key.{value}"}, "by-key.k1"},
		{definition.Route{Strategy: "header", Path: "region", Template: "orders.{value}"}, "orders.us"},
		{definition.Route{Strategy: "field", Path: "missing", Fallback: "misc"}, "misc"},
		{definition.Route{Strategy: "header", Path: "nope", Fallback: "misc"}, "misc"},
		{definition.Route{Strategy: "field", Path: "customer", Fallback: "misc"}, "misc"}, // object, not a scalar
	}
	for _, c := range cases {
		got, err := mustCompile(t, c.r).Topic(in)
		if err != nil || got != c.want {
			t.Errorf("%+v: Topic = %q, %v; want %q", c.r, got, err, c.want)
		}
	}
}

func TestUnroutable(t *testing.T) {
	cases := []struct {
		r   definition.Route
		in  Input
		why string
	}{
		{definition.Route{Strategy: "field", Path: "tenant"}, Input{Value: map[string]any{}}, `field "tenant" is missing`},
		{definition.Route{Strategy: "field", Path: "tenant"}, Input{Value: []byte("raw")}, "not a JSON object"},
		{definition.Route{Strategy: "field", Path: "tenant"}, Input{Value: map[string]any{"tenant": nil}}, "is null"},
		{definition.Route{Strategy: "field", Path: "tenant"}, Input{Value: map[string]any{"tenant": "a/b"}}, `contains '/'`},
		{definition.Route{Strategy: "key"}, Input{}, "no key"},
		{definition.Route{Strategy: "header", Path: "h"}, Input{}, `no header "h"`},
	}
	for _, c := range cases {
		_, err := mustCompile(t, c.r).Topic(c.in)
		if !errors.Is(err, ErrUnroutable) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%+v: error = %v, want ErrUnroutable with %q", c.r, err, c.why)
		}
	}
}

func TestCompileErrors(t *testing.T) {
	cases := map[string]definition.Route{
		"topic: missing":                          {},
		"topic.strategy: missing":                 {Path: "x"},
		`"nope" is not allowed`:                   {Strategy: "nope"},
		`strategy = "field" needs the JSON field`: {Strategy: "field"},
		`strategy = "header" needs the header`:    {Strategy: "header"},
		"remove path":                             {Strategy: "key", Path: "x"},
		"has no {value} placeholder":              {Strategy: "key", Template: "orders"},
		"only placeholder":                        {Strategy: "key", Template: "{value}.{tenant}"},
		"topic names use only":                    {Strategy: "key", Template: "a/{value}"},
		"topic.fallback":                          {Strategy: "key", Fallback: "bad topic"},
		"not both":                                {Literal: "a", Strategy: "key"},
		"empty segment":                           {Strategy: "field", Path: "a..b"},
		`topic: "has space" contains ' '`:         {Literal: "has space"},
	}
	for want, r := range cases {
		if _, err := Compile(r); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%+v) error = %v, want %q", r, err, want)
		}
	}
	if err := ValidTopic(strings.Repeat("a", 250)); err == nil {
		t.Error("250-character topic accepted")
	}
}

func TestStaticAndNeedsValue(t *testing.T) {
	if s := mustCompile(t, definition.Route{Literal: "a"}).Static(); len(s) != 1 || s[0] != "a" {
		t.Fatal(s)
	}
	r := mustCompile(t, definition.Route{Strategy: "field", Path: "x", Fallback: "fb"})
	if !r.NeedsValue() || r.Static()[0] != "fb" {
		t.Fatal("field rule")
	}
	if mustCompile(t, definition.Route{Strategy: "key"}).NeedsValue() {
		t.Fatal("key rule needs no value")
	}
}
