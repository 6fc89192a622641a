package s3sink

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/iceberg-go"

	"github.com/picomq/pico-connectors/sdk"
)

// dayRecords are n JSON records of topic whose payload time "at" spans
// three UTC days, interleaved so that a partition has a file open in each:
// as RFC 3339 in UTC, with an offset that puts the local date a day before
// or after the UTC one, and as epoch milliseconds; every 17th is null.
func dayRecords(topic string, n int) []sdk.Record {
	base := time.Date(2026, 12, 3, 0, 0, 0, 0, time.UTC)
	out := make([]sdk.Record, n)
	for i := range out {
		day := base.AddDate(0, 0, i%3)
		var at string
		switch i % 4 {
		case 0:
			at = fmt.Sprintf(`"%s"`, day.Add(time.Duration(i)*time.Minute).Format(time.RFC3339))
		case 1: // 02:xx UTC is 21:xx the day before in UTC-5
			at = fmt.Sprintf(`"%s"`, day.Add(2*time.Hour+time.Duration(i)*time.Second).In(time.FixedZone("", -5*3600)).Format(time.RFC3339Nano))
		case 2:
			at = fmt.Sprint(day.Add(12*time.Hour + time.Duration(i)*time.Millisecond).UnixMilli())
		case 3: // 20:xx UTC is 05:xx the day after in UTC+9
			at = fmt.Sprintf(`"%s"`, day.Add(20*time.Hour+time.Duration(i)*time.Second).In(time.FixedZone("", 9*3600)).Format(time.RFC3339))
		}
		if i%17 == 0 {
			at = "null"
		}
		out[i] = sdk.Record{Topic: topic, Offset: int64(i), Schema: sdk.SchemaJSON, Timestamp: base.Add(-time.Hour),
			Payload: fmt.Appendf(nil, `{"n":%d,"at":%s}`, i, at)}
	}
	return out
}

// TestIcebergDayOfPayloadTime: iceberg_partition_by = ["day(ts)"] of a
// payload timestamp column, with {field:at:day} in path_template. The
// table is partitioned by day(ts); every data file's partition value (read
// from the manifests) is the UTC day of every row's ts in it, as the
// Parquet reader reads the file, and its directory; a null ts makes a null
// partition; a scan filtered on one day of ts plans that day's files only.
func TestIcebergDayOfPayloadTime(t *testing.T) {
	inKolkata(t) // a day taken in local time would show
	h := newIceHarness(t)
	const name, n = "icedays", 120
	s := openAt(t, h.srv, h.srv.Endpoint, name, func(o *options) {
		o.Format, o.MaxMessages, o.RotateByMessages = formatParquet, 20, true
		o.Columns = []columnSpec{{Name: "n", Type: "int64"}, {Name: "ts", Type: "timestamp_ms", Path: "at", Optional: true}}
		o.PathTemplate = mustTemplate(t, "{topic}/dt={field:at:day}")
		o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: h.dsn, Table: "lake." + name, CommitInterval: time.Hour,
			PartitionBy: []string{"day(ts)"}}
	})
	feed(t, s, dayRecords("ev", n), 10)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tb := h.table(t, name)
	files, err := tb.Files(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	days := map[string][]string{} // partition value -> files
	rows := 0
	for _, f := range files {
		if len(f.Partition) != 1 {
			t.Fatalf("%s has partition %v, want one field ts_day (the spec is day(ts))", f.Path, f.Partition)
		}
		day, ok := f.Partition["ts_day"]
		if !ok {
			t.Fatalf("%s has partition %v, want field ts_day", f.Path, f.Partition)
		}
		days[day] = append(days[day], f.Path)
		key := strings.TrimPrefix(f.Path, "s3://"+h.srv.Bucket+"/")
		dir := map[bool]string{true: "__unknown", false: day}[day == "null"]
		if !strings.HasPrefix(key, name+"/ev/dt="+dir+"/") {
			t.Errorf("%s (partition %s) is not under dt=%s/", key, day, dir)
		}
		body, err := h.srv.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		pt := readParquet(t, key, body)
		col := slices.Index(pt.columns, "ts")
		for _, r := range pt.rows {
			got := "null"
			if r[col] != "<null>" {
				got = r[col][:10] // arrow's text: 2026-12-04 13:05:00Z
			}
			if got != day {
				t.Errorf("%s (partition ts_day %s) holds a row with ts %s", key, day, r[col])
			}
		}
		if int64(len(pt.rows)) != f.Records {
			t.Errorf("%s: %d rows, the manifest says %d", key, len(pt.rows), f.Records)
		}
		rows += len(pt.rows)
	}
	var got []string
	for d := range days {
		got = append(got, d)
	}
	slices.Sort(got)
	if want := []string{"2026-12-03", "2026-12-04", "2026-12-05", "null"}; !slices.Equal(got, want) || rows != n {
		t.Fatalf("partitions %v with %d rows, want %v with %d", got, rows, want, n)
	}
	// A scan of 4 December plans that day's files, pruning the others.
	from := time.Date(2026, 12, 4, 0, 0, 0, 0, time.UTC)
	filter := iceberg.NewAnd(iceberg.GreaterThanEqual(iceberg.Reference("ts"), iceberg.Timestamp(from.UnixMicro())),
		iceberg.LessThan(iceberg.Reference("ts"), iceberg.Timestamp(from.AddDate(0, 0, 1).UnixMicro())))
	planned, err := tb.Files(ctx, filter)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range planned {
		paths = append(paths, f.Path)
	}
	if want := days["2026-12-04"]; !slices.Equal(paths, want) || len(paths) == len(files) {
		t.Fatalf("a scan of 4 December plans %v, want %v (of %d files)", paths, want, len(files))
	}
}
