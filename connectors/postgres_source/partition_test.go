package postgressource

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

const partitionedOrders = `CREATE TABLE orders (id int PRIMARY KEY, region text, amount int) PARTITION BY RANGE (id);
CREATE TABLE orders_p1 PARTITION OF orders FOR VALUES FROM (1) TO (10001);
CREATE TABLE orders_p2 PARTITION OF orders FOR VALUES FROM (10001) TO (20001);
CREATE TABLE orders_p3 PARTITION OF orders FOR VALUES FROM (20001) TO (30001)`

// drainIDs polls s (acking every batch) until every id of want has come,
// and returns how many times each id came and the tables the records named.
func drainIDs(t *testing.T, s *Source, want int, seen map[int]int, tables map[string]bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < want {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d rows arrived", len(seen), want)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := s.Poll(ctx)
		cancel()
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		for _, m := range b.Messages {
			var p struct {
				ID    int    `json:"id"`
				Table string `json:"__table"`
				Op    string `json:"__op"`
			}
			if err := json.Unmarshal(m.Payload, &p); err != nil {
				t.Fatal(err)
			}
			seen[p.ID]++
			tables[p.Table] = true
		}
		if len(b.Messages) > 0 {
			ack(t, s)
		}
	}
}

// TestPartitionedTableThroughRoot: a partitioned orders table with three
// range partitions is captured through its root (snapshot, then the
// stream) while a writer inserts into every partition; a fourth partition
// is attached mid-run and written to, through the root and directly; the
// source is restarted from its checkpoint once. Every row arrives exactly
// once, every record names public.orders, and the publication the source
// created has publish_via_partition_root.
func TestPartitionedTableThroughRoot(t *testing.T) {
	db := newDB(t)
	db.exec(partitionedOrders + `;
INSERT INTO orders SELECT i, 'r' || (i % 3), i FROM generate_series(1, 300) i;
INSERT INTO orders SELECT i, 'r', i FROM generate_series(10001, 10300) i;
INSERT INTO orders SELECT i, 'r', i FROM generate_series(20001, 20300) i`)
	opt := db.cdcOptions("orders")
	opt.Snapshot = postgressourceconfig.SnapshotInitial
	opt.IncludeMetadata = true
	opt.BatchSize = 250
	s := open(t, opt, nil)
	if v := db.value(`SELECT pubviaroot FROM pg_publication WHERE pubname = 'pub_` + db.tag + `'`); v != "t" {
		t.Fatalf("publish_via_partition_root = %q", v)
	}

	// A writer inserts into every partition, 30 rows a transaction.
	writer := func(from, n int, table string) chan error {
		done := make(chan error, 1)
		go func() {
			ctx := context.Background()
			conn, err := pgconn.Connect(ctx, db.dsn)
			if err != nil {
				done <- err
				return
			}
			defer conn.Close(ctx)
			for i := 0; i < n; i += 10 {
				sql := ""
				for _, base := range []int{0, 10000, 20000} {
					sql += fmt.Sprintf("INSERT INTO %s SELECT g, 'w', g FROM generate_series(%d, %d) g;", table, from+base+i, from+base+i+9)
				}
				if _, err := conn.Exec(ctx, "BEGIN;"+sql+"COMMIT").ReadAll(); err != nil {
					done <- err
					return
				}
			}
			done <- nil
		}()
		return done
	}
	w1 := writer(1001, 500, "orders")
	seen, tables := map[int]int{}, map[string]bool{}
	drainIDs(t, s, 900, seen, tables) // the snapshot at least
	if err := <-w1; err != nil {
		t.Fatal(err)
	}

	// A restart from the checkpoint (everything acknowledged).
	st := s.committed
	blob, _ := json.Marshal(st)
	s.Close(context.Background())
	s = open(t, opt, blob)

	// The fourth partition, attached while the source runs.
	db.exec(`CREATE TABLE orders_p4 (LIKE orders INCLUDING DEFAULTS);
ALTER TABLE orders ATTACH PARTITION orders_p4 FOR VALUES FROM (30001) TO (40001)`)
	w2 := writer(2001, 200, "orders")
	db.exec(`INSERT INTO orders SELECT i, 'p4', i FROM generate_series(30001, 30300) i`)
	db.exec(`INSERT INTO orders_p4 SELECT i, 'direct', i FROM generate_series(30301, 30400) i`)
	if err := <-w2; err != nil {
		t.Fatal(err)
	}
	total, _ := strconv.Atoi(db.value(`SELECT count(*) FROM orders`))
	if total != 900+1500+600+400 {
		t.Fatalf("the table holds %d rows", total)
	}
	drainIDs(t, s, total, seen, tables)
	empty(t, s)

	var dups []int
	for id, n := range seen {
		if n != 1 {
			dups = append(dups, id)
		}
	}
	sort.Ints(dups)
	if len(dups) > 0 {
		t.Fatalf("%d rows came more than once, such as %v", len(dups), dups[:min(10, len(dups))])
	}
	if ids := db.value(`SELECT count(*) FROM orders WHERE id BETWEEN 30001 AND 40000`); ids != "400" {
		t.Fatalf("p4 holds %s rows", ids)
	}
	if len(tables) != 1 || !tables["public.orders"] {
		t.Fatalf("records named %v, want only public.orders", tables)
	}
}

// TestPartitionedPublicationWithoutRootOption: an existing publication of
// a partitioned table without publish_via_partition_root is refused with
// the statement to run; after it, the source starts.
func TestPartitionedPublicationWithoutRootOption(t *testing.T) {
	db := newDB(t)
	db.exec(partitionedOrders)
	opt := db.cdcOptions("orders")
	db.exec(`CREATE PUBLICATION pub_` + db.tag + ` FOR TABLE orders`)
	_, err := openSource(opt, nil)
	want := `ALTER PUBLICATION "pub_` + db.tag + `" SET (publish_via_partition_root = true)`
	if err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "public.orders is a partitioned table") {
		t.Fatalf("got %v, want a message with %s", err, want)
	}
	db.exec(`ALTER PUBLICATION pub_` + db.tag + ` SET (publish_via_partition_root = true)`)
	s := open(t, opt, nil)
	db.exec(`INSERT INTO orders VALUES (15000, 'x', 1)`)
	if got := payloads(next(t, s)); len(got) != 1 || !strings.HasPrefix(got[0], `{"id":15000,`) {
		t.Fatalf("got %v", got)
	}
}

// TestPartitionedNoKeySnapshot: the initial snapshot of a partitioned
// table without a primary key pages by (partition, ctid), since a ctid is
// unique within one partition only: every row once, in pages of 7.
func TestPartitionedNoKeySnapshot(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE ev (id int, v text) PARTITION BY LIST (v);
CREATE TABLE ev_a PARTITION OF ev FOR VALUES IN ('a');
CREATE TABLE ev_b PARTITION OF ev FOR VALUES IN ('b');
INSERT INTO ev SELECT i, CASE WHEN i % 2 = 0 THEN 'a' ELSE 'b' END FROM generate_series(1, 40) i`)
	opt := db.cdcOptions("ev")
	opt.Snapshot = postgressourceconfig.SnapshotInitial
	opt.CaptureOperations = []string{"insert"}
	opt.BatchSize = 7
	s := open(t, opt, nil)
	seen, tables := map[int]int{}, map[string]bool{}
	drainIDs(t, s, 40, seen, tables)
	empty(t, s)
	for id := 1; id <= 40; id++ {
		if seen[id] != 1 {
			t.Fatalf("row %d came %d times", id, seen[id])
		}
	}
}

// TestPartitionedPolling: polling reads a partitioned table through its
// root, with the visibility window (xmin is read through the root): a row
// committed late, below the cursor, in another partition, is read.
func TestPartitionedPolling(t *testing.T) {
	db := newDB(t)
	db.exec(partitionedOrders + `; INSERT INTO orders VALUES (1, 'a', 1), (10001, 'b', 1)`)
	commitLate := holdTx(t, db, `INSERT INTO orders VALUES (2, 'late', 1)`)
	opt := db.pollOptions("orders")
	s := open(t, opt, nil)
	if !s.plans["public.orders"].window {
		t.Fatal("a partitioned table is read with the visibility window")
	}
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[1 10001]" {
		t.Fatalf("got %v", got)
	}
	ack(t, s)
	db.exec(`INSERT INTO orders VALUES (20001, 'c', 1)`)
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[20001]" {
		t.Fatalf("got %v", got)
	}
	ack(t, s)
	commitLate()
	if got := ids(t, payloads(next(t, s))); fmt.Sprint(got) != "[2]" {
		t.Fatalf("late row: got %v", got)
	}
	ack(t, s)
	empty(t, s)
}

// TestPartitionedCrashSIGKILL: the runtime (a subprocess) captures the
// partitioned orders table in CDC mode, its records routed by __table to
// pg.{value}, while a writer inserts into every partition; a fourth
// partition is attached halfway and written to; the runtime is killed with
// SIGKILL five times and restarted. Every row is on the root's topic,
// pg.public.orders, and the only duplicates are of batches in flight at a
// kill (produced, beyond the checkpoint the kill left).
func TestPartitionedCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the runtime binary and runs it six times; skipped with -short")
	}
	db := newDB(t)
	db.exec(partitionedOrders)
	dir, bin, b := runtimeSetup(t)

	const topic, txs, perPart = "pg.public.orders", 400, 25
	rows := txs*perPart*3 + txs/2*perPart
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	runtime := fmt.Sprintf("shutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\n[http]\naddress = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n", b.Addr())
	def := fmt.Sprintf(`type = "source"
key = "parts"
path = "libpicomq_connector_postgres_source"
[[topics]]
topic = { strategy = "field", path = "__table", template = "pg.{value}" }
create_topics = true
batch_length = 1000
[plugin_config]
connection_string = %q
mode = "cdc"
tables = ["public.orders"]
batch_size = 1000
poll_interval = "20ms"
replication_slot = "parts_%s"
publication = "parts_%s"
`, db.dsn, db.tag, db.tag)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtime), 0o644)
	os.WriteFile(filepath.Join(dir, "connectors", "parts.toml"), []byte(def), 0o644)
	statePath := filepath.Join(dir, "state", "parts.state")
	start := func() (*exec.Cmd, *runtimebin.Output) { return startRuntime(t, bin, dir) }
	checkpoint := func() pglogrepl.LSN { return checkpointLSN(t, statePath) }

	cmd, out := start()
	deadline := time.Now().Add(30 * time.Second)
	for db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'parts_`+db.tag+`'`) != "1" {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("slot not created; runtime output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	writerDone := make(chan error, 1)
	var written atomic.Bool
	go func() {
		ctx := context.Background()
		conn, err := pgconn.Connect(ctx, db.dsn)
		if err != nil {
			writerDone <- err
			return
		}
		defer conn.Close(ctx)
		for k := 0; k < txs; k++ {
			if k == txs/2 {
				// The fourth partition, attached while the source runs.
				if _, err := conn.Exec(ctx, `CREATE TABLE orders_p4 (LIKE orders INCLUDING DEFAULTS);
ALTER TABLE orders ATTACH PARTITION orders_p4 FOR VALUES FROM (30001) TO (40001)`).ReadAll(); err != nil {
					writerDone <- err
					return
				}
			}
			sql := "BEGIN;"
			bases := []int{0, 10000, 20000}
			for _, base := range bases {
				sql += fmt.Sprintf("INSERT INTO orders SELECT g, 'w', g FROM generate_series(%d, %d) g;", base+k*perPart+1, base+k*perPart+perPart)
			}
			if k >= txs/2 {
				j := k - txs/2
				sql += fmt.Sprintf("INSERT INTO orders_p4 SELECT g, 'p4', g FROM generate_series(%d, %d) g;", 30000+j*perPart+1, 30000+j*perPart+perPart)
			}
			if _, err := conn.Exec(ctx, sql+"COMMIT").ReadAll(); err != nil {
				writerDone <- err
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		written.Store(true)
		writerDone <- nil
	}()

	run := &killRun{t: t, b: b, topic: topic, rows: rows, start: start, checkpoint: checkpoint, cmd: cmd, out: out}
	var kills []cdcKill
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	for i := 0; i < 5; i++ {
		kills = append(kills, run.kill(i, int64(rows/7), 300*time.Millisecond, rng, &written)) // spread over the writing, some after the attach
	}
	run.finish(writerDone)
	for _, p := range []string{"orders_p1", "orders_p2", "orders_p3", "orders_p4"} {
		if hw := b.HighWatermark("pg.public." + p); hw > 0 { // -1: no such topic
			t.Errorf("%d records went to the partition's topic pg.public.%s", hw, p)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		offset int64
	}
	first := map[int]seen{}
	dups := 0
	for _, r := range recs {
		var p struct {
			ID    *int   `json:"id"`
			LSN   string `json:"__lsn"`
			Table string `json:"__table"`
		}
		if err := json.Unmarshal(r.Value, &p); err != nil || p.ID == nil || p.Table != "public.orders" {
			t.Fatalf("offset %d: %q", r.Offset, r.Value)
		}
		lsn, _ := pglogrepl.ParseLSN(p.LSN)
		f, ok := first[*p.ID]
		if !ok {
			first[*p.ID] = seen{r.Offset}
			continue
		}
		dups++
		inFlight := false
		for _, k := range kills {
			if f.offset < k.hw && lsn >= k.cp {
				inFlight = true
				break
			}
		}
		if !inFlight {
			t.Fatalf("row %d duplicated (offsets %d and %d, lsn %s) outside any batch in flight at a kill %v", *p.ID, f.offset, r.Offset, lsn, kills)
		}
	}
	if len(first) != rows {
		t.Fatalf("%d distinct rows on the topic, want %d", len(first), rows)
	}
	if n := db.value(`SELECT count(*) FROM orders_p4`); n != strconv.Itoa(txs/2*perPart) {
		t.Fatalf("orders_p4 holds %s rows", n)
	}
	t.Logf("%d records for %d rows (%d in the partition attached mid-run): all present, %d duplicates, all from batches in flight at a kill", len(recs), rows, txs/2*perPart, dups)
}
