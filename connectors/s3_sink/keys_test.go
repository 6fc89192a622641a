package s3sink

import (
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
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

// TestTimePlaceholdersInZone checks {yyyy} ... {mm} against time.In in
// several zones, over records whose timestamps go back and forth across
// minutes, days, daylight saving changes and every zone change since 1850
// (some with offsets in seconds).
func TestTimePlaceholdersInZone(t *testing.T) {
	tmpl := mustTemplate(t, "{yyyy}-{MM}-{dd}T{HH}:{mm}")
	for _, zone := range []string{"America/New_York", "Asia/Kolkata", "Europe/Dublin", "UTC"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		l := newKeyLayout("", tmpl, loc, "__unknown")
		var stamps []time.Time
		for _, base := range []time.Time{
			time.Date(2026, 3, 8, 6, 59, 0, 0, time.UTC),   // New York's clocks go forward at 07:00 UTC
			time.Date(2026, 11, 1, 5, 59, 30, 0, time.UTC), // and back at 06:00 UTC
			time.Date(2026, 9, 3, 18, 29, 0, 0, time.UTC),  // midnight in Kolkata
			time.Date(1969, 12, 31, 23, 59, 59, 0, time.UTC),
		} {
			for _, d := range []time.Duration{0, time.Second, 59 * time.Second, 30 * time.Second, 61 * time.Second, -time.Second,
				2 * time.Minute, 90 * time.Second, 59*time.Minute + 59*time.Second, time.Hour, 500 * time.Millisecond, -90 * time.Second} {
				stamps = append(stamps, base.Add(d))
			}
		}
		// Either side of every zone change from 1850 to 2030, each way.
		for ts := time.Date(1850, 1, 1, 0, 0, 0, 0, time.UTC); ; {
			_, end := ts.In(loc).ZoneBounds()
			if end.IsZero() || end.Year() > 2030 {
				break
			}
			stamps = append(stamps, end.Add(-time.Second), end.Add(time.Second), end.Add(-time.Second), end.Add(-20*time.Second))
			ts = end
		}
		for _, ts := range stamps {
			got, err := l.appendDir(nil, &sdk.Record{Topic: "t", Timestamp: ts}, ts)
			if err != nil {
				t.Fatal(err)
			}
			if want := ts.In(loc).Format("2006-01-02T15:04") + "/"; string(got) != want {
				t.Errorf("%s %s: got %s want %s", zone, ts.Format(time.RFC3339Nano), got, want)
			}
		}
	}
}
