package s3sink

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
)

// TestIcebergCheckTable: pico-connectors check (the sink's Check) loads
// the table from the real catalog and compares the definition with it as
// Open would, changing nothing: a column type Iceberg cannot change fails
// the "iceberg table" row with the very message Open fails with (the
// column and the reason), so does another partition spec; an added column
// passes (evolved at start), and so does a table not created yet.
func TestIcebergCheckTable(t *testing.T) {
	h := newIceHarness(t)
	const name = "chk"
	base := []columnSpec{{Name: "n", Type: "int64"}, {Name: "extra", Type: "string", Optional: true}}
	s := h.open(t, name, base)
	feed(t, s, iceRecords("t", 0, 30), 10)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ice := func(o *options, cols []columnSpec, by ...string) {
		o.Format, o.Columns, o.MaxMessages, o.RotateByMessages = formatParquet, cols, 20, true
		o.Iceberg = icebergSettings{Enabled: true, Catalog: "sql", URI: h.dsn, Table: "lake." + name, CommitInterval: time.Hour, PartitionBy: by}
	}
	check := func(table string, cols []columnSpec, by ...string) sdk.Check {
		t.Helper()
		o := defaultOptions()
		o.Bucket, o.Region, o.Endpoint, o.PathStyle = h.srv.Bucket, s3test.Region, h.srv.Endpoint, true
		o.AccessKeyID, o.SecretAccessKey, o.Prefix = h.srv.AccessKey, h.srv.SecretKey, name
		o.PathTemplate = mustTemplate(t, "{topic}/{field:extra}")
		ice(&o, cols, by...)
		o.Iceberg.Table = "lake." + table
		rows := newSink(o, sinkEnv("chk", sdk.DiscardMetrics)).Check(context.Background())
		for _, r := range rows {
			if r.Name == checkTable {
				return r
			}
			if !r.OK() {
				t.Fatalf("check row %s failed: %s", r.Name, r.Problem)
			}
		}
		t.Fatalf("no %q row in %+v", checkTable, rows)
		return sdk.Check{}
	}
	if c := check(name, base); !c.OK() || !strings.Contains(c.Detail, "lake.chk loaded; its schema and partition spec match the definition") {
		t.Fatalf("the same definition: %+v", c)
	}
	added := append(append([]columnSpec(nil), base...), columnSpec{Name: "more", Type: "double", Optional: true})
	if c := check(name, added); !c.OK() || !strings.Contains(c.Detail, "evolves its schema") {
		t.Fatalf("an added column: %+v", c)
	}
	if c := check("fresh", base); !c.OK() || !strings.Contains(c.Detail, "lake.fresh does not exist yet") {
		t.Fatalf("a table not created yet: %+v", c)
	}
	if c := check(name, base, "identity(extra)"); c.OK() || !strings.Contains(c.Problem, "is partitioned by [], the definition asks for [identity(extra)]") {
		t.Fatalf("another partition spec: %+v", c)
	}
	changed := []columnSpec{{Name: "n", Type: "string"}, {Name: "extra", Type: "string", Optional: true}}
	c := check(name, changed)
	want := "iceberg_table 'lake.chk' (iceberg_catalog sql): iceberg column n: it is long in the table and string in the definition (string); Iceberg widens only int to long, float to double and a decimal's precision"
	if c.OK() || !strings.HasPrefix(c.Problem, want) || c.Fix == "" {
		t.Fatalf("a column type changed: %+v; want a problem starting %q", c, want)
	}
	if strings.Contains(c.Problem, h.dsn) {
		t.Fatalf("the catalog URI leaked: %s", c.Problem)
	}
	// Open refuses it with the same message, and check changed nothing.
	o := defaultOptions()
	o.Bucket, o.Region, o.Endpoint, o.PathStyle = h.srv.Bucket, s3test.Region, h.srv.Endpoint, true
	o.AccessKeyID, o.SecretAccessKey, o.Prefix = h.srv.AccessKey, h.srv.SecretKey, name
	ice(&o, changed)
	err := newSink(o, sinkEnv("chk", sdk.DiscardMetrics)).Open(context.Background())
	if err == nil || err.Error() != "s3 sink: "+c.Problem {
		t.Fatalf("Open: %v\ncheck: %s", err, c.Problem)
	}
	if got, rows := tableShape(t, h.table(t, name)); strings.Contains(got, "more") || !strings.Contains(got, "n:int64") || rows != 30 {
		t.Fatalf("after the checks the table has %s and %d rows; want it unchanged", got, rows)
	}
}
