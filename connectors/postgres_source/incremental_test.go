package postgressource

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/sdk"
)

// TestIncrementalSnapshotOfAddedTable adds a table with 2,500 rows to
// tables after the first start, while a writer keeps updating, deleting
// and inserting its rows. The restarted source reads the table's existing
// rows in chunks between watermarks while changes stream; it is killed in
// the middle of the snapshot (a chunk produced, its state not saved) and
// restarted. Applying every record in order gives exactly the table's
// final content, and every row was delivered.
func TestIncrementalSnapshotOfAddedTable(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE a (id int PRIMARY KEY, v text); INSERT INTO a VALUES (1, 'a')`)
	opt := db.cdcOptions("a")
	opt.CDCReader = readerStream
	opt.Snapshot = "initial"
	opt.BatchSize = 1000
	s := open(t, opt, nil)
	next(t, s) // the initial snapshot of a
	ack(t, s)
	db.exec(`INSERT INTO a VALUES (2, 'a')`)
	b := next(t, s)
	ack(t, s)
	st := b.State
	s.Close(context.Background())

	db.exec(`CREATE TABLE b (id int PRIMARY KEY, v int); INSERT INTO b SELECT i, 0 FROM generate_series(1, 2500) i`)
	stopWriter := db.writer("b", 2500, 3000)
	defer stopWriter()

	opt.Tables = []string{"a", "b"}
	type row struct {
		V  json.Number `json:"v"`
		ID json.Number `json:"id"`
		Op string      `json:"__op"`
	}
	final := map[string]string{}
	reads := map[string]bool{}
	apply := func(batch sdk.Batch) {
		for _, m := range batch.Messages {
			var r row
			dec := json.NewDecoder(bytesReader(m.Payload))
			dec.UseNumber()
			if err := dec.Decode(&r); err != nil {
				t.Fatal(err)
			}
			if r.Op == "" || r.V == "" && r.Op != opDelete {
				continue // table a
			}
			id := r.ID.String()
			switch r.Op {
			case opDelete:
				delete(final, id)
			case opRead:
				reads[id] = true
				final[id] = r.V.String()
			default:
				final[id] = r.V.String()
			}
		}
	}
	s2 := open(t, opt, st)
	first := next(t, s2)
	apply(first)
	ack(t, s2)
	// Read until the next chunk of b, then die before its state is saved.
	var lost sdk.Batch
	for lost.Messages == nil {
		bt := next(t, s2)
		if strings.HasSuffix(string(bt.Messages[0].Payload), `"__op":"read"}`) && len(bt.Messages) > 100 && len(reads) > 0 {
			lost = bt
			break
		}
		apply(bt)
		ack(t, s2)
	}
	s2.Close(context.Background())
	s3 := open(t, opt, s2.committed.mustBlob(t))
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		bt, err := s3.Poll(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		apply(bt)
		ack(t, s3)
		if tp := s3.committed.Incr["public.b"]; tp != nil && tp.Done && len(bt.Messages) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("incremental snapshot not done within 60s: %+v", s3.committed.Incr["public.b"])
		}
	}
	stopWriter()
	// Drain the writer's last changes.
	for i := 0; i < 20; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		bt, err := s3.Poll(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		apply(bt)
		ack(t, s3)
	}
	want := map[string]string{}
	ctx2, cancel2 := context.WithTimeout(context.Background(), time.Minute)
	defer cancel2()
	conn, err := pgconn.Connect(ctx2, db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	res := conn.ExecParams(ctx2, `SELECT id::text, v::text FROM b`, nil, nil, nil, nil).Read()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	for _, r := range res.Rows {
		want[string(r[0])] = string(r[1])
	}
	bad := 0
	for id, v := range want {
		if final[id] != v {
			bad++
			if bad <= 5 {
				t.Errorf("row %s: the records give %q, the table has %s", id, final[id], v)
			}
		}
	}
	for id := range final {
		if _, ok := want[id]; !ok {
			bad++
			if bad <= 5 {
				t.Errorf("row %s: the records have it, the table does not", id)
			}
		}
	}
	n, _ := strconv.Atoi(db.value(`SELECT count(*) FROM b WHERE id <= 2500`))
	t.Logf("%d rows read by the snapshot, %d of the original 2500 left, %d rows in b; %d wrong", len(reads), n, len(want), bad)
	if len(reads) < n {
		t.Errorf("only %d rows read by the snapshot, %d original rows are left", len(reads), n)
	}
}
