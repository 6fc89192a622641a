package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
)

// pgEnv is a PostgreSQL server with one table t(id, note) and, for CDC, a
// slot and publication made before the first row.
type pgEnv struct {
	srv *pgtest.Server
	dsn string
}

func (s *suite) startPG(db string) *pgEnv {
	srv, err := pgtest.New()
	if errors.Is(err, pgtest.ErrNoBinaries) {
		mustf("%v", err)
	}
	must(err)
	s.cleanups.Add(srv.Close)
	must(pgtest.ExecDSN(srv.DSN(), "CREATE DATABASE "+db))
	dsn := srv.DSNFor("postgres", db)
	must(pgtest.ExecDSN(dsn, `CREATE TABLE t (id bigint PRIMARY KEY, note text, done boolean NOT NULL DEFAULT false); CREATE PUBLICATION rel_pub FOR TABLE t`))
	must(pgtest.ExecDSN(dsn, `SELECT pg_create_logical_replication_slot('rel_slot', 'pgoutput')`))
	return &pgEnv{srv: srv, dsn: dsn}
}

// startWriter writes rows of about 70 characters into table t.
func startWriter(dsn string, txnRows int, pause time.Duration) *fleet.PGWriter {
	return fleet.StartPaddedPGWriter(dsn, "t", 60, txnRows, pause)
}

// pgDef is a Postgres source definition in mode cdc or polling.
func pgDef(key, topic, dsn, mode string, batch int) string {
	extra := `replication_slot = "rel_slot"
publication = "rel_pub"`
	if mode == "polling" {
		// processed_column: each delivered row is marked on Ack; the
		// checkpoint carries the marks still owed, so a kill between
		// the checkpoint and the Ack loses none.
		extra = `tracking_column = "id"
processed_column = "done"`
	}
	return fleet.SourceDef(key, "libpicomq_connector_postgres_source", topic, fmt.Sprintf(`connection_string = %q
mode = %q
tables = ["public.t"]
batch_size = %d
poll_interval = "20ms"
%s
`, dsn, mode, batch, extra))
}

// idCheck reads the topic and checks ids 1..n are all there; duplicates
// must form at most runs contiguous runs, each at most maxRun long.
func (s *suite) idCheck(addr, topic string, n int64, runs int, maxRun int64) bool {
	var recs []broker.Record
	var counts map[int64]int
	missing := int64(0)
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		recs, err = readTopic(addr, topic)
		must(err)
		counts = map[int64]int{}
		for _, r := range recs {
			var p struct {
				ID *int64 `json:"id"`
			}
			if json.Unmarshal(r.Value, &p) != nil || p.ID == nil {
				s.check(false, "offset %d has no id: %.100q", r.Offset, r.Value)
				return false
			}
			counts[*p.ID]++
		}
		missing = 0
		for id := int64(1); id <= n; id++ {
			if counts[id] == 0 {
				missing++
			}
		}
		if missing == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	ok := s.check(missing == 0, "%d records read back; all %d committed rows present (missing %d)", len(recs), n, missing)
	var dupIDs []int64
	dups := 0
	for id, c := range counts {
		if c > 1 {
			dupIDs = append(dupIDs, id)
			dups += c - 1
		}
	}
	sort.Slice(dupIDs, func(i, j int) bool { return dupIDs[i] < dupIDs[j] })
	var lens []int64
	for i, id := range dupIDs {
		if i == 0 || id != dupIDs[i-1]+1 {
			lens = append(lens, 0)
		}
		lens[len(lens)-1]++
	}
	longest := int64(0)
	for _, l := range lens {
		longest = max(longest, l)
	}
	return s.check(len(lens) <= runs && longest <= maxRun,
		"%d duplicates in %d contiguous runs (longest %d rows); allowed: one in-flight batch per kill, at most %d runs of <= %d rows",
		dups, len(lens), longest, runs, maxRun) && ok
}

// killPostgres kills the runtime running the Postgres source (cdc or
// polling) at random points while a writer inserts rows, then drains.
func (s *suite) killPostgres(mode string) {
	pg := s.startPG("kill_" + mode)
	b := startBroker()
	defer b.Close()
	const topic, batch, txnRows = "pg.rows", 500, 25
	r := s.newRT(b.Addr(), "", map[string]string{"pg.toml": pgDef("pg", topic, pg.dsn, mode, batch)})
	w := startWriter(pg.dsn, txnRows, 2*time.Millisecond)
	s.inject("writer inserting %d-row transactions into public.t, %s mode, batch_size %d", txnRows, mode, batch)
	kills := s.pick(10, 3)
	var last int64
	for i := 0; i < kills; i++ {
		must(r.Run())
		s.killPast(r, b.Addr(), topic, last+int64(200+s.rng.IntN(2000)), 60)
		last = b.HighWatermark(topic)
		s.inject("SIGKILL %d/%d with %d records on the topic, %d rows committed", i+1, kills, last, w.Written())
	}
	n := w.Halt()
	s.inject("writer stopped after %d rows", n)
	must(r.Run())
	s.waitEnd(r, b.Addr(), topic, n, 60*time.Second)
	if e, ok := r.WaitEntry("source", "pg", 5*time.Second, func(e fleet.Entry) bool { return e.Status == "Running" }); !s.check(ok, "status Running after restart (%s)", e.Status) {
		return
	}
	s.idCheck(b.Addr(), topic, n, kills, batch+txnRows)
	if mode == "polling" {
		var unmarked int64
		deadline := time.Now().Add(10 * time.Second)
		for {
			must(pgtest.QueryRow(pg.dsn, `SELECT count(*) FROM t WHERE NOT done`, &unmarked))
			if unmarked == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(200 * time.Millisecond)
		}
		s.check(unmarked == 0, "processed_column: every delivered row is marked done after %d kills (%d of %d unmarked)", kills, unmarked, n)
	}
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
}
