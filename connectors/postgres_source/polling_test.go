package postgressource

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
)

func ids(t testing.TB, msgs []string) []string {
	t.Helper()
	var out []string
	for _, m := range msgs {
		i := strings.Index(m, `"id":`)
		j := strings.IndexAny(m[i+5:], ",}")
		out = append(out, m[i+5:i+5+j])
	}
	return out
}

func TestPollingNackAckResume(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id bigserial PRIMARY KEY, v text); INSERT INTO ev (v) SELECT 'x' FROM generate_series(1, 5)`)
	opt := db.pollOptions("ev")
	opt.BatchSize = 3
	opt.IncludeMetadata = true
	s := open(t, opt, nil)
	b1 := next(t, s)
	if got := ids(t, payloads(b1)); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("first batch %v", got)
	}
	if m := decode(t, b1.Messages[0]); m["__table"] != "public.ev" || fmt.Sprint(m["__tracking_value"]) != "1" || m["__op"] != "read" {
		t.Errorf("metadata: %v", m)
	}
	if string(b1.Messages[2].Key) != `{"id":3}` {
		t.Errorf("key %s", b1.Messages[2].Key)
	}
	nack(t, s)
	b2 := next(t, s)
	if got := ids(t, payloads(b2)); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("after nack %v", got)
	}
	ack(t, s)
	b3 := next(t, s)
	if got := ids(t, payloads(b3)); fmt.Sprint(got) != "[4 5]" {
		t.Fatalf("after ack %v", got)
	}
	s.Close(context.Background())
	s2 := open(t, opt, b2.State)
	b4 := next(t, s2)
	if got := ids(t, payloads(b4)); fmt.Sprint(got) != "[4 5]" {
		t.Fatalf("restart %v", got)
	}
	ack(t, s2)
	empty(t, s2)
}

func TestPollingInitialOffset(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int PRIMARY KEY); INSERT INTO ev SELECT generate_series(1, 5)`)
	opt := db.pollOptions("ev")
	opt.InitialOffset = "3"
	s := open(t, opt, nil)
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[4 5]" {
		t.Fatalf("got %v", got)
	}
}

// Ties with a primary key: keyset pages on (tracking_column, id), so a tie
// group may span batches and nothing is lost or repeated.
func TestPollingTiesKeyset(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int PRIMARY KEY, ts int);
INSERT INTO ev SELECT i, CASE WHEN i <= 7 THEN 1 ELSE 2 END FROM generate_series(1, 10) i`)
	opt := db.pollOptions("ev")
	opt.TrackingColumn = "ts"
	opt.BatchSize = 3
	s := open(t, opt, nil)
	var all []string
	for range 4 {
		b := next(t, s)
		if len(b.Messages) > 3 {
			t.Fatalf("batch of %d", len(b.Messages))
		}
		all = append(all, ids(t, payloads(b))...)
		ack(t, s)
	}
	empty(t, s)
	if fmt.Sprint(all) != "[1 2 3 4 5 6 7 8 9 10]" {
		t.Fatalf("got %v", all)
	}
}

// Ties without a key: a batch is extended to the end of its last tie group.
func TestPollingTiesNoKey(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int, ts int);
INSERT INTO ev SELECT i, CASE WHEN i <= 7 THEN 1 ELSE 2 END FROM generate_series(1, 10) i`)
	opt := db.pollOptions("ev")
	opt.TrackingColumn = "ts"
	opt.BatchSize = 3
	s := open(t, opt, nil)
	b1 := next(t, s)
	got := ids(t, payloads(b1))
	sort.Strings(got)
	if len(got) != 7 {
		t.Fatalf("first batch should hold the whole tie group of 7: %v", got)
	}
	if b1.Messages[0].Key != nil {
		t.Errorf("no key expected, got %s", b1.Messages[0].Key)
	}
	ack(t, s)
	if got := ids(t, payloads(next(t, s))); len(got) != 3 {
		t.Fatalf("second batch %v", got)
	}
	ack(t, s)
	empty(t, s)
}

func TestPollingProcessedColumnOnlyAfterAck(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE outbox (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false, at timestamptz);
INSERT INTO outbox (id) SELECT generate_series(1, 4)`)
	opt := db.pollOptions("outbox")
	opt.ProcessedColumn = "done"
	opt.BatchSize = 2
	s := open(t, opt, nil)
	next(t, s)
	nack(t, s)
	if n := db.value(`SELECT count(*) FROM outbox WHERE done`); n != "0" {
		t.Fatalf("%s rows marked after nack", n)
	}
	next(t, s)
	if n := db.value(`SELECT count(*) FROM outbox WHERE done`); n != "0" {
		t.Fatalf("%s rows marked before ack", n)
	}
	ack(t, s)
	if got := db.value(`SELECT string_agg(id::text, ',' ORDER BY id) FROM outbox WHERE done`); got != "1,2" {
		t.Fatalf("marked after ack: %s", got)
	}
	// Timestamp processed column.
	opt2 := db.pollOptions("outbox")
	opt2.ProcessedColumn = "at"
	s2 := open(t, opt2, nil)
	next(t, s2)
	ack(t, s2)
	if n := db.value(`SELECT count(*) FROM outbox WHERE at IS NOT NULL`); n != "4" {
		t.Fatalf("%s rows stamped", n)
	}
}

func TestPollingDeleteAfterReadOnlyAfterAck(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE q (a int, b text, v text, PRIMARY KEY (a, b));
INSERT INTO q SELECT i, 'k"' || i, 'v' FROM generate_series(1, 5) i`)
	opt := db.pollOptions("q")
	opt.TrackingColumn = "a"
	opt.DeleteAfterRead = true
	opt.BatchSize = 3
	s := open(t, opt, nil)
	b := next(t, s)
	if string(b.Messages[0].Key) != `{"a":1,"b":"k\"1"}` {
		t.Errorf("key %s", b.Messages[0].Key)
	}
	nack(t, s)
	if n := db.value(`SELECT count(*) FROM q`); n != "5" {
		t.Fatalf("%s rows left after nack", n)
	}
	next(t, s)
	ack(t, s)
	if got := db.value(`SELECT string_agg(a::text, ',' ORDER BY a) FROM q`); got != "4,5" {
		t.Fatalf("left after ack: %s", got)
	}
}

func TestPollingConfigErrors(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE nokey (v int); CREATE TABLE k (id int PRIMARY KEY, flag int)`)
	cases := []struct {
		opt  func(o *postgressourceconfig.Config)
		want string
	}{
		{func(o *postgressourceconfig.Config) { o.Tables = []string{"nokey"} }, "tracking_column: not set, and table public.nokey has no single-column primary key"},
		{func(o *postgressourceconfig.Config) { o.Tables = []string{"missing"} }, "tables: public.missing does not exist"},
		{func(o *postgressourceconfig.Config) { o.TrackingColumn = "nope" }, `tracking_column: table public.k has no column "nope"`},
		{func(o *postgressourceconfig.Config) { o.ProcessedColumn = "flag" }, `processed_column: column "flag" of table public.k is integer; it must be boolean`},
		{func(o *postgressourceconfig.Config) {
			o.Tables = []string{"nokey"}
			o.TrackingColumn = "v"
			o.DeleteAfterRead = true
		}, "delete_after_read: table public.nokey has no primary key"},
		{func(o *postgressourceconfig.Config) {
			o.ConnectionString = confkit.NewSecret("postgres://x:y@127.0.0.1:1/db?sslmode=bogus")
		}, "connection_string: not a valid PostgreSQL connection string"},
	}
	for _, c := range cases {
		opt := db.pollOptions("k")
		c.opt(&opt)
		_, err := openSource(opt, nil)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
		if err != nil && strings.Contains(err.Error(), "y@") {
			t.Errorf("error leaks the connection string: %v", err)
		}
	}
}

// TestPollingSideEffectSurvivesCrash: the runtime saved a batch's
// checkpoint, and the process died before the Ack ran the side effect. The
// checkpoint carries the pending keys, so the restarted source marks (or
// deletes) those rows before it reads on.
func TestPollingSideEffectSurvivesCrash(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE outbox (id int PRIMARY KEY, done boolean NOT NULL DEFAULT false);
CREATE TABLE q (id int PRIMARY KEY);
INSERT INTO outbox (id) SELECT generate_series(1, 4); INSERT INTO q SELECT generate_series(1, 4)`)
	opt := db.pollOptions("outbox")
	opt.ProcessedColumn = "done"
	opt.BatchSize = 2
	s := open(t, opt, nil)
	b := next(t, s)
	s.Close(context.Background()) // killed: state saved, no Ack
	s2 := open(t, opt, b.State)
	if got := ids(t, payloads(next(t, s2))); fmt.Sprint(got) != "[3 4]" {
		t.Fatalf("after restart got %v", got)
	}
	if got := db.value(`SELECT string_agg(id::text, ',' ORDER BY id) FROM outbox WHERE done`); got != "1,2" {
		t.Fatalf("marked after the restart's first poll: %q, want 1,2", got)
	}
	ack(t, s2)

	opt = db.pollOptions("q")
	opt.DeleteAfterRead = true
	opt.BatchSize = 3
	s3 := open(t, opt, nil)
	b = next(t, s3)
	s3.Close(context.Background())
	s4 := open(t, opt, b.State)
	next(t, s4)
	if got := db.value(`SELECT string_agg(id::text, ',' ORDER BY id) FROM q`); got != "4" {
		t.Fatalf("left after the restart's first poll: %q, want 4", got)
	}
}

// holdTx opens a connection, runs sql inside an open transaction, and
// returns the function that commits it.
func holdTx(t *testing.T, db *testDB, sql string) func() {
	t.Helper()
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close(ctx) })
	if _, err := conn.Exec(ctx, "BEGIN; "+sql).ReadAll(); err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if _, err := conn.Exec(ctx, "COMMIT").ReadAll(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPollingLateCommitLowerValue: a transaction takes ids 1-5 and commits
// after another one's ids 6-7 were read. The value cursor alone skipped
// 1-5; the visibility window reads them, in pages of batch_size across
// polls, once each, and so does a source restarted from the checkpoint.
func TestPollingLateCommitLowerValue(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id bigserial PRIMARY KEY, v text)`)
	commitLate := holdTx(t, db, `INSERT INTO ev (v) SELECT 'late' FROM generate_series(1, 5)`)
	db.exec(`INSERT INTO ev (v) VALUES ('early'), ('early')`)
	opt := db.pollOptions("ev")
	opt.BatchSize = 2
	s := open(t, opt, nil)
	b := next(t, s)
	if got := ids(t, payloads(b)); fmt.Sprint(got) != "[6 7]" {
		t.Fatalf("first batch %v", got)
	}
	ack(t, s)
	empty(t, s)
	commitLate()
	db.exec(`INSERT INTO ev (v) VALUES ('after')`) // id 8

	// A restart from the checkpoint of the first batch reads the same.
	s2 := open(t, opt, b.State)
	for _, src := range []*Source{s, s2} {
		var all []string
		for range 4 {
			b := next(t, src)
			if len(b.Messages) > 2 {
				t.Fatalf("batch of %d", len(b.Messages))
			}
			all = append(all, ids(t, payloads(b))...)
			ack(t, src)
		}
		empty(t, src)
		sort.Slice(all, func(i, j int) bool { return len(all[i]) < len(all[j]) || len(all[i]) == len(all[j]) && all[i] < all[j] })
		if fmt.Sprint(all) != "[1 2 3 4 5 8]" {
			t.Fatalf("after the late commit: %v, want 1-5 and 8 once each", all)
		}
	}
}

// TestPollingOldCheckpointResumes: a checkpoint written before the
// visibility window (value and key only) resumes after its value, and the
// window applies from its first poll on: a row of a transaction open then,
// committed after higher values were read, is read.
func TestPollingOldCheckpointResumes(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int PRIMARY KEY, ts int); INSERT INTO ev SELECT i, i / 2 FROM generate_series(1, 6) i`)
	commitLate := holdTx(t, db, `INSERT INTO ev VALUES (7, 2)`)
	opt := db.pollOptions("ev")
	opt.TrackingColumn = "ts"
	old := `{"v":1,"mode":"polling","tables":{"public.ev":{"value":"1","pk":["2"]}}}`
	s := open(t, opt, []byte(old))
	b := next(t, s)
	if got := ids(t, payloads(b)); fmt.Sprint(got) != "[3 4 5 6]" {
		t.Fatalf("resumed with %v", got)
	}
	ack(t, s)
	empty(t, s)
	commitLate() // (2, 7) is below the cursor (3, 6)
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[7]" {
		t.Fatalf("late row: %v", got)
	}
	ack(t, s)
	empty(t, s)
}

// TestPollingViewKeepsValueCursor: a view has no xmin, so it is polled by
// value alone, as before the window (with a warning at start).
func TestPollingViewKeepsValueCursor(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int PRIMARY KEY); CREATE VIEW evv AS SELECT id FROM ev; INSERT INTO ev SELECT generate_series(1, 3)`)
	opt := db.pollOptions("evv")
	opt.TrackingColumn = "id"
	s := open(t, opt, nil)
	if s.plans["public.evv"].window {
		t.Fatal("a view cannot use the visibility window")
	}
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("got %v", got)
	}
	ack(t, s)
	empty(t, s)
}

// TestPollingWindowUsesIndex: the window pass is a range of the tracking
// column's index, from the bounding mark's value to the cursor, filtered
// by xmin: the plan of its query on a 200,000-row table has no Seq Scan.
func TestPollingWindowUsesIndex(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE big (id bigserial PRIMARY KEY, v text); INSERT INTO big (v) SELECT 'x' FROM generate_series(1, 200000); ANALYZE big`)
	opt := db.pollOptions("big")
	s := open(t, opt, nil)
	p := s.plans["public.big"]
	if !p.window {
		t.Fatal("a table is read with the window")
	}
	snap := db.value(`SELECT pg_current_snapshot()::text`)
	xmax := db.value(`SELECT pg_snapshot_xmax(pg_current_snapshot())::text`)
	v, bound := "200000", "199900"
	pos := &pollState{Value: &v, Snap: snap, Marks: []pollMark{{X: "3", V: &bound}}}
	conds, args := s.windowConds(p, pos, xmax)
	sql := "EXPLAIN " + pageSQL(p, conds, 1000)
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res := conn.ExecParams(ctx, sql, args, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatalf("%v\n%s", res.Err, sql)
	}
	var plan []string
	for _, r := range res.Rows {
		plan = append(plan, string(r[0]))
	}
	text := strings.Join(plan, "\n")
	if strings.Contains(text, "Seq Scan") || !strings.Contains(text, "Index") || !strings.Contains(text, ">=") {
		t.Fatalf("the window query scans the table:\n%s\n%s", sql, text)
	}
}
