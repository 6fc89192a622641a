package s3sink

import (
	"strings"
	"testing"
	"time"
)

func mustTemplate(t *testing.T, s string) pathTemplate {
	t.Helper()
	p, err := parsePathTemplate(s)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestObjectKeySpecExample(t *testing.T) {
	f := fileInfo{Topic: "orders.eu", Partition: 0, FirstOffset: 1000, LastOffset: 1999,
		FirstTime: time.Date(2026, 9, 3, 21, 59, 0, 0, time.UTC)}
	got, err := objectKey(trimPrefix("/raw/"), mustTemplate(t, defaultPathTemplate), f, "jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if want := "raw/orders.eu/2026-09-03/21/00000-00000000000000001000-00000000000000001999.jsonl"; got != want {
		t.Fatalf("got %s want %s", got, want)
	}
}

func TestObjectKeyPlaceholders(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.FixedZone("X", -5*3600)) // 08:04 UTC
	f := fileInfo{Topic: "acme.orders.eu-west/1", Partition: 7, FirstOffset: 5, LastOffset: 12345678901234, FirstTime: first}
	cases := []struct{ prefix, tmpl, ext, want string }{
		{"", "{topic}", "jsonl", "acme.orders.eu-west_1/00007-00000000000000000005-00000012345678901234.jsonl"},
		{"p", "{topic_segment[0]}/{topic_segment[1]}/{topic_segment[2]}", "json", "p/acme/orders/eu-west_1/00007-00000000000000000005-00000012345678901234.json"},
		{"p", "{topic_segment[-1]}-{topic_segment[-3]}", "bin", "p/eu-west_1-acme/00007-00000000000000000005-00000012345678901234.bin"},
		{"a/b", "part={partition}/{date}/{hour}", "jsonl", "a/b/part=7/2026-01-02/08/00007-00000000000000000005-00000012345678901234.jsonl"},
		{"", "ts={timestamp}", "jsonl", "ts=1767341045678/00007-00000000000000000005-00000012345678901234.jsonl"},
		{"", "", "jsonl", "00007-00000000000000000005-00000012345678901234.jsonl"},
		{"x", "/{topic_segment[0]}//lit eral/", "jsonl", "x/acme/lit eral/00007-00000000000000000005-00000012345678901234.jsonl"},
	}
	for _, c := range cases {
		got, err := objectKey(c.prefix, mustTemplate(t, c.tmpl), f, c.ext)
		if err != nil {
			t.Errorf("%s: %v", c.tmpl, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s:\n got  %s\n want %s", c.tmpl, got, c.want)
		}
	}
}

func TestSanitising(t *testing.T) {
	cases := map[string]string{
		"orders.eu":            "orders.eu",
		"Az09._-":              "Az09._-",
		"a b/c\\d:e*f?g":       "a_b_c_d_e_f_g",
		"caf\u00e9":            "caf_",
		"\u2603snow\U0001F600": "_snow_",
		"":                     "",
	}
	for in, want := range cases {
		if got := string(appendSanitized(nil, in)); got != want {
			t.Errorf("%q: got %q want %q", in, got, want)
		}
	}
}

// TestDotSegments: a topic (or topic segment) named "." or ".." renders no
// "." or ".." key segment, which tools that map keys to paths resolve to
// another folder; dots inside a segment stay.
func TestDotSegments(t *testing.T) {
	cases := []struct{ topic, tmpl, want string }{
		{"..", "{topic}", "__/"},
		{".", "{topic}/{hour}", "_/08/"},
		{"..", "x/{topic}/y", "x/__/y/"},
		{"a...b", "{topic_segment[1]}/{topic_segment[-1]}", "b/"},
		{"...", "{topic}", ".../"},
		{"..", "{topic}.d", "...d/"},
		{"a.b", "..{topic_segment[0]}", "..a/"},
	}
	for _, c := range cases {
		got, err := renderDir("p", mustTemplate(t, c.tmpl), c.topic, 0, time.Date(2026, 1, 2, 8, 0, 0, 0, time.UTC))
		if err != nil {
			t.Errorf("%q %s: %v", c.topic, c.tmpl, err)
			continue
		}
		if got != "p/"+c.want {
			t.Errorf("topic %q, template %s: got %s want p/%s", c.topic, c.tmpl, got, c.want)
		}
	}
}

func TestPadding(t *testing.T) {
	if got := string(appendPadded(nil, 0, 5)); got != "00000" {
		t.Error(got)
	}
	if got := string(appendPadded(nil, 123456, 5)); got != "123456" {
		t.Error(got)
	}
	if got := string(appendPadded(nil, 9223372036854775807, 20)); got != "09223372036854775807" {
		t.Error(got)
	}
}

func TestTooFewSegments(t *testing.T) {
	f := fileInfo{Topic: "orders", FirstTime: time.Unix(0, 0)}
	for _, tmpl := range []string{"{topic_segment[1]}", "{topic_segment[-2]}"} {
		_, err := objectKey("", mustTemplate(t, tmpl), f, "jsonl")
		if err == nil || !strings.Contains(err.Error(), "topic 'orders' has 1 segment(s)") || !strings.Contains(err.Error(), tmpl) {
			t.Errorf("%s: error = %v", tmpl, err)
		}
	}
	if k, err := objectKey("", mustTemplate(t, "{topic_segment[-1]}/{topic_segment[0]}"), f, "jsonl"); err != nil || !strings.HasPrefix(k, "orders/orders/") {
		t.Errorf("one segment: %s %v", k, err)
	}
}

func TestParseTemplateErrors(t *testing.T) {
	for _, s := range []string{"{nope}", "{topic", "topic}", "{topic_segment}", "{topic_segment[x]}", "{date[1]}", "{topic_segment[0}"} {
		if _, err := parsePathTemplate(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}
