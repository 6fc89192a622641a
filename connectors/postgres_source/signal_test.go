package postgressource

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/sdk"
)

// snapHarness polls a source and applies its records of table t (id, v)
// to final, as a consumer of the topic would.
type snapHarness struct {
	t     *testing.T
	s     *Source
	final map[string]string
	reads int
}

func (h *snapHarness) poll() int {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	b, err := h.s.Poll(ctx)
	cancel()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, m := range b.Messages {
		r := decode(h.t, m)
		id := fmt.Sprint(r["id"])
		switch r["__op"] {
		case opDelete:
			delete(h.final, id)
		case opRead:
			h.reads++
			h.final[id] = fmt.Sprint(r["v"])
		default:
			h.final[id] = fmt.Sprint(r["v"])
		}
	}
	ack(h.t, h.s)
	return len(b.Messages)
}

// untilDone polls until the snapshot of public.t is done, and returns its
// progress.
func (h *snapHarness) untilDone(what string) sdk.SnapshotProgress {
	h.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		h.poll()
		for _, p := range h.s.SnapshotProgress() {
			if p.Name == "public.t" && p.State == sdk.SnapshotDone && h.reads > 0 {
				return p
			}
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("%s: not done within 60s: %+v", what, h.s.SnapshotProgress())
		}
	}
}

// check compares final with the table: every row there, with its value.
func (h *snapHarness) check(db *testDB, what string) {
	h.t.Helper()
	for i := 0; i < 10; i++ { // the last changes
		h.poll()
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, db.dsn)
	if err != nil {
		h.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	res := conn.ExecParams(ctx, `SELECT id::text, v::text FROM t`, nil, nil, nil, nil).Read()
	if res.Err != nil {
		h.t.Fatal(res.Err)
	}
	bad := 0
	for _, r := range res.Rows {
		if got, ok := h.final[string(r[0])]; !ok || got != string(r[1]) {
			bad++
			if bad <= 3 {
				h.t.Errorf("%s: row %s = %s in the table, %q (present %v) from the records", what, r[0], r[1], got, ok)
			}
		}
	}
	if bad > 0 {
		h.t.Fatalf("%s: %d of %d rows missing or stale", what, bad, len(res.Rows))
	}
}

// TestSnapshotOnDemand: with snapshot = "never" the 3,000 rows of t that
// existed at start never come from the stream. A snapshot asked for
// through the API path (Source.Snapshot), under a writer that keeps
// updating, deleting and inserting, delivers them while changes stream:
// after it every row of the table is present with its value, and the
// progress and metrics count its chunks and rows. The admin command and a
// Debezium signal_table row start it again.
func TestSnapshotOnDemand(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY, v int); INSERT INTO t SELECT i, 0 FROM generate_series(1, 3000) i;
CREATE TABLE signals (id text PRIMARY KEY, type text NOT NULL, data text)`)
	opt := db.cdcOptions("t")
	opt.CDCReader = readerStream
	opt.Snapshot = "never"
	opt.BatchSize = 500
	opt.IncludeMetadata = false
	opt.SignalTable = "public.signals"
	metrics := &gauges{vals: map[string]float64{}}
	s, err := newSource(withNames(opt, "snap"), sdk.Env{Key: "snap", Logger: testEnv().Logger, Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	defer s.Close(context.Background())
	h := &snapHarness{t: t, s: s, final: map[string]string{}}
	h.poll()

	if err := s.Snapshot(context.Background(), []string{"nope"}); err == nil || !strings.Contains(err.Error(), "public.nope is not one of tables") {
		t.Fatalf("unknown table: %v", err)
	}

	stopWriter := db.writer("t", 3000, 5000)
	defer stopWriter()
	if err := s.Snapshot(context.Background(), []string{"t"}); err != nil {
		t.Fatal(err)
	}
	if p := s.SnapshotProgress(); len(p) != 1 || p[0].State != sdk.SnapshotQueued {
		t.Fatalf("progress right after the request: %+v", p)
	}
	p := h.untilDone("api")
	stopWriter()
	h.check(db, "api")
	if p.Chunks < 6 || p.Rows < 2500 || int64(h.reads) != p.Rows {
		t.Fatalf("progress %+v, %d reads", p, h.reads)
	}
	if metrics.get("postgres_source_snapshot_rows_total") != float64(p.Rows) || metrics.get("postgres_source_snapshot_chunks_total") != float64(p.Chunks) ||
		metrics.get("postgres_source_snapshot_tables_pending") != 0 {
		t.Fatalf("metrics %v, progress %+v", metrics.vals, p)
	}

	// The admin command, then a Debezium signal row: each reads t again.
	for _, way := range []string{"admin", "signal_table"} {
		h.final, h.reads = map[string]string{}, 0
		switch way {
		case "admin":
			var out bytes.Buffer
			if err := adminSnapshot(context.Background(), sdk.AdminRequest{Key: "snap", Config: s.cfg, Args: []string{"public.t"}, Out: &out}); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out.String(), "requested a snapshot of public.t") {
				t.Fatalf("admin output: %s", out.String())
			}
		default:
			db.exec(`INSERT INTO signals VALUES ('ad-hoc-1', 'execute-snapshot', '{"data-collections": ["public.t"], "type": "incremental"}')`)
		}
		h.untilDone(way)
		h.check(db, way)
		if n := db.value(`SELECT count(*) FROM t`); h.reads == 0 || fmt.Sprint(len(h.final)) != n {
			t.Fatalf("%s: %d rows from the records, %s in the table", way, len(h.final), n)
		}
	}
	var out bytes.Buffer
	if err := adminSnapshot(context.Background(), sdk.AdminRequest{Key: "snap", Config: s.cfg, Args: []string{"other"}, Out: &out}); err == nil || !strings.Contains(err.Error(), "public.other is not one of tables") {
		t.Fatalf("admin, unknown table: %v", err)
	}
}
