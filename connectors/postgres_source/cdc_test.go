package postgressource

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

func TestCDCOperations(t *testing.T) { forReaders(t, testCDCOperations) }

func testCDCOperations(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE orders (id int PRIMARY KEY, tenant text, qty int, note text);
CREATE TABLE full_orders (id int PRIMARY KEY, tenant text, big text);
ALTER TABLE full_orders REPLICA IDENTITY FULL;
CREATE TABLE other (id int PRIMARY KEY)`)
	opt := db.cdcOptions("orders", "public.full_orders")
	opt.IncludeMetadata = true
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	s := open(t, opt, nil)
	db.exec(`INSERT INTO orders VALUES (1, 'a', 1, 'x'), (2, 'b', 2, 'y');
INSERT INTO other VALUES (1);
UPDATE orders SET qty = 10 WHERE id = 1;
UPDATE orders SET id = 3 WHERE id = 2;
DELETE FROM orders WHERE id = 1;
INSERT INTO full_orders VALUES (1, 'a', repeat('z', 100000));
UPDATE full_orders SET tenant = 'b' WHERE id = 1;
DELETE FROM full_orders WHERE id = 1;
TRUNCATE orders`)
	b := next(t, s)
	got := payloads(b)
	want := []string{
		`{"id":1,"tenant":"a","qty":1,"note":"x","__op":"insert"`,
		`{"id":2,"tenant":"b","qty":2,"note":"y","__op":"insert"`,
		`{"id":1,"tenant":"a","qty":10,"note":"x","__op":"update"`,
		`{"id":3,"tenant":"b","qty":2,"note":"y","__op":"update","__before":{"id":2}`,
		`{"id":1,"__op":"delete"`,
		`{"id":1,"tenant":"a","big":"zzz`,
		// REPLICA IDENTITY FULL: the old row is complete, including the
		// unchanged TOAST value, which is taken from it.
		`{"id":1,"tenant":"b","big":"zzz`,
		`{"id":1,"tenant":"b","big":"zzz`,
		`{"__op":"truncate","__table":"public.orders"`,
	}
	if len(got) != len(want) {
		t.Fatalf("got %d records, want %d:\n%s", len(got), len(want), strings.Join(got, "\n"))
	}
	for i := range want {
		if !strings.HasPrefix(got[i], want[i]) {
			t.Errorf("record %d = %.200s\nwant prefix %s", i, got[i], want[i])
		}
	}
	if !strings.Contains(got[6], `"__op":"update","__before":{"id":1,"tenant":"a","big":"zzz`) {
		t.Errorf("full identity update lacks the old row: %.300s", got[6])
	}
	if !strings.Contains(got[7], `"__op":"delete"`) || strings.Contains(got[7], "__before") {
		t.Errorf("delete: %.300s", got[7])
	}
	m := decode(t, b.Messages[0])
	if m["__table"] != "public.orders" || m["__lsn"] == nil || m["__commit_time"] == nil {
		t.Errorf("metadata missing: %v", m)
	}
	if string(b.Messages[3].Key) != `{"id":3}` || string(b.Messages[4].Key) != `{"id":1}` {
		t.Errorf("keys %s %s", b.Messages[3].Key, b.Messages[4].Key)
	}
	if b.Messages[8].Key != nil {
		t.Errorf("truncate key %s", b.Messages[8].Key)
	}
}

func TestUnchangedToast(t *testing.T) { forReaders(t, testUnchangedToast) }

func testUnchangedToast(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE docs (id int PRIMARY KEY, n int, body text)`)
	opt := db.cdcOptions("docs")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	s := open(t, opt, nil)
	db.exec(`INSERT INTO docs SELECT 1, 1, string_agg(md5(i::text), '') FROM generate_series(1, 5000) i;
UPDATE docs SET n = 2 WHERE id = 1`)
	b := next(t, s)
	if len(b.Messages) != 2 {
		t.Fatalf("got %d", len(b.Messages))
	}
	if got := string(b.Messages[1].Payload); got != `{"id":1,"n":2,"body":{"__unchanged_toast":true},"__op":"update"}` {
		t.Errorf("update = %s", got)
	}
}

func TestCaptureOperations(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	opt := db.cdcOptions("t")
	opt.CaptureOperations = []string{"delete"}
	s := open(t, opt, nil)
	db.exec(`INSERT INTO t VALUES (1); DELETE FROM t`)
	b := next(t, s)
	if got := payloads(b); len(got) != 1 || got[0] != `{"id":1,"__op":"delete"}` {
		t.Errorf("got %v", got)
	}
}

func TestCDCNackAckResume(t *testing.T) { forReaders(t, testCDCNackAckResume) }

func testCDCNackAckResume(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	opt := db.cdcOptions("t")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	// peek: upto_nchanges counts begin and commit too: 4 + 3 + 3 rows.
	opt.BatchSize = 8
	if reader == readerStream {
		opt.BatchSize = 3 // records; whole transactions
	}
	s := open(t, opt, nil)
	for i := 1; i <= 4; i++ {
		db.exec(`INSERT INTO t VALUES (` + string(rune('0'+i)) + `)`)
	}
	b1 := next(t, s)
	if len(b1.Messages) != 3 {
		t.Fatalf("first batch %v", payloads(b1))
	}
	nack(t, s)
	b2 := next(t, s)
	if strings.Join(payloads(b1), "") != strings.Join(payloads(b2), "") || string(b1.State) != string(b2.State) {
		t.Fatalf("after nack got %v, want %v", payloads(b2), payloads(b1))
	}
	ack(t, s)
	if reader == readerStream {
		next(t, s) // the stream confirms asynchronously
		nack(t, s)
		sdktest.WaitFor(t, 15*time.Second, "the slot at the committed state", func() bool { return slotPos(t, db, opt.ReplicationSlot).String() == mustState(t, b2.State) })
	} else if pos := slotPos(t, db, opt.ReplicationSlot); pos.String() != mustState(t, b2.State) {
		t.Errorf("slot at %s, state %s", pos, b2.State)
	}
	b3 := next(t, s)
	if got := payloads(b3); len(got) != 1 || got[0] != `{"id":4,"__op":"insert"}` {
		t.Fatalf("after ack got %v", got)
	}
	// Not acknowledged: a restart from the committed state reads it again.
	s.Close(context.Background())
	s2 := open(t, opt, b2.State)
	b4 := next(t, s2)
	if got := payloads(b4); len(got) != 1 || got[0] != `{"id":4,"__op":"insert"}` {
		t.Fatalf("after restart got %v", got)
	}
	// The committed state wins over the slot: the runtime saved b4's
	// state but the process died before the slot moved.
	s2.Close(context.Background())
	s3 := open(t, opt, b4.State)
	db.exec(`INSERT INTO t VALUES (5)`)
	b5 := next(t, s3)
	if got := payloads(b5); len(got) != 1 || got[0] != `{"id":5,"__op":"insert"}` {
		t.Fatalf("after restart with newer state got %v", got)
	}
}

func TestQuietDatabaseAdvances(t *testing.T) { forReaders(t, testQuietDatabaseAdvances) }

func testQuietDatabaseAdvances(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY); CREATE TABLE noise (id serial PRIMARY KEY, v text)`)
	opt := db.cdcOptions("t")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	s := open(t, opt, nil)
	start := slotPos(t, db, opt.ReplicationSlot)
	db.exec(`INSERT INTO noise (v) SELECT 'x' FROM generate_series(1, 1000)`)
	sdktest.WaitFor(t, 15*time.Second, "the slot to advance", func() bool {
		empty(t, s)
		ack(t, s) // the runtime acknowledges the empty batch
		return slotPos(t, db, opt.ReplicationSlot) > start
	})
	// Still nothing lost afterwards.
	db.exec(`INSERT INTO t VALUES (1)`)
	if got := payloads(next(t, s)); len(got) != 1 {
		t.Fatalf("got %v", got)
	}
}

func slotPos(t testing.TB, db *testDB, slot string) pglogrepl.LSN {
	t.Helper()
	lsn, err := pglogrepl.ParseLSN(db.value(`SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '` + slot + `'`))
	if err != nil {
		t.Fatal(err)
	}
	return lsn
}

func mustState(t testing.TB, blob []byte) string {
	t.Helper()
	var st state
	if err := jsonUnmarshal(blob, &st); err != nil {
		t.Fatal(err)
	}
	return st.LSN
}

// forReaders runs a CDC test with each reader.
func forReaders(t *testing.T, test func(t *testing.T, reader string)) {
	for _, r := range []string{readerPeek, readerStream} {
		t.Run(r, func(t *testing.T) { test(t, r) })
	}
}
