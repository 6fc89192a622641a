package postgressource

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	statestore "github.com/picomq/pico-connectors/runtime/state"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// gauges records the gauges a source sets.
type gauges struct {
	mu   sync.Mutex
	vals map[string]float64
}

type gauge struct {
	g    *gauges
	name string
}

func (g gauge) Set(v float64) {
	g.g.mu.Lock()
	g.g.vals[g.name] = v
	g.g.mu.Unlock()
}

func (g *gauges) get(name string) float64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.vals[name]
}

func (g *gauges) Counter(name, _ string) sdk.Counter { return counter{g, name} }

// counter adds to its gauges' value.
type counter struct {
	g    *gauges
	name string
}

func (c counter) Add(v float64) {
	c.g.mu.Lock()
	c.g.vals[c.name] += v
	c.g.mu.Unlock()
}
func (g *gauges) Gauge(name, _ string) sdk.Gauge { return gauge{g, name} }
func (g *gauges) Histogram(string, string, []float64) sdk.Histogram {
	return sdk.DiscardMetrics.Histogram("", "", nil)
}

// logBuffer is a concurrency-safe log sink.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// churn writes about mib MiB of WAL into a table no source captures.
func (d *testDB) churn(mib int) {
	d.t.Helper()
	d.exec(`CREATE TABLE IF NOT EXISTS churn (id bigserial PRIMARY KEY, v text)`)
	d.exec(fmt.Sprintf(`INSERT INTO churn (v) SELECT repeat('w', 400) FROM generate_series(1, %d)`, mib*2000))
}

// TestSlotRetainedWALThreshold: while the source is open and nobody polls,
// the watch publishes the slot's retained WAL; above max_retained_wal the
// source loop sets status Error with the slot and the figure and keeps
// polling, and once the slot has moved the status is Running again.
func TestSlotRetainedWALThreshold(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE quiet (id int PRIMARY KEY)`)
	opt := db.cdcOptions("quiet")
	opt.CDCReader = readerStream
	opt.SlotCheckInterval = 50 * time.Millisecond
	opt.MaxRetainedWal = 8 << 20
	logs := &logBuffer{}
	metrics := &gauges{vals: map[string]float64{}}
	src, err := newSource(opt, sdk.Env{Key: "slots", Logger: slog.New(slog.NewTextHandler(logs, nil)), Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := src.Open(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	defer src.Close(context.Background())
	if err := src.Health(); err != nil {
		t.Fatalf("a new slot is healthy, got %v", err)
	}

	// Nobody polls: the slot pins everything written from now on.
	db.churn(16)
	sdktest.Eventually(t, 20*time.Second, func() error {
		if g := metrics.get("postgres_source_retained_wal_bytes"); g < 16<<20 {
			return fmt.Errorf("retained WAL gauge %.0f, want at least 16 MiB", g)
		}
		if src.Health() == nil {
			return errors.New("Health still nil")
		}
		return nil
	})
	msg := src.Health().Error()
	for _, want := range []string{opt.ReplicationSlot, "max_retained_wal = 8MiB", "bytes) of WAL"} {
		if !strings.Contains(msg, want) {
			t.Errorf("Health %q does not contain %q", msg, want)
		}
	}
	if l := logs.String(); !strings.Contains(l, "retains more WAL than max_retained_wal") || !strings.Contains(l, "slot="+opt.ReplicationSlot) || !strings.Contains(l, "retained_wal_bytes=") {
		t.Errorf("no warning naming the slot and the figure in the log:\n%s", l)
	}

	// The source loop: Error while over, and the loop goes on polling.
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	store, err := statestore.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tr := status.New("source", "slots", nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- sourceloop.Run(ctx, sourceloop.Config{
			Key: "slots", Source: alreadyOpen{src}, Store: store, Tracker: tr, BootstrapServers: b.Addr(),
			Topics: []definition.Topics{{Topic: definition.Route{Literal: "pg.slots"}, Schema: "json", CreateTopics: true, LingerTime: "1ms"}},
		})
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("sourceloop.Run: %v", err)
		}
	}()
	sdktest.Eventually(t, 20*time.Second, func() error {
		if s := tr.Snapshot(); s.Status != status.Error || !strings.Contains(s.LastError, opt.ReplicationSlot) {
			return fmt.Errorf("status %s, last error %q; want Error naming the slot", s.Status, s.LastError)
		}
		return nil
	})
	// Records still flow while the status is Error.
	db.exec(`INSERT INTO quiet VALUES (1)`)
	sdktest.Eventually(t, 20*time.Second, func() error {
		if n := tr.Snapshot().Counters.Acked; n < 1 {
			return fmt.Errorf("%d batches acknowledged", n)
		}
		return nil
	})
	// The source confirms what it read; restart_lsn follows at the next
	// xl_running_xacts record, which a checkpoint writes.
	sdktest.Eventually(t, 60*time.Second, func() error {
		db.exec(`CHECKPOINT`)
		if s := tr.Snapshot(); s.Status != status.Running {
			return fmt.Errorf("status %s (%s), want Running once the slot moved", s.Status, s.LastError)
		}
		return nil
	})
	if g := metrics.get("postgres_source_retained_wal_bytes"); g >= 8<<20 {
		t.Errorf("status Running with the retained WAL gauge at %.0f", g)
	}
}

// invalidatedServer starts a server of its own (the setting would
// invalidate other tests' slots) that keeps at most 1 MB of WAL for a slot.
func invalidatedServer(t *testing.T) *testDB {
	t.Helper()
	if pgtest.BinDir() == "" {
		pgtest.Need(t, pgtest.ErrNoBinaries)
	}
	srv := pgtest.Start(t)
	srv.Exec(t, `ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'`)
	srv.Exec(t, `SELECT pg_reload_conf()`)
	return newDBOn(t, srv)
}

// invalidate writes WAL past max_slot_wal_keep_size and checkpoints until
// the slot is lost.
func (d *testDB) invalidate(slot string) {
	d.t.Helper()
	for i := 0; i < 20; i++ {
		d.churn(2)
		d.exec(`SELECT pg_switch_wal()`)
		d.exec(`CHECKPOINT`)
		if d.value(`SELECT wal_status FROM pg_replication_slots WHERE slot_name = '`+slot+`'`) == "lost" {
			return
		}
	}
	d.t.Fatalf("slot %s not invalidated: wal_status %s", slot, d.value(`SELECT wal_status FROM pg_replication_slots WHERE slot_name = '`+slot+`'`))
}

// TestSlotInvalidated: a slot the server invalidated (wal_status = lost)
// is a permanent error that names the slot and says what to do, for a
// running source and for one that starts on it.
func TestSlotInvalidated(t *testing.T) {
	db := invalidatedServer(t)
	db.exec(`CREATE TABLE inv (id int PRIMARY KEY)`)
	opt := db.cdcOptions("inv")
	opt.CDCReader = readerPeek // holds the slot only while it peeks
	opt.SlotCheckInterval = 50 * time.Millisecond
	s := open(t, opt, nil)
	db.exec(`INSERT INTO inv VALUES (1)`)
	next(t, s)
	ack(t, s)

	db.invalidate(opt.ReplicationSlot)
	check := func(err error) {
		t.Helper()
		if err == nil {
			t.Fatal("no error for an invalidated slot")
		}
		if !sdk.IsPermanent(err) {
			t.Errorf("not permanent: %v", err)
		}
		for _, want := range []string{opt.ReplicationSlot, "wal_status = lost", "drop-slot", "pg_drop_replication_slot", "snapshot = \"initial\""} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not contain %q", err, want)
			}
		}
	}
	sdktest.Eventually(t, 20*time.Second, func() error {
		if s.Health() == nil {
			return errors.New("Health nil")
		}
		return nil
	})
	_, err := s.Poll(context.Background())
	check(err)
	_, again := s.Poll(context.Background())
	if again == nil || again.Error() != err.Error() {
		t.Errorf("the second Poll returned %v, want the same permanent error", again)
	}

	// A source that starts on the lost slot says so at its first Poll.
	s.Close(context.Background())
	s2 := open(t, opt, nil)
	_, err = s2.Poll(context.Background())
	check(err)
}

// TestAdminSlots runs the real binary: admin KEY slots lists this source's
// slot and a leftover picomq_ slot of a deleted source, with active,
// wal_status, retained WAL and confirmed_flush_lsn; drop-slot refuses the
// slot while a reader holds it and drops it once it is free.
func TestAdminSlots(t *testing.T) {
	db := newDB(t)
	bin := runtimebin.Build(t)
	mine, gone := "picomq_adm_"+db.tag, "picomq_gone_"+db.tag
	db.exec(`SELECT pg_create_logical_replication_slot('` + mine + `', 'pgoutput')`)
	db.exec(`SELECT pg_create_logical_replication_slot('` + gone + `', 'pgoutput')`)

	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte("[http]\naddress = \"127.0.0.1:0\"\n[state]\npath = \"state\"\n"), 0o644)
	// Disabled: the command works on the definition, running or not.
	os.WriteFile(filepath.Join(dir, "connectors", "adm.toml"), []byte(fmt.Sprintf(`type = "source"
key = "adm_%s"
enabled = false
path = "libpicomq_connector_postgres_source"
[[topics]]
topic = "pg.adm"
[plugin_config]
connection_string = %q
mode = "cdc"
tables = ["public.t"]
`, db.tag, db.dsn)), 0o644)
	run := func(args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, append([]string{"admin", "--config", filepath.Join(dir, "runtime.toml"), "adm_" + db.tag}, args...)...)
		out, err := cmd.CombinedOutput()
		code := 0
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), code
	}

	out, code := run()
	if code != 0 || !strings.Contains(out, "slots") || !strings.Contains(out, "drop-slot [NAME]") {
		t.Fatalf("admin KEY: exit %d\n%s", code, out)
	}
	out, code = run("slots")
	if code != 0 {
		t.Fatalf("slots: exit %d\n%s", code, out)
	}
	t.Logf("admin KEY slots:\n%s", out)
	for _, want := range []string{"SLOT", "ACTIVE", "WAL_STATUS", "RETAINED_WAL", "CONFIRMED_FLUSH_LSN", mine, gone, "this source", "reserved"} {
		if !strings.Contains(out, want) {
			t.Errorf("slots output lacks %q:\n%s", want, out)
		}
	}

	// A reader holds the slot: drop-slot refuses it.
	ctx := context.Background()
	cfg, _ := pgconn.ParseConfig(db.dsn)
	cfg.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := pglogrepl.StartReplication(ctx, repl, mine, 0, pglogrepl.StartReplicationOptions{Mode: pglogrepl.LogicalReplication,
		PluginArgs: []string{"proto_version '1'", "publication_names 'none'"}}); err != nil {
		t.Fatal(err)
	}
	sdktest.Eventually(t, 10*time.Second, func() error {
		if out, _ := run("slots"); !strings.Contains(out, "yes (pid") {
			return fmt.Errorf("slot not shown active:\n%s", out)
		}
		return nil
	})
	out, code = run("drop-slot")
	if code != 1 || !strings.Contains(out, "in use by process") || !strings.Contains(out, mine) {
		t.Errorf("drop-slot of an active slot: exit %d\n%s", code, out)
	}
	repl.Close(ctx)

	out, code = run("drop-slot", "picomq_nosuch")
	if code != 1 || !strings.Contains(out, "no replication slot \"picomq_nosuch\"") {
		t.Errorf("drop-slot of a missing slot: exit %d\n%s", code, out)
	}
	out, code = run("drop-slot", gone)
	if code != 0 || !strings.Contains(out, "dropped replication slot \""+gone+"\"") {
		t.Errorf("drop-slot NAME: exit %d\n%s", code, out)
	}
	sdktest.Eventually(t, 10*time.Second, func() error {
		out, code := run("drop-slot")
		if code != 0 {
			return fmt.Errorf("drop-slot: exit %d\n%s", code, out)
		}
		if !strings.Contains(out, "delete the checkpoint") {
			t.Errorf("drop-slot of the source's own slot does not say what to do next:\n%s", out)
		}
		return nil
	})
	if n := db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name IN ('` + mine + `', '` + gone + `')`); n != "0" {
		t.Errorf("%s slots left after drop-slot", n)
	}
	out, _ = run("slots")
	if strings.Contains(out, mine) && !strings.Contains(out, "has no slot") {
		t.Errorf("slots after the drop:\n%s", out)
	}
}

// alreadyOpen hands the loop a source the test opened before: Open does
// nothing.
type alreadyOpen struct{ *Source }

func (alreadyOpen) Open(context.Context, []byte) error { return nil }
