package s3sink

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// Tests of path_template's {field:PATH:day} and {field:PATH:hour}: the
// UTC day or hour of a payload time, read as the parquet column reads it.

// inKolkata sets the process's local zone to Asia/Kolkata (UTC+5:30) for
// the test, so that a day taken in local time, not UTC, shows.
func inKolkata(t *testing.T) *time.Location {
	t.Helper()
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	local := time.Local
	time.Local = kolkata
	t.Cleanup(func() { time.Local = local })
	return kolkata
}

// TestFieldTimeCut: a JSON payload's RFC 3339 string (with an offset that
// crosses midnight UTC either way), epoch milliseconds, or microseconds
// with a timestamp_us column, days with a date column; missing, null and
// values that are no time give default_partition_value. The timezone key
// and the local zone play no part: the cut is in UTC.
func TestFieldTimeCut(t *testing.T) {
	kolkata := inKolkata(t)
	tmpl := "d={field:ts:day}/h={field:ts:hour}/{field:ts}"
	ms := time.Date(2026, 12, 4, 13, 5, 0, 0, time.UTC).UnixMilli()
	for _, c := range []struct {
		name, ts, colType, want string
	}{
		{"utc", `"2026-12-04T13:05:00Z"`, "", "d=2026-12-04/h=2026-12-04-13/2026-12-04T13_05_00Z/"},
		{"offset to the next day", `"2026-12-04T23:30:00-02:00"`, "", "d=2026-12-05/h=2026-12-05-01/"},
		{"offset to the day before", `"2026-12-05T00:30:00+01:00"`, "", "d=2026-12-04/h=2026-12-04-23/"},
		{"fraction", `"2026-12-04T23:59:59.999999999Z"`, "timestamp_ms", "d=2026-12-04/h=2026-12-04-23/"},
		{"epoch millis", fmt.Sprint(ms), "", fmt.Sprintf("d=2026-12-04/h=2026-12-04-13/%d/", ms)},
		{"epoch millis column", fmt.Sprint(ms), "timestamp_ms", "d=2026-12-04/h=2026-12-04-13/"},
		{"epoch micros column", fmt.Sprint(ms * 1000), "timestamp_us", "d=2026-12-04/h=2026-12-04-13/"},
		{"before 1970", "-1", "", "d=1969-12-31/h=1969-12-31-23/"},
		{"date column days", "20426", "date", "d=2025-12-04/h=2025-12-04-00/"},
		{"date column text", `"2026-12-04"`, "date", "d=2026-12-04/h=2026-12-04-00/"},
		{"null", "null", "timestamp_ms", "d=none/h=none/none/"},
		{"not a time", `"yesterday"`, "", "d=none/h=none/yesterday/"},
		{"date text, timestamp column", `"2026-12-04"`, "timestamp_ms", "d=none/h=none/"},
		{"boolean", "true", "", "d=none/h=none/true/"},
		{"float", "1.5", "", "d=none/h=none/1.5/"},
		{"object", `{"a":1}`, "", "d=none/h=none/none/"},
	} {
		t.Run(c.name, func(t *testing.T) {
			l := newKeyLayout("", mustTemplate(t, tmpl), kolkata, "none")
			if c.colType != "" {
				o := options{Columns: []columnSpec{{Name: "other", Type: "timestamp_us", Path: "x"}, {Name: "ts", Type: c.colType}}}
				l.setUnits(o.timeUnitOf)
			}
			rec := &sdk.Record{Topic: "t", Timestamp: time.Unix(0, 0), Payload: []byte(`{"ts":` + c.ts + `}`)}
			got, err := l.appendDir(nil, rec, rec.Timestamp)
			if err != nil || !strings.HasPrefix(string(got), strings.TrimSuffix(c.want, "/")) {
				t.Fatalf("%s: %q, %v; want %q", c.ts, got, err, c.want)
			}
		})
	}
	// Missing, and a nested path.
	l := newKeyLayout("", mustTemplate(t, "{field:a.b:day}/{field:c:hour}"), nil, "__unknown")
	rec := &sdk.Record{Payload: []byte(`{"a":{"b":"2026-02-28T23:00:00-01:00"}}`)}
	if got, _ := l.appendDir(nil, rec, time.Time{}); string(got) != "2026-03-01/__unknown/" {
		t.Fatalf("nested and missing: %q", got)
	}
	if !l.perRecord || !l.readsFields {
		t.Fatal("a time cut is read from each record's payload")
	}
}

// TestFieldTimeCutAsColumn: for every input a timestamp column takes, the
// directory's day and hour are those of the value the parquet column
// holds (the one parser), and an input the column refuses gives
// default_partition_value.
func TestFieldTimeCutAsColumn(t *testing.T) {
	inKolkata(t)
	for _, typ := range []string{"timestamp_ms", "timestamp_us"} {
		o := defaultOptions()
		o.Format, o.Columns = formatParquet, []columnSpec{{Name: "ts", Type: typ, Optional: true}}
		o.PathTemplate = mustTemplate(t, "{field:ts:day}/{field:ts:hour}")
		pl, err := newPQLayout(&o)
		if err != nil {
			t.Fatal(err)
		}
		kl := o.layout()
		for _, v := range []string{`"2026-12-04T23:59:59.9999Z"`, `"2026-12-05T00:00:00.0001+00:00"`, `"1969-12-31T23:59:59.9995Z"`,
			`"2026-06-30T22:30:00-03:30"`, `"2026-06-30T01:30:00+14:00"`, "0", "-1", "86399999", "86400000", "1796428799999",
			"9007199254740993", `"2026-12-04T13:00:00\u005A"`, `"2026-12-04"`, `"13:00"`, "1e3", `"x"`, "null"} {
			rec := &sdk.Record{Topic: "t", Schema: sdk.SchemaJSON, Payload: []byte(`{"ts":` + v + `}`)}
			dir, err := kl.appendDir(nil, rec, time.Time{})
			if err != nil {
				t.Fatal(err)
			}
			var r pqRow
			want := "__unknown/__unknown/"
			if _, err := pl.row(&r, rec); err == nil && !r.row[len(r.row)-1].IsNull() {
				n := r.row[len(r.row)-1].Int64()
				at := time.UnixMilli(n)
				if typ == "timestamp_us" {
					at = time.UnixMicro(n)
				}
				want = at.UTC().Format("2006-01-02/2006-01-02-15/")
			}
			if string(dir) != want {
				t.Errorf("%s %s: directory %q, the column's value gives %q", typ, v, dir, want)
			}
		}
	}
}

// TestFieldTimeCutValidation: a {field:PATH:...} suffix that looks like a
// time cut but is none is refused, naming path_template and what to write;
// day and hour are accepted in a plain (non-Iceberg) sink.
func TestFieldTimeCutValidation(t *testing.T) {
	for _, c := range []struct{ tmpl, want string }{
		{"{field:ts:month}", "path_template '{field:ts:month}': {field:ts:month} ends in ':month', which is not a time cut: write {field:ts:day} or {field:ts:hour}"},
		{"{topic}/{field:a.b:Day}", "{field:a.b:Day} ends in ':Day'"},
		{"{field:ts:hours}", "write {field:ts:day} or {field:ts:hour}"},
	} {
		raw := map[string]any{"bucket": "picomq-archive", "region": "eu-west-1", "path_template": c.tmpl}
		cfg, err := s3sinkconfig.Load(raw, "", nil)
		if err == nil {
			err = checkConfig(cfg)
		}
		if err == nil || !strings.HasPrefix(err.Error(), "path_template: ") || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v; want %q on path_template", c.tmpl, err, c.want)
		}
	}
	for _, tmpl := range []string{"{topic}/{field:ts:day}", "{field:event.at:hour}/{field:region}", "{field:a:b}"} {
		cfg, err := s3sinkconfig.Load(map[string]any{"bucket": "picomq-archive", "region": "eu-west-1", "path_template": tmpl}, "", nil)
		if err == nil {
			err = checkConfig(cfg)
		}
		if err != nil {
			t.Errorf("%s refused: %v", tmpl, err)
		}
	}
}

// TestAvroFieldTimeCut: on an Avro topic the cut reads a timestamp-millis
// or -micros long by its unit, a date int, a plain long as milliseconds
// and a string as RFC 3339; a field that is no time is refused at
// SetTopics, naming the path.
func TestAvroFieldTimeCut(t *testing.T) {
	inKolkata(t)
	const schema = `{"type":"record","name":"r","fields":[
		{"name":"ms","type":{"type":"long","logicalType":"timestamp-millis"}},
		{"name":"us","type":["null",{"type":"long","logicalType":"timestamp-micros"}]},
		{"name":"d","type":{"type":"int","logicalType":"date"}},
		{"name":"n","type":"long"},
		{"name":"s","type":"string"},
		{"name":"i","type":"int"}]}`
	topics := []sdk.TopicSchema{{Topic: "a", Schema: sdk.SchemaAvro, AvroSchema: schema}}
	s, err := fieldSink(t, "{field:ms:hour}/{field:us:day}/{field:d:day}/{field:n:day}/{field:s:hour}", topics)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 4, 23, 30, 0, 0, time.UTC)
	for _, c := range []struct {
		us   any
		s    string
		want string
	}{
		{map[string]any{"long": at.UnixMicro()}, "2026-12-04T20:00:00-04:00", "2026-12-04-23/2026-12-04/2025-12-05/2026-12-04/2026-12-05-00/"},
		{nil, "not a time", "2026-12-04-23/__unknown/2025-12-05/2026-12-04/__unknown/"},
	} {
		payload := avroEncode(t, schema, map[string]any{"ms": at.UnixMilli(), "us": c.us, "d": int32(20427), "n": at.UnixMilli(), "s": c.s, "i": int32(1)})
		got, err := s.layout.appendDir(nil, &sdk.Record{Topic: "a", Schema: sdk.SchemaAvro, Payload: payload}, time.Time{})
		if err != nil || string(got) != c.want {
			t.Errorf("%v %s: %q, %v; want %q", c.us, c.s, got, err, c.want)
		}
	}
	if _, err := fieldSink(t, "{field:i:day}", topics); err == nil || !strings.Contains(err.Error(), "path_template's {field:i:day}: the Avro field i is no time") {
		t.Fatalf("an int field cut by day: %v", err)
	}
}

// BenchmarkFieldTimeCut renders the directory of a JSON record by the
// value of its time field ({field:at}, the baseline) and by its UTC day
// ({field:at:day}: the value parsed as a timestamp column parses it), for
// an RFC 3339 string and for epoch milliseconds.
func BenchmarkFieldTimeCut(b *testing.B) {
	for _, at := range []string{`"2026-12-04T23:30:00.125-02:00"`, "1796428800125"} {
		rec := &sdk.Record{Topic: "t", Payload: []byte(`{"id":42,"region":"eu-west","at":` + at + `,"note":"a few more bytes of payload"}`)}
		for _, tmpl := range []string{"{topic}/{field:at}", "{topic}/{field:at:day}"} {
			l := newKeyLayout("raw", mustTemplate(&testing.T{}, tmpl), nil, "__unknown")
			b.Run(fmt.Sprintf("%s/%s", map[bool]string{true: "rfc3339", false: "millis"}[at[0] == '"'], tmpl[8:]), func(b *testing.B) {
				var dst []byte
				b.ReportAllocs()
				for b.Loop() {
					dst, _ = l.appendDir(dst[:0], rec, time.Time{})
				}
				if strings.Contains(string(dst), "__unknown") {
					b.Fatalf("%s: %s", tmpl, dst)
				}
			})
		}
	}
}
