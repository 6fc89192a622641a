package postgressource

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// TestPollingConcurrentWritersSIGKILL: four writers insert into one table
// through a bigserial id, each holding its transaction open for a random
// 0-500 ms before it commits, so ids become visible out of order: a
// transaction holding low ids often commits after one holding higher ids.
// The pico-connectors runtime (a subprocess running this source in polling
// mode, tracking id) is killed with SIGKILL five times at random moments and
// restarted. At the end every row of the table must be on the topic.
//
// Before the visibility window, polling moved its cursor past the highest id
// it read and never saw a lower id committed later: this test reported
// thousands of missing rows.
//
// PICO_PG_POLL_ROWS sets the number of rows: 50,000 by default, the
// issue's figure (the writers' open transactions set the pace: 68 s on two
// busy cores, 0 missing).
func TestPollingConcurrentWritersSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the runtime binary and runs it six times; skipped with -short")
	}
	rows := 50_000
	if v := os.Getenv("PICO_PG_POLL_ROWS"); v != "" {
		rows, _ = strconv.Atoi(v)
	}
	const writers, perTx = 4, 50
	db := newDB(t)
	db.exec(`CREATE TABLE pc (id bigserial PRIMARY KEY, w int NOT NULL, v text)`)

	dir, bin, b := runtimeSetup(t)

	const topic = "pg.pc"
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	runtime := fmt.Sprintf("shutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\n[http]\naddress = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n", b.Addr())
	def := fmt.Sprintf(`type = "source"
key = "pc"
path = "libpicomq_connector_postgres_source"
[[topics]]
topic = %q
create_topics = true
batch_length = 1000
[plugin_config]
connection_string = %q
mode = "polling"
tables = ["public.pc"]
batch_size = 1000
poll_interval = "20ms"
`, topic, db.dsn)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtime), 0o644)
	os.WriteFile(filepath.Join(dir, "connectors", "pc.toml"), []byte(def), 0o644)

	start := func() (*exec.Cmd, *runtimebin.Output) {
		cmd := exec.Command(bin, "run", "--config", filepath.Join(dir, "runtime.toml"))
		out := &runtimebin.Output{}
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, out
	}
	cmd, out := start()

	// The writers: BEGIN, insert perTx rows, sleep 0-500 ms, COMMIT.
	var (
		wg       sync.WaitGroup
		errMu    sync.Mutex
		writeErr error
		done     = make(chan struct{})
	)
	per := rows / writers
	for w := 0; w < writers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			ctx := context.Background()
			conn, err := pgconn.Connect(ctx, db.dsn)
			if err != nil {
				errMu.Lock()
				writeErr = err
				errMu.Unlock()
				return
			}
			defer conn.Close(ctx)
			rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(w)))
			for n := 0; n < per; n += perTx {
				k := min(perTx, per-n)
				if _, err := conn.Exec(ctx, fmt.Sprintf(`BEGIN; INSERT INTO pc (w, v) SELECT %d, 'row' FROM generate_series(1, %d)`, w, k)).ReadAll(); err != nil {
					errMu.Lock()
					writeErr = err
					errMu.Unlock()
					return
				}
				time.Sleep(time.Duration(rng.IntN(501)) * time.Millisecond)
				if _, err := conn.Exec(ctx, `COMMIT`).ReadAll(); err != nil {
					errMu.Lock()
					writeErr = err
					errMu.Unlock()
					return
				}
			}
		}(w)
	}
	go func() { wg.Wait(); close(done) }()

	// Five SIGKILLs, spread over the writing, each after some progress.
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 99))
	for i := 0; i < 5; i++ {
		base := b.HighWatermark(topic)
		deadline := time.Now().Add(60 * time.Second)
		for b.HighWatermark(topic) < base+int64(rows/12) {
			select {
			case <-done:
				goto kill // the writers are done: kill now
			default:
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatalf("no progress before kill %d (topic at %d); runtime output:\n%s", i+1, b.HighWatermark(topic), out.String())
			}
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(time.Duration(rng.IntN(300)) * time.Millisecond)
	kill:
		cmd.Process.Signal(syscall.SIGKILL)
		cmd.Wait()
		t.Logf("kill %d: %d records on the topic", i+1, b.HighWatermark(topic))
		cmd, out = start()
	}
	<-done
	if writeErr != nil {
		cmd.Process.Kill()
		t.Fatal(writeErr)
	}
	total, _ := strconv.Atoi(db.value(`SELECT count(*) FROM pc`))

	// The source has caught up once a marker row committed after every
	// writer is on the topic; the table's ids are then all readable.
	marker := db.value(`INSERT INTO pc (w, v) VALUES (-1, 'marker') RETURNING id`)
	deadline := time.Now().Add(120 * time.Second)
	for !onTopic(t, b, topic, marker) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the marker row %s never reached the topic (topic at %d); output:\n%s", marker, b.HighWatermark(topic), out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	// One more full round of polls after the marker (a later marker seen)
	// so that a late row, if the source can read it at all, is read.
	marker2 := db.value(`INSERT INTO pc (w, v) VALUES (-1, 'marker') RETURNING id`)
	for !onTopic(t, b, topic, marker2) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatalf("the second marker never reached the topic; output:\n%s", out.String())
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, out.String())
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]int{}
	for _, r := range recs {
		var p struct {
			ID *int64 `json:"id"`
		}
		if err := json.Unmarshal(r.Value, &p); err != nil || p.ID == nil {
			t.Fatalf("offset %d: %q", r.Offset, r.Value)
		}
		seen[*p.ID]++
	}
	idRes := db.value(`SELECT string_agg(id::text, ',' ORDER BY id) FROM pc WHERE w >= 0`)
	var missing []string
	dups := 0
	for _, s := range splitComma(idRes) {
		id, _ := strconv.ParseInt(s, 10, 64)
		switch n := seen[id]; {
		case n == 0:
			missing = append(missing, s)
		case n > 1:
			dups += n - 1
		}
	}
	t.Logf("%d rows written by %d writers (plus 2 markers), %d records on the topic, %d missing, %d duplicates", total, writers, len(recs), len(missing), dups)
	if len(missing) > 0 {
		show := missing
		if len(show) > 20 {
			show = show[:20]
		}
		t.Fatalf("%d of %d rows never reached the topic, such as ids %v", len(missing), rows, show)
	}
}

func splitComma(s string) []string {
	if s == "" {
		return nil
	}
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}

// onTopic reports whether a record with this id is on the topic.
func onTopic(t *testing.T, b *broker.Broker, topic, id string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	for i := len(recs) - 1; i >= 0; i-- {
		var p struct {
			ID json.RawMessage `json:"id"`
		}
		json.Unmarshal(recs[i].Value, &p)
		if string(p.ID) == id {
			return true
		}
	}
	return false
}
