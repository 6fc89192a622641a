package postgressource

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
)

func TestParsePattern(t *testing.T) {
	for _, c := range []struct {
		entry string
		match []string
		miss  []string
	}{
		{"public.orders_*", []string{"public.orders_2027", "public.orders_"}, []string{"public.orders", "sales.orders_1", "public.orders_a.b"}},
		{"orders_?", []string{"public.orders_1"}, []string{"public.orders_12"}},
		{"*.audit", []string{"a.audit", "public.audit"}, []string{"public.audit_x"}},
		{`re:^sales\.orders_[0-9]{4}$`, []string{"sales.orders_2027"}, []string{"sales.orders_27", "public.orders_2027"}},
	} {
		if !isPattern(c.entry) {
			t.Fatalf("%s: not a pattern", c.entry)
		}
		p, err := parsePattern(c.entry)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range c.match {
			if !p.re.MatchString(m) {
				t.Errorf("%s does not match %s", c.entry, m)
			}
		}
		for _, m := range c.miss {
			if p.re.MatchString(m) {
				t.Errorf("%s matches %s", c.entry, m)
			}
		}
	}
	for _, s := range []string{"public.orders", `"Odd*Name".t`, `"a?b"`} {
		if isPattern(s) {
			t.Errorf("%s taken for a pattern", s)
		}
	}
	for _, s := range []string{"re:(", "a.b.c*", `"x".y*`} {
		if _, err := parsePattern(s); err == nil {
			t.Errorf("%s: no error", s)
		}
	}
	cfg := newDB(t).cdcOptions("public.orders_*", "re:(")
	cfg.TableSettings = append(cfg.TableSettings, customersSettings())
	err := check(cfg)
	if err == nil || !strings.Contains(err.Error(), "tables[1]") || !strings.Contains(err.Error(), "not a valid regular expression") ||
		!strings.Contains(err.Error(), "table_settings[0].table") {
		t.Fatalf("check: %v", err)
	}
}

// TestPatternPicksUpNewTable: tables = ["public.orders_*"]. A table that
// matches at start is snapshotted; one created while the source runs, with
// rows already in it, is added to the publication, its rows are read by
// the incremental snapshot, and rows inserted afterwards stream. A table
// that does not match is never read, nor one without a replica identity
// (left out, the application's UPDATE on it still works), and
// table_settings given by pattern apply to the new table.
func TestPatternPicksUpNewTable(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE orders_2026 (id int PRIMARY KEY, v text, secret text);
INSERT INTO orders_2026 SELECT i, 'old', 's' FROM generate_series(1, 30) i;
CREATE TABLE other (id int PRIMARY KEY); INSERT INTO other VALUES (1)`)
	opt := db.cdcOptions("public.orders_*")
	opt.CDCReader = readerStream
	opt.Snapshot = "initial"
	opt.BatchSize = 100
	opt.IncludeMetadata = true
	opt.TableDiscoveryInterval = 50 * time.Millisecond
	ts := customersSettings()
	ts.Table, ts.IncludeColumns, ts.ExcludeColumns, ts.MaskColumns, ts.HashColumns, ts.KeyColumns = "public.orders_*", nil, []string{"secret"}, nil, nil, nil
	opt.TableSettings = append(opt.TableSettings, ts)
	s := open(t, opt, nil)
	defer s.Close(context.Background())

	seen := map[string]map[string]string{} // table -> id -> op
	take := func(b sdk.Batch) {
		for _, m := range b.Messages {
			r := decode(t, m)
			if _, ok := r["secret"]; ok {
				t.Fatalf("exclude_columns by pattern not applied: %s", m.Payload)
			}
			tbl, _ := r["__table"].(string)
			if seen[tbl] == nil {
				seen[tbl] = map[string]string{}
			}
			seen[tbl][fmt.Sprint(r["id"])] = r["__op"].(string)
		}
	}
	until := func(what string, done func() bool) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: have %v", what, seen)
			}
			b, err := s.Poll(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			take(b)
			ack(t, s)
		}
	}
	until("initial snapshot of orders_2026", func() bool { return len(seen["public.orders_2026"]) == 30 })

	db.exec(`CREATE TABLE orders_2027 (id int PRIMARY KEY, v text, secret text);
INSERT INTO orders_2027 SELECT i, 'old', 's' FROM generate_series(1, 250) i;
CREATE TABLE invoices_2027 (id int PRIMARY KEY); INSERT INTO invoices_2027 VALUES (1);
CREATE TABLE orders_nokey (id int, v text); INSERT INTO orders_nokey VALUES (1, 'x')`)
	until("incremental snapshot of orders_2027", func() bool { return len(seen["public.orders_2027"]) == 250 })
	for id, op := range seen["public.orders_2027"] {
		if op != opRead {
			t.Fatalf("orders_2027 row %s: %s, want read", id, op)
		}
	}
	if db.value(`SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pub_`+db.tag+`' AND tablename = 'orders_2027'`) != "1" {
		t.Fatal("orders_2027 is not in the publication")
	}
	// A match without a replica identity is left out (with a warning):
	// publishing its updates would break the application's.
	if db.value(`SELECT count(*) FROM pg_publication_tables WHERE pubname = 'pub_`+db.tag+`' AND tablename = 'orders_nokey'`) != "0" {
		t.Fatal("orders_nokey, without a replica identity, was added to the publication")
	}
	db.exec(`UPDATE orders_nokey SET v = 'y'`)
	db.exec(`INSERT INTO orders_2027 VALUES (1000, 'new', 's'); INSERT INTO orders_2026 VALUES (1000, 'new', 's'); INSERT INTO invoices_2027 VALUES (2)`)
	until("the new rows stream", func() bool {
		return seen["public.orders_2027"]["1000"] == opInsert && seen["public.orders_2026"]["1000"] == opInsert
	})
	for tbl := range seen {
		if tbl != "public.orders_2026" && tbl != "public.orders_2027" {
			t.Fatalf("read %s, which no pattern matches", tbl)
		}
	}

	// A matched table dropped while running is no longer captured, and
	// the source goes on.
	db.exec(`DROP TABLE orders_2026`)
	empty(t, s)
	db.exec(`INSERT INTO orders_2027 VALUES (1001, 'new', 's')`)
	until("after the drop", func() bool { return seen["public.orders_2027"]["1001"] == opInsert })
}

// TestPatternPolling: in polling mode a table created while the source
// runs that a pattern matches is polled from its first row.
func TestPatternPolling(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE q_1 (id int PRIMARY KEY); INSERT INTO q_1 VALUES (1), (2)`)
	opt := db.pollOptions("q_*")
	opt.TableDiscoveryInterval = 50 * time.Millisecond
	s := open(t, opt, nil)
	defer s.Close(context.Background())
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[1 2]" {
		t.Fatalf("q_1: %v", got)
	}
	ack(t, s)
	db.exec(`CREATE TABLE q_2 (id int PRIMARY KEY); INSERT INTO q_2 VALUES (10), (11), (12)`)
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[10 11 12]" {
		t.Fatalf("q_2: %v", got)
	}
	ack(t, s)
}

// TestPatternLeavesOutAtStart: a table a pattern matches at start that
// cannot be captured (no replica identity, updates published) is left
// out, where a named one stops the source; the others are captured.
func TestPatternLeavesOutAtStart(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE p_ok (id int PRIMARY KEY); CREATE TABLE p_nokey (v int)`)
	s := open(t, db.cdcOptions("p_*"), nil)
	defer s.Close(context.Background())
	db.exec(`INSERT INTO p_ok VALUES (1); INSERT INTO p_nokey VALUES (1); UPDATE p_nokey SET v = 2`)
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[1]" {
		t.Fatalf("got %v", got)
	}
	if _, err := openSource(db.cdcOptions("p_ok", "p_nokey"), nil); err == nil || !strings.Contains(err.Error(), "p_nokey has no primary key") {
		t.Fatalf("named: %v", err)
	}
}

// TestPatternMatchAfterRestart: a matching table created while the
// source was down is found at connect and, not being in the checkpoint's
// known tables, read by the incremental snapshot before its new rows
// stream.
func TestPatternMatchAfterRestart(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE m_1 (id int PRIMARY KEY); INSERT INTO m_1 VALUES (1)`)
	opt := db.cdcOptions("m_*")
	opt.CDCReader = readerStream
	opt.Snapshot = "initial"
	s := open(t, opt, nil)
	first := next(t, s)
	ack(t, s)
	s.Close(context.Background())
	db.exec(`CREATE TABLE m_2 (id int PRIMARY KEY); INSERT INTO m_2 SELECT generate_series(10, 14)`)
	s = open(t, opt, s.committed.mustBlob(t))
	defer s.Close(context.Background())
	if got := ids(t, payloads(first)); fmt.Sprint(got) != "[1]" {
		t.Fatalf("initial snapshot: %v", got)
	}
	b := next(t, s)
	if got := ids(t, payloads(b)); fmt.Sprint(got) != "[10 11 12 13 14]" || !strings.Contains(string(b.Messages[0].Payload), `"__op":"read"`) {
		t.Fatalf("m_2 after the restart: %s", payloads(b))
	}
	ack(t, s)
	db.exec(`INSERT INTO m_2 VALUES (15)`)
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[15]" {
		t.Fatalf("m_2's new row: %v", got)
	}
}
