package postgressource

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// TestCrashSIGKILL writes 50,000 rows while the pico-connectors runtime (a
// subprocess running this source in CDC mode) is killed with SIGKILL at
// random points five times and restarted. A consumer then reads the topic:
// every row is there, and the only duplicates are rows of batches that were
// in flight at a kill (produced, but beyond the checkpoint the kill left).
func TestCrashSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the runtime binary and runs it six times; skipped with -short")
	}
	// PICO_PG_CRASH_READER=peek runs it with the peek reader.
	reader := readerStream
	if r := os.Getenv("PICO_PG_CRASH_READER"); r != "" {
		reader = r
	}
	db := newDB(t)
	db.exec(`CREATE TABLE crash (id int PRIMARY KEY, v text)`)

	dir, bin, b := runtimeSetup(t)

	const topic, rows, perTx = "pg.crash", 50_000, 100
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	runtime := fmt.Sprintf("shutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\n[http]\naddress = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n", b.Addr())
	def := fmt.Sprintf(`type = "source"
key = "crash"
path = "libpicomq_connector_postgres_source"
[[topics]]
topic = %q
create_topics = true
batch_length = 2000
[plugin_config]
connection_string = %q
mode = "cdc"
tables = ["public.crash"]
batch_size = 2000
poll_interval = "20ms"
replication_slot = "crash_%s"
publication = "crash_%s"
cdc_reader = %q
`, topic, db.dsn, db.tag, db.tag, reader)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtime), 0o644)
	os.WriteFile(filepath.Join(dir, "connectors", "crash.toml"), []byte(def), 0o644)
	statePath := filepath.Join(dir, "state", "crash.state")

	start := func() (*exec.Cmd, *runtimebin.Output) { return startRuntime(t, bin, dir) }
	checkpoint := func() pglogrepl.LSN { return checkpointLSN(t, statePath) }

	// The first start creates the slot; rows are written from then on.
	cmd, out := start()
	deadline := time.Now().Add(30 * time.Second)
	for db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'crash_`+db.tag+`'`) != "1" {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("slot not created; runtime output:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	writerDone := make(chan error, 1)
	var written atomic.Bool // the writer has committed every row
	go func() {
		ctx := context.Background()
		conn, err := pgconn.Connect(ctx, db.dsn)
		if err != nil {
			writerDone <- err
			return
		}
		defer conn.Close(ctx)
		for i := 0; i < rows; i += perTx {
			sql := fmt.Sprintf(`INSERT INTO crash SELECT g, 'row ' || g FROM generate_series(%d, %d) g`, i+1, i+perTx)
			if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
				writerDone <- err
				return
			}
			// Paced so that the kills land while rows are still written:
			// the stream reader catches up within moments of a restart.
			time.Sleep(10 * time.Millisecond)
		}
		written.Store(true)
		writerDone <- nil
	}()

	run := &killRun{t: t, b: b, topic: topic, rows: rows, start: start, checkpoint: checkpoint, cmd: cmd, out: out}
	var kills []cdcKill
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	for i := 0; i < 5; i++ {
		kills = append(kills, run.kill(i, 500, 400*time.Millisecond, rng, &written))
	}
	run.finish(writerDone)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		offset int64
		lsn    pglogrepl.LSN
	}
	first := map[int]seen{}
	dups := 0
	for _, r := range recs {
		var p struct {
			ID  *int   `json:"id"`
			LSN string `json:"__lsn"`
		}
		if err := json.Unmarshal(r.Value, &p); err != nil || p.ID == nil {
			t.Fatalf("offset %d: %q", r.Offset, r.Value)
		}
		lsn, _ := pglogrepl.ParseLSN(p.LSN)
		f, ok := first[*p.ID]
		if !ok {
			first[*p.ID] = seen{r.Offset, lsn}
			continue
		}
		dups++
		// A duplicate: its first copy was produced before some kill, in a
		// batch beyond the checkpoint that kill left behind.
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
	for id := 1; id <= rows; id++ {
		if _, ok := first[id]; !ok {
			t.Fatalf("row %d is missing (%d records read)", id, len(recs))
		}
	}
	t.Logf("%d records for %d rows: all present, %d duplicates, all from batches in flight at a kill", len(recs), rows, dups)
}

// caughtUp reports whether every row id is on the topic.
func caughtUp(t *testing.T, b *broker.Broker, topic string, rows int) bool {
	if b.HighWatermark(topic) < int64(rows) {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, r := range recs {
		var p struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(r.Value, &p)
		ids[string(p.ID)] = true
	}
	return len(ids) >= rows
}
