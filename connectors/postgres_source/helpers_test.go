package postgressource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/sdk"
)

var (
	// The shared server starts with the first test that needs it, so a
	// fuzz worker, which runs only a fuzz target, starts no PostgreSQL.
	sharedOnce sync.Once
	shared     *pgtest.Server
	sharedErr  error
	dbSeq      atomic.Int64
)

func TestMain(m *testing.M) {
	code := m.Run()
	runtimebin.Remove()
	if shared != nil {
		shared.Close()
	}
	os.Exit(code)
}

// testDB is one fresh database on the shared server.
type testDB struct {
	t   testing.TB
	srv *pgtest.Server
	dsn string
	tag string // unique per database: names slots and publications
}

func newDB(t testing.TB) *testDB {
	t.Helper()
	sharedOnce.Do(func() { shared, sharedErr = pgtest.New() })
	pgtest.Need(t, sharedErr)
	return newDBOn(t, shared)
}

func newDBOn(t testing.TB, srv *pgtest.Server) *testDB {
	t.Helper()
	tag := fmt.Sprintf("t%d", dbSeq.Add(1))
	dsn := srv.CreateDatabase(t, tag)
	t.Cleanup(func() {
		// Slots are per cluster: free this database's for later tests.
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if conn, err := pgconn.Connect(ctx, srv.DSN()); err == nil {
			conn.Exec(ctx, `SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE database = '`+tag+`' AND active_pid IS NOT NULL`).ReadAll()
			time.Sleep(50 * time.Millisecond)
			conn.Exec(ctx, `SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE database = '`+tag+`' AND NOT active`).ReadAll()
			conn.Close(ctx)
		}
	})
	return &testDB{t: t, srv: srv, dsn: dsn, tag: tag}
}

func (d *testDB) exec(sql string) {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, d.dsn)
	if err != nil {
		d.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql).ReadAll(); err != nil {
		d.t.Fatalf("%v\nin: %s", err, sql)
	}
}

// value runs a query returning one text value.
func (d *testDB) value(sql string) string {
	d.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, d.dsn)
	if err != nil {
		d.t.Fatal(err)
	}
	defer conn.Close(context.Background())
	res, err := conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		d.t.Fatalf("%v\nin: %s", err, sql)
	}
	if len(res) == 0 || len(res[0].Rows) == 0 {
		return ""
	}
	return string(res[0].Rows[0][0])
}

// The CDC readers, as cdc_reader names them.
const (
	readerPeek   = "peek"
	readerStream = "stream"
)

// testConfig is a Config with every default, for d, reading tables in mode,
// in batches of 1000 every 20ms, without the metadata fields.
func (d *testDB) testConfig(mode postgressourceconfig.Mode, tables ...string) postgressourceconfig.Config {
	c := postgressourceconfig.Default()
	c.ConnectionString, c.Mode, c.Tables = confkit.NewSecret(d.dsn), mode, tables
	c.BatchSize, c.PollInterval, c.IncludeMetadata = 1000, 20*time.Millisecond, false
	return c
}

func (d *testDB) cdcOptions(tables ...string) postgressourceconfig.Config {
	c := d.testConfig(postgressourceconfig.ModeCDC, tables...)
	c.ReplicationSlot, c.Publication = "slot_"+d.tag, "pub_"+d.tag
	return c
}

func (d *testDB) pollOptions(tables ...string) postgressourceconfig.Config {
	return d.testConfig(postgressourceconfig.ModePolling, tables...)
}

func open(t testing.TB, opt postgressourceconfig.Config, st []byte) *Source {
	t.Helper()
	s, err := openSource(opt, st)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// next polls until a non-empty batch arrives.
func next(t testing.TB, s *Source) sdk.Batch {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := s.Poll(ctx)
		cancel()
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(b.Messages) > 0 {
			return b
		}
	}
	t.Fatal("no batch within 20s")
	return sdk.Batch{}
}

// empty polls once and fails if anything came back.
func empty(t testing.TB, s *Source) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := s.Poll(ctx)
	if err != nil {
		t.Fatalf("poll: %v", err)
	}
	if len(b.Messages) > 0 || b.State != nil {
		t.Fatalf("expected an empty batch, got %d records: %s", len(b.Messages), payloads(b))
	}
}

func ack(t testing.TB, s *Source) {
	t.Helper()
	if err := s.OnBatchResult(context.Background(), sdk.Ack); err != nil {
		t.Fatal(err)
	}
}

func nack(t testing.TB, s *Source) {
	t.Helper()
	if err := s.OnBatchResult(context.Background(), sdk.Nack); err != nil {
		t.Fatal(err)
	}
}

func payloads(b sdk.Batch) []string {
	out := make([]string, len(b.Messages))
	for i, m := range b.Messages {
		out[i] = string(m.Payload)
	}
	return out
}

func decode(t testing.TB, m sdk.Message) map[string]any {
	t.Helper()
	var v map[string]any
	dec := json.NewDecoder(bytesReader(m.Payload))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("payload is not JSON: %v\n%s", err, m.Payload)
	}
	return v
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }

func jsonUnmarshal(b []byte, v any) error { return json.Unmarshal(b, v) }

func testEnv() sdk.Env {
	return sdk.Env{Key: "test", Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})), Metrics: sdk.DiscardMetrics}
}

// openSource builds a source from opt and opens it with the state st, as
// the runtime does.
func openSource(opt postgressourceconfig.Config, st []byte) (*Source, error) {
	s, err := newSource(opt, testEnv())
	if err != nil {
		return nil, err
	}
	if err := s.Open(context.Background(), st); err != nil {
		s.Close(context.Background())
		return nil, err
	}
	return s, nil
}

// startRuntime starts the pico-connectors binary bin on dir/runtime.toml,
// its output captured.
func startRuntime(t *testing.T, bin, dir string) (*exec.Cmd, *runtimebin.Output) {
	t.Helper()
	cmd := exec.Command(bin, "run", "--config", filepath.Join(dir, "runtime.toml"))
	out := &runtimebin.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd, out
}

// checkpointLSN is the CDC position of the state file at statePath, 0
// before the first checkpoint.
func checkpointLSN(t *testing.T, statePath string) pglogrepl.LSN {
	t.Helper()
	blob, err := os.ReadFile(statePath)
	if err != nil {
		return 0
	}
	var st state
	if err := json.Unmarshal(blob, &st); err != nil {
		t.Fatalf("state %q: %v", blob, err)
	}
	lsn, _ := pglogrepl.ParseLSN(st.LSN)
	return lsn
}

// writer starts a writer on table (id int primary key, v int) that keeps
// updating (v+1), deleting and inserting rows, ids 1 to n and new ones
// from next+1, one statement a millisecond; stop ends it and waits.
func (d *testDB) writer(table string, n, next int) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		conn, err := pgconn.Connect(ctx, d.dsn)
		if err != nil {
			return
		}
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			id := 1 + rand.IntN(n)
			sql := fmt.Sprintf(`UPDATE %s SET v = v + 1 WHERE id = %d`, table, id)
			switch rand.IntN(10) {
			case 0:
				sql = fmt.Sprintf(`DELETE FROM %s WHERE id = %d`, table, id)
			case 1:
				next++
				sql = fmt.Sprintf(`INSERT INTO %s VALUES (%d, 0)`, table, next)
			}
			conn.Exec(ctx, sql).ReadAll()
			time.Sleep(time.Millisecond)
		}
	}()
	return func() { cancel(); wg.Wait() }
}

// runtimeSetup returns a folder for a runtime's files, the runtime binary
// and a broker (closed at the end of the test) for the runtime tests.
func runtimeSetup(t *testing.T) (dir, bin string, b *broker.Broker) {
	t.Helper()
	bin = runtimebin.Build(t)
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return t.TempDir(), bin, b
}

// cdcKill is what one SIGKILL left: the topic's high watermark and the
// saved checkpoint right after it.
type cdcKill struct {
	hw int64
	cp pglogrepl.LSN
}

// killRun is a runtime process SIGKILLed and restarted while a writer
// writes rows to one topic.
type killRun struct {
	t          *testing.T
	b          *broker.Broker
	topic      string
	rows       int
	start      func() (*exec.Cmd, *runtimebin.Output)
	checkpoint func() pglogrepl.LSN
	cmd        *exec.Cmd
	out        *runtimebin.Output
}

// kill waits until step more records reached the topic (or every row
// did), sleeps a random moment below pause, SIGKILLs the runtime, notes
// what it left and starts it again.
func (r *killRun) kill(i int, step int64, pause time.Duration, rng *rand.Rand, written *atomic.Bool) cdcKill {
	t, b := r.t, r.b
	base := b.HighWatermark(r.topic)
	deadline := time.Now().Add(30 * time.Second)
	for b.HighWatermark(r.topic) < base+step {
		if written.Load() {
			if caughtUp(t, b, r.topic, r.rows) {
				break // everything is there: no more progress to wait for
			}
			time.Sleep(300 * time.Millisecond)
		}
		if time.Now().After(deadline) {
			r.cmd.Process.Kill()
			t.Fatalf("no progress before kill %d (topic at %d); runtime output:\n%s", i+1, b.HighWatermark(r.topic), r.out.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(time.Duration(rng.IntN(int(pause.Milliseconds()))) * time.Millisecond)
	r.cmd.Process.Signal(syscall.SIGKILL)
	r.cmd.Wait()
	k := cdcKill{hw: b.HighWatermark(r.topic), cp: r.checkpoint()}
	t.Logf("kill %d: %d records on %s, checkpoint %s", i+1, k.hw, r.topic, k.cp)
	r.cmd, r.out = r.start()
	return k
}

// finish waits for the writer, lets the last run catch up with every row,
// then stops it gracefully.
func (r *killRun) finish(writerDone <-chan error) {
	t := r.t
	if err := <-writerDone; err != nil {
		r.cmd.Process.Kill()
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for !caughtUp(t, r.b, r.topic, r.rows) {
		if time.Now().After(deadline) {
			r.cmd.Process.Kill()
			t.Fatalf("runtime did not catch up (topic at %d, checkpoint %s); output:\n%s", r.b.HighWatermark(r.topic), r.checkpoint(), r.out.String())
		}
		time.Sleep(300 * time.Millisecond)
	}
	r.cmd.Process.Signal(syscall.SIGTERM)
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("graceful stop: %v\n%s", err, r.out.String())
	}
}
