package cli

// Fleet tests (issue 15): the real binary, a broker in its own process
// (a runtime with a persistent embedded broker and no connectors), real
// versitygw. What is measured goes to the test log; the assertions are
// about records and bounds derived from the configured session timeout.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// fleetTopics are the 8 topics the S3 sink reads.
func fleetTopics() []string {
	var out []string
	for i := range 8 {
		out = append(out, fmt.Sprintf("fleet.%d", i))
	}
	return out
}

// TestSinkResumesAfterSIGKILL: a runtime restarted right after three quick
// SIGKILLs consumes again well before the session timeout of its dead
// selves (30 s here; the bound is half of it): static membership (group.instance.id = runtime.id)
// gives the restarted process its old place in the group. Without it the
// group waits for the three dead members' sessions to time out first.
func TestSinkResumesAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary, a broker process and versitygw; skipped with -short")
	}
	const session = 30 * time.Second
	srv := s3test.Start(t)
	bin := runtimebin.Build(t)
	b := fleet.StartBroker(t, bin)
	topics := fleetTopics()
	prod := fleet.StartProducer(t, b.Addr, topics, 10, 20*time.Millisecond)
	defer prod.Halt()
	def := fleet.S3SinkDef("resume", `fleet\..*`, srv, 100, fmt.Sprintf(`"session.timeout.ms" = "%d"`, session.Milliseconds()), "")
	r := fleet.New(t, bin, fleet.Options{Bootstrap: b.Addr, ID: "rt-resume", Defs: map[string]string{"s3.toml": def}})
	consumed := func(limit time.Duration) (time.Duration, bool) {
		t0 := time.Now()
		for time.Since(t0) < limit {
			if e, err := r.Entry("sink", "resume"); err == nil && e.Counters.Consumed > 0 {
				return time.Since(t0), true
			}
			if !r.Alive() {
				t.Fatalf("runtime exited:\n%s", r.Tail())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return limit, false
	}
	r.Start()
	if _, ok := consumed(60 * time.Second); !ok {
		t.Fatalf("the sink consumed nothing in 60 s:\n%s", r.Tail())
	}
	for i := range 3 {
		time.Sleep(time.Duration(300+200*i) * time.Millisecond)
		r.Kill()
		r.Start()
	}
	// The last dead self's session ends about session after the last
	// kill; a dynamic member waits for that (28.6 s measured with
	// group.instance.id = ""), a static one does not.
	d, ok := consumed(session / 2)
	if !ok {
		t.Fatalf("after three SIGKILLs the restarted runtime consumed nothing within half of session.timeout.ms (%s): it waits for its dead selves' sessions\n%s", session/2, r.Tail())
	}
	t.Logf("after three quick SIGKILLs the restarted runtime consumed again %s after its API answered (session.timeout.ms %s)", d.Round(time.Millisecond), session)
	acked := prod.Halt()
	fleet.WaitCommitted(t, b.Addr, "pico-connectors-resume", minus(acked, 100), 60*time.Second)
	if err := r.Term(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if a := fleet.AuditS3(t, srv, "resume", acked); !a.OK() {
		t.Fatalf("bucket: %s", a)
	} else {
		t.Logf("bucket: %s", a)
	}
}

// minus returns m with n taken from each value (at least 0).
func minus(m map[string]int64, n int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = max(0, v-n)
	}
	return out
}

// fleetEnv is three runtimes in distributed mode (broker state store) with
// one Postgres CDC source, one random source and one S3 sink over the 8
// fleet.* topics, an external producer writing those, and a writer
// inserting rows.
type fleetEnv struct {
	t       *testing.T
	srv     *s3test.Server
	broker  *fleet.Runtime
	rts     []*fleet.Runtime
	prod    *fleet.Producer
	pgw     *fleet.PGWriter
	session time.Duration
	// takeovers are the measured takeover times, by source key.
	takeovers map[string][]time.Duration
}

const (
	fleetSink   = "fleet_s3"
	fleetRandom = "fleet_rnd"
	fleetCDC    = "fleet_cdc"
)

func newFleetEnv(t *testing.T) *fleetEnv {
	srv := s3test.Start(t)
	pg := pgtest.Start(t)
	dsn := pg.CreateDatabase(t, "fleet")
	pgExec(t, dsn, `CREATE TABLE t (id bigint PRIMARY KEY, note text); CREATE PUBLICATION fleet_pub FOR TABLE t`)
	pgExec(t, dsn, `SELECT pg_create_logical_replication_slot('fleet_slot', 'pgoutput')`)
	bin := runtimebin.Build(t)
	e := &fleetEnv{t: t, srv: srv, broker: fleet.StartBroker(t, bin), session: 6 * time.Second, takeovers: map[string][]time.Duration{}}
	defs := map[string]string{
		"s3.toml": fleet.S3SinkDef(fleetSink, `fleet\.[0-7]`, srv, 100, "", ""),
		"rnd.toml": fmt.Sprintf(`type = "source"
key = %q
path = "libpicomq_connector_random_source"
[[topics]]
topic = "src.rnd"
schema = "json"
batch_length = 100
create_topics = true
[plugin_config]
records_per_batch = 50
interval = "20ms"
payload_size = "64B"
`, fleetRandom),
		"cdc.toml": fmt.Sprintf(`type = "source"
key = %q
path = "libpicomq_connector_postgres_source"
[[topics]]
topic = "src.cdc"
create_topics = true
[plugin_config]
connection_string = %q
mode = "cdc"
tables = ["public.t"]
batch_size = 500
poll_interval = "20ms"
replication_slot = "fleet_slot"
publication = "fleet_pub"
`, fleetCDC, dsn),
	}
	for i := range 3 {
		e.rts = append(e.rts, fleet.New(t, bin, fleet.Options{Bootstrap: e.broker.Addr, ID: fmt.Sprintf("rt-%d", i), Top: `mode = "distributed"`,
			Extra: fmt.Sprintf("[fleet]\nsession_timeout = %q\n[state]\nstorage = \"broker\"\n", e.session.String()), Defs: defs}))
	}
	e.prod = fleet.StartProducer(t, e.broker.Addr, fleetTopics(), 10, 20*time.Millisecond)
	t.Cleanup(func() { e.prod.Halt() })
	e.pgw = fleet.StartPGWriter(dsn, "t", 20, 10*time.Millisecond)
	t.Cleanup(func() { e.pgw.Halt() })
	for _, r := range e.rts {
		r.Start()
	}
	t.Cleanup(func() {
		// PICO_FLEET_LOGS=DIR keeps each runtime's log of a failed run.
		if dir := os.Getenv("PICO_FLEET_LOGS"); dir != "" && t.Failed() {
			for _, r := range e.rts {
				_ = os.WriteFile(filepath.Join(dir, r.ID+".log"), []byte(r.Output()), 0o644)
			}
		}
	})
	return e
}

func pgExec(t *testing.T, dsn, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if _, err := conn.Exec(ctx, sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func (e *fleetEnv) waitOwner(key string, limit time.Duration, skip ...*fleet.Runtime) *fleet.Runtime {
	e.t.Helper()
	return fleet.WaitOwner(e.t, e.rts, key, limit, skip...)
}

func (e *fleetEnv) owner(key string, skip ...*fleet.Runtime) *fleet.Runtime {
	return fleet.Owner(e.rts, key, skip...)
}

// killOwner SIGKILLs the owner of key, measures how long until another
// runtime runs it (for every source the killed runtime owned), then starts
// the killed runtime again.
func (e *fleetEnv) killOwner(key string) {
	e.t.Helper()
	victim := e.waitOwner(key, 60*time.Second)
	var owned []string
	for _, k := range []string{fleetRandom, fleetCDC} {
		if e.owner(k) == victim {
			owned = append(owned, k)
		}
	}
	t0 := time.Now()
	victim.Kill()
	for _, k := range owned {
		next := e.waitOwner(k, e.session+60*time.Second, victim)
		d := time.Since(t0)
		e.takeovers[k] = append(e.takeovers[k], d)
		e.t.Logf("SIGKILL %s: %s taken over by %s in %s", victim.ID, k, next.ID, d.Round(10*time.Millisecond))
	}
	victim.Start()
}

// checkpoints checks that the source's checkpoints never went backwards
// and returns the last one.
func (e *fleetEnv) checkpoints(key string, pos func([]byte) (uint64, error)) []byte {
	e.t.Helper()
	cps, err := fleet.Checkpoints(e.t, e.broker.Addr, key, pos)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Logf("source %s: %d checkpoints, never backwards; last %.120s", key, len(cps), cps[len(cps)-1])
	return cps[len(cps)-1]
}

// checkRandom: every sequence number below the last checkpoint is on the
// topic exactly once (read_committed): nothing lost, and nothing written by
// a stale owner (it would repeat numbers the new owner wrote from the same
// checkpoint).
func (e *fleetEnv) checkRandom() {
	e.t.Helper()
	next, err := fleet.RandomPos(e.checkpoints(fleetRandom, fleet.RandomPos))
	if err != nil {
		e.t.Fatal(err)
	}
	missing, twice := fleet.Exactly(fleet.CountField(e.t, e.broker.Addr, "src.rnd", "seq"), 0, int64(next))
	if missing > 0 || twice > 0 {
		e.t.Errorf("src.rnd: of sequences 0..%d, %d missing and %d written more than once", next-1, missing, twice)
	} else {
		e.t.Logf("src.rnd: sequences 0..%d each exactly once", next-1)
	}
}

// checkCDC: every row the writer committed is on the topic; a row twice
// would be a stale owner's or a replay's.
func (e *fleetEnv) checkCDC(rows int64) {
	e.t.Helper()
	e.checkpoints(fleetCDC, fleet.CDCPos)
	missing, twice := fleet.Exactly(fleet.CountField(e.t, e.broker.Addr, "src.cdc", "id"), 1, rows+1)
	if missing > 0 || twice > 0 {
		e.t.Errorf("src.cdc: of rows 1..%d, %d missing and %d delivered more than once", rows, missing, twice)
	} else {
		e.t.Logf("src.cdc: rows 1..%d each exactly once", rows)
	}
}

// TestFleet is issue 15's proof: SIGKILL the owner of each source in turn,
// 5 times; SIGSTOP an owner for twice the session timeout; a rolling
// restart of all three; then every acknowledged record is in exactly one S3
// object, every random sequence and every committed row is on its topic
// exactly once, and no checkpoint ever went backwards.
func TestFleet(t *testing.T) {
	if testing.Short() {
		t.Skip("three runtimes, a broker process, PostgreSQL and versitygw for minutes; skipped with -short")
	}
	e := newFleetEnv(t)
	group := "pico-connectors-" + fleetSink
	e.waitOwner(fleetRandom, 60*time.Second)
	e.waitOwner(fleetCDC, 60*time.Second)
	fleet.WaitCommitted(t, e.broker.Addr, group, minus(e.prod.Acked(), 0), 60*time.Second)

	t.Run("SIGKILL", func(t *testing.T) {
		for range 5 {
			for _, key := range []string{fleetRandom, fleetCDC} {
				e.killOwner(key)
			}
		}
		for key, ds := range e.takeovers {
			t.Logf("takeover of %s after SIGKILL: %s over %d kills (session_timeout %s)", key, durStats(ds), len(ds), e.session)
		}
	})

	t.Run("SIGSTOP", func(t *testing.T) {
		stale := e.waitOwner(fleetRandom, 60*time.Second)
		t0 := time.Now()
		stale.Pause()
		next := e.waitOwner(fleetRandom, e.session+60*time.Second, stale)
		t.Logf("SIGSTOP %s: %s taken over by %s in %s", stale.ID, fleetRandom, next.ID, time.Since(t0).Round(10*time.Millisecond))
		time.Sleep(time.Until(t0.Add(2 * e.session)))
		stale.Resume()
		// The woken owner must find itself fenced and stand by.
		sdktest.Eventually(t, e.session+30*time.Second, func() error {
			en, err := stale.Entry("source", fleetRandom)
			if err != nil {
				return err
			}
			if en.Status != "Standby" || en.Placement.Owner == stale.ID {
				return fmt.Errorf("%s after SIGCONT: %s, owner %q", stale.ID, en.Status, en.Placement.Owner)
			}
			return nil
		})
		if o := e.owner(fleetRandom); o == nil || o == stale {
			t.Fatalf("after SIGCONT the owner is %v, want %s", o, next.ID)
		}
		en, _ := stale.Entry("source", fleetRandom)
		t.Logf("%s after SIGCONT: %s, owner %s, last error %q; %d log lines about fencing", stale.ID, en.Status, en.Placement.Owner, en.LastError,
			strings.Count(strings.ToLower(stale.Output()), "fenc"))
		// What it may have written after waking is checked at the end
		// (read_committed: sequences exactly once, checkpoints never
		// backwards).
	})

	t.Run("RollingRestart", func(t *testing.T) {
		for _, r := range e.rts {
			if err := r.Term(60 * time.Second); err != nil {
				t.Fatal(err)
			}
			r.Start()
			sdktest.Eventually(t, 60*time.Second, func() error {
				en, err := r.Entry("sink", fleetSink)
				if err == nil && en.Status != "Running" {
					err = fmt.Errorf("sink %s", en.Status)
				}
				return err
			})
		}
		e.waitOwner(fleetRandom, e.session+60*time.Second)
		e.waitOwner(fleetCDC, e.session+60*time.Second)
	})

	acked := e.prod.Halt()
	rows := e.pgw.Halt()
	fleet.WaitCommitted(t, e.broker.Addr, group, minus(acked, 100), 120*time.Second)
	sdktest.Eventually(t, 120*time.Second, func() error {
		n := len(fleet.ReadCommitted(t, e.broker.Addr, "src.cdc"))
		if int64(n) < rows {
			return fmt.Errorf("src.cdc holds %d records of %d rows", n, rows)
		}
		return nil
	})
	for _, r := range e.rts {
		if err := r.Term(60 * time.Second); err != nil {
			t.Error(err)
		}
	}
	if a := fleet.AuditS3(t, e.srv, fleetSink, acked); !a.OK() {
		t.Errorf("S3 exactly_once over 8 topics: %s", a)
	} else {
		t.Logf("S3 exactly_once over 8 topics: %s", a)
	}
	e.checkRandom()
	e.checkCDC(rows)
}

// durStats is "median X, worst Y".
func durStats(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s, worst %s", s[len(s)/2].Round(10*time.Millisecond), s[len(s)-1].Round(10*time.Millisecond))
}
