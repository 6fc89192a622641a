package postgressource

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// heapAfterGC is the live heap once garbage is collected.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryBoundedByBatch reads 80 batches of about 1 MB through Poll and
// Ack, with rows of about 2 KiB of varying width and metadata on (as in
// the soak), and measures the live heap after every batch from the 10th:
// what a source keeps between batches must not grow with what it has
// produced. (The payload arena used to double its block for ever, and
// then a record that did not fit a block made append move the block, with
// a copy of everything before it, to an array 1.25x bigger: blocks grew to
// tens of MB, two of them live at once, until a record happened to end
// within 256 bytes of a block's end.)
func TestMemoryBoundedByBatch(t *testing.T) { forReaders(t, testMemoryBoundedByBatch) }

func testMemoryBoundedByBatch(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE big (id int PRIMARY KEY, v text)`)
	opt := db.cdcOptions("big")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	opt.IncludeMetadata = true
	const perTx, txs, rowBytes = 500, 80, 2100
	opt.BatchSize = perTx
	if reader == readerPeek {
		opt.BatchSize = perTx + 2 // upto_nchanges counts begin and commit
	}
	s := open(t, opt, nil)
	for i := 0; i < txs; i++ {
		db.exec(fmt.Sprintf(`INSERT INTO big SELECT i, 'row ' || i || repeat('.', 1900 + i %% 37) FROM generate_series(%d, %d) i`, i*perTx+1, (i+1)*perTx))
	}
	var base, peak uint64
	got := 0
	for n := 1; got < perTx*txs; n++ {
		b := next(t, s)
		if len(b.Messages) > opt.BatchSize {
			t.Fatalf("batch of %d records, batch_size %d", len(b.Messages), opt.BatchSize)
		}
		got += len(b.Messages)
		ack(t, s)
		switch {
		case n == 10:
			base = heapAfterGC()
			peak = base
		case n > 10:
			peak = max(peak, heapAfterGC())
		}
	}
	grown := int64(peak) - int64(base)
	batchBytes := int64(perTx * rowBytes)
	t.Logf("%s: live heap after the 10th batch %d KiB, highest after a later one %d KiB (+%d KiB), %d batches of ~%d KiB", reader, base>>10, peak>>10, grown>>10, txs-10, batchBytes>>10)
	if grown > 8*batchBytes+4<<20 {
		t.Fatalf("live heap grew by %d KiB during %d more batches of ~%d KiB: memory is not bounded by the batch", grown>>10, txs-10, batchBytes>>10)
	}
}

// TestEmptyPeekNeverSkipsUnflushedCommit commits rows with
// synchronous_commit = off while other sessions write to another table, and
// polls at once: logical decoding returns only flushed WAL, so an empty
// poll must not move the slot past a commit that was written but not yet
// flushed. Every row must arrive.
func TestEmptyPeekNeverSkipsUnflushedCommit(t *testing.T) {
	forReaders(t, testEmptyPeekNeverSkipsUnflushedCommit)
}

func testEmptyPeekNeverSkipsUnflushedCommit(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY); CREATE TABLE noise (id serial PRIMARY KEY, v text)`)
	opt := db.cdcOptions("t")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	opt.PollInterval = 5 * time.Millisecond
	s := open(t, opt, nil)

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	for w := 0; w < 2; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			conn, err := pgconn.Connect(ctx, db.dsn)
			if err != nil {
				return
			}
			defer conn.Close(context.Background())
			conn.Exec(ctx, `SET synchronous_commit = off`).ReadAll()
			for ctx.Err() == nil {
				conn.Exec(ctx, `INSERT INTO noise (v) SELECT repeat('n', 200) FROM generate_series(1, 20)`).ReadAll()
			}
		}()
	}

	async, err := pgconn.Connect(ctx, db.dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer async.Close(context.Background())
	if _, err := async.Exec(ctx, `SET synchronous_commit = off`).ReadAll(); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	collect := func(b []string) {
		for _, id := range ids(t, b) {
			seen[id] = true
		}
	}
	const rows = 20
	for i := 1; i <= rows; i++ {
		if _, err := async.Exec(ctx, `INSERT INTO t VALUES (`+strconv.Itoa(i)+`)`).ReadAll(); err != nil {
			t.Fatal(err)
		}
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		b, err := s.Poll(pctx)
		pcancel()
		if err != nil {
			t.Fatal(err)
		}
		collect(payloads(b))
		ack(t, s)
	}
	db.exec(`SET synchronous_commit = on; INSERT INTO noise (v) VALUES ('flush')`)
	deadline := time.Now().Add(10 * time.Second)
	for len(seen) < rows && time.Now().Before(deadline) {
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		b, err := s.Poll(pctx)
		pcancel()
		if err != nil {
			t.Fatal(err)
		}
		collect(payloads(b))
		ack(t, s)
	}
	if len(seen) != rows {
		var missing []int
		for i := 1; i <= rows; i++ {
			if !seen[strconv.Itoa(i)] {
				missing = append(missing, i)
			}
		}
		t.Fatalf("%d of %d rows never arrived (skipped by an empty poll's advance): %v", len(missing), rows, missing)
	}
}

// TestHugeTransactionSplit delivers one 2,500-row transaction with
// batch_size 1000: no batch is larger than batch_size, a Nack returns the
// same piece, and a restart from the state of a piece in the middle (the
// process died before the next piece's state was saved) resumes inside
// the transaction: every row arrives, and the only repeats are the piece
// that was in flight.
func TestHugeTransactionSplit(t *testing.T) { forReaders(t, testHugeTransactionSplit) }

func testHugeTransactionSplit(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY, v text); CREATE TABLE other (id int)`)
	opt := db.cdcOptions("t")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	opt.BatchSize = 1000
	s := open(t, opt, nil)
	db.exec(`INSERT INTO t VALUES (0, 'before')`)
	next(t, s)
	ack(t, s)
	db.exec(`BEGIN; INSERT INTO t SELECT i, 'v' FROM generate_series(1, 1200) i; INSERT INTO other SELECT generate_series(1, 100);
INSERT INTO t SELECT i, 'v' FROM generate_series(1201, 2500) i; DELETE FROM t WHERE id = 0; COMMIT;
INSERT INTO t VALUES (3000, 'after')`)
	var got []string
	take := func(s *Source, want int) sdk.Batch {
		t.Helper()
		b := next(t, s)
		if len(b.Messages) > opt.BatchSize {
			t.Fatalf("batch of %d records, batch_size %d", len(b.Messages), opt.BatchSize)
		}
		if want > 0 && len(b.Messages) != want {
			t.Fatalf("batch of %d records, want %d", len(b.Messages), want)
		}
		return b
	}
	t.Log("first piece")
	b1 := take(s, 1000)
	nack(t, s)
	if again := take(s, 1000); string(again.State) != string(b1.State) || payloads(again)[999] != payloads(b1)[999] {
		t.Fatalf("after nack: state %s, want %s", again.State, b1.State)
	}
	ack(t, s)
	got = append(got, ids(t, payloads(b1))...)
	b2 := take(s, 1000)
	// The process dies here: b2 was produced, its state not saved.
	s.Close(context.Background())
	got = append(got, ids(t, payloads(b2))...)
	t.Logf("restart from %s", b1.State)
	s2 := open(t, opt, b1.State)
	for len(got) < 1000+1000+1500+2 {
		b := take(s2, 0)
		got = append(got, ids(t, payloads(b))...)
		ack(t, s2)
	}
	// b2's 1000 rows twice, then the rest once each, in order.
	var want []string
	for i := 1; i <= 2000; i++ {
		want = append(want, strconv.Itoa(i))
	}
	for i := 1001; i <= 2500; i++ {
		want = append(want, strconv.Itoa(i))
	}
	want = append(want, "0", "3000")
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %d ids, want %d: %.300v", len(got), len(want), got)
	}
	empty(t, s2)
	// A checkpoint written before tx_lsn existed still loads, and resumes
	// at its LSN.
	old := fmt.Sprintf(`{"v":1,"mode":"cdc","lsn":%q}`, mustState(t, s2.committed.mustBlob(t)))
	s2.Close(context.Background())
	db.exec(`INSERT INTO t VALUES (4000, 'later')`)
	s3 := open(t, opt, []byte(old))
	if got := ids(t, payloads(take(s3, 1))); got[0] != "4000" {
		t.Fatalf("from an old checkpoint: %v", got)
	}
}

func (st *state) mustBlob(t testing.TB) []byte {
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
