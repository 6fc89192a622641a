package confkit

import (
	"reflect"
	"strconv"
	"strings"
	"testing"
)

var s3Placeholders = []string{"topic", "topic_segment[n]", "partition", "date", "hour", "timestamp"}

func TestParseTemplate(t *testing.T) {
	tp, err := ParseTemplate("raw/{topic}/{topic_segment[-1]}/x{date}", s3Placeholders)
	if err != nil {
		t.Fatal(err)
	}
	want := []TemplatePart{
		{Text: "raw/"}, {Name: "topic"}, {Text: "/"},
		{Name: "topic_segment", Arg: -1, HasArg: true}, {Text: "/x"}, {Name: "date"},
	}
	if !reflect.DeepEqual(tp.Parts, want) {
		t.Fatalf("parts = %#v", tp.Parts)
	}
	if got := tp.Placeholders(); !reflect.DeepEqual(got, []string{"topic", "topic_segment", "date"}) {
		t.Fatalf("placeholders = %v", got)
	}
	out, err := tp.Render(func(p TemplatePart) (string, error) {
		return p.Name + strconv.Itoa(p.Arg), nil
	})
	if err != nil || out != "raw/topic0/topic_segment-1/xdate0" {
		t.Fatalf("render = %q, %v", out, err)
	}
	if tp.String() != "raw/{topic}/{topic_segment[-1]}/x{date}" {
		t.Fatal(tp.String())
	}
}

func TestParseTemplateErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"{topik}", "unknown placeholder {topik} (did you mean {topic}?)"},
		{"{nope}", "allowed: {topic}, {topic_segment[n]}"},
		{"{topic", "unbalanced '{'"},
		{"topic}", "unbalanced '}'"},
		{"{a{b}}", "unbalanced '{'"},
		{"{}", "empty placeholder"},
		{"a/../b", "'..' path segments"},
		{"..", "'..' path segments"},
		{"/abs/{topic}", "must not start with '/'"},
		{"{topic[1]}", "takes no index"},
		{"{topic_segment}", "needs an index"},
		{"{topic_segment[x]}", "must be an integer"},
		{"{topic_segment[1}", "malformed"},
		{"{to pic}", "malformed placeholder"},
	}
	for _, tt := range tests {
		_, err := ParseTemplate(tt.in, s3Placeholders)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTemplate(%q) error = %v; want %q", tt.in, err, tt.want)
		}
	}
	if _, err := ParseTemplate("a..b/{anything}", nil); err != nil {
		t.Errorf("nil allowed list: %v", err)
	}
}

func FuzzParseTemplate(f *testing.F) {
	for _, s := range []string{"{topic}/{date}/{hour}", "{topic_segment[-1]}", "a/../b", "{", "}", "{{}}", "/x", "{topic_segment[99999999999]}", "{field:a.b}/x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		allowed := append([]string{"field:path"}, s3Placeholders...)
		tp, err := ParseTemplate(s, allowed)
		if err != nil {
			return
		}
		// Rendering each placeholder as itself gives back the source.
		out, err := tp.Render(func(p TemplatePart) (string, error) {
			if p.HasArg {
				return "{" + p.Name + "[" + strconv.Itoa(p.Arg) + "]}", nil
			}
			if p.HasParam {
				return "{" + p.Name + ":" + p.Param + "}", nil
			}
			return "{" + p.Name + "}", nil
		})
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseTemplate(out, allowed)
		if err != nil || !reflect.DeepEqual(again.Parts, tp.Parts) {
			t.Fatalf("reparse of %q (from %q): %v", out, s, err)
		}
	})
}

// ParsePlaceholders is ParseTemplate's grammar without its path rules.
func TestParsePlaceholders(t *testing.T) {
	for _, s := range []string{"/abs/{topic}", "a/../{topic}", "orders.{topic}"} {
		if _, err := ParsePlaceholders(s, s3Placeholders); err != nil {
			t.Errorf("ParsePlaceholders(%q): %v", s, err)
		}
		if _, err := ParseTemplate(s, s3Placeholders); (err == nil) != (s == "orders.{topic}") {
			t.Errorf("ParseTemplate(%q): %v", s, err)
		}
	}
	for _, s := range []string{"/{topic", "{nope}", "{topic_segment}", "{}"} {
		if _, err := ParsePlaceholders(s, s3Placeholders); err == nil {
			t.Errorf("ParsePlaceholders(%q) accepted", s)
		}
	}
}

// {name:param} takes any text but braces after the colon, when the allowed
// list has "name:..." for it.
func TestParseTemplateParam(t *testing.T) {
	allowed := append([]string{"field:path", "header:name"}, s3Placeholders...)
	tp, err := ParseTemplate("dt={date}/region={field:customer.region}/{header:x-tenant id}", allowed)
	if err != nil {
		t.Fatal(err)
	}
	want := []TemplatePart{
		{Text: "dt="}, {Name: "date"}, {Text: "/region="},
		{Name: "field", Param: "customer.region", HasParam: true}, {Text: "/"},
		{Name: "header", Param: "x-tenant id", HasParam: true},
	}
	if !reflect.DeepEqual(tp.Parts, want) {
		t.Fatalf("parts = %#v", tp.Parts)
	}
	for _, tt := range []struct{ in, want string }{
		{"{field}", "{field} needs a value after a colon, such as {field:name}"},
		{"{field:}", "{field:} needs a value after the colon"},
		{"{topic:x}", "{topic} takes no ':' value"},
		{"{feild:x}", "unknown placeholder {feild:x} (did you mean {field}?)"},
		{"{:x}", "malformed placeholder {:x}"},
		{"{fi eld:x}", "malformed placeholder"},
		{"{field:a{b}}", "unbalanced '{'"},
	} {
		_, err := ParseTemplate(tt.in, allowed)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseTemplate(%q) error = %v; want %q", tt.in, err, tt.want)
		}
	}
	if _, err := ParseTemplate("{nope}", allowed); err == nil || !strings.Contains(err.Error(), "{field:path}") {
		t.Errorf("the allowed list names {field:path}: %v", err)
	}
}
