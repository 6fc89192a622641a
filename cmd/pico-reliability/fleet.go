package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
)

// fleetScenario is a quick version of TestFleet (cmd/pico-connectors):
// three runtimes in distributed mode with the broker state store, a broker
// process that outlives them, a random source, a Postgres CDC source and
// an S3 sink over 8 topics an external producer writes. It SIGKILLs the
// owner of the sources in turn (3 times with --quick, 6 in full), SIGSTOPs
// one for twice the session timeout, restarts all three one by one, and
// checks that every acked record is in exactly one object, sequences and
// rows are on their topics exactly once (read_committed), and checkpoints
// never went backwards.
func (s *suite) fleetScenario() {
	srv := s.startS3()
	pg := s.startPG("fleet")
	const session = 6 * time.Second
	const sinkKey, rndKey, cdcKey = "fl_s3", "fl_rnd", "fl_cdc"
	b := mustGet(fleet.NewBroker(s.tempDir(), s.bin))
	defer b.Kill()
	var topics []string
	for i := range 8 {
		topics = append(topics, fmt.Sprintf("fl.%d", i))
	}
	defs := map[string]string{
		"s3.toml":  fleet.S3SinkDef(sinkKey, `fl\.[0-7]`, srv, 100, "", ""),
		"rnd.toml": randomDef(rndKey, "src.rnd", 50, "20ms"),
		"cdc.toml": pgDef(cdcKey, "src.cdc", pg.dsn, "cdc", 500),
	}
	var rts []*fleet.Runtime
	for i := range 3 {
		rts = append(rts, s.runtime(fleet.Options{Bootstrap: b.Addr, ID: fmt.Sprintf("rt-%d", i), Top: `mode = "distributed"`,
			Extra: fmt.Sprintf("[fleet]\nsession_timeout = %q\n[state]\nstorage = \"broker\"\n", session.String()), Defs: defs}))
	}
	defer func() {
		for _, r := range rts {
			r.Kill()
		}
	}()
	prod := mustGet(fleet.NewProducer(b.Addr, topics, 10, 20*time.Millisecond))
	defer prod.Halt()
	w := startWriter(pg.dsn, 20, 10*time.Millisecond)
	s.inject("3 runtimes (distributed, state.storage = \"broker\", session_timeout %s) with a random source, a Postgres CDC source and an S3 sink over 8 topics; a producer writes ~500 records/s to each topic, a writer inserts rows", session)
	for _, r := range rts {
		must(r.Run())
	}
	all := []*fleet.Runtime(rts)
	mustGet(fleet.AwaitOwner(all, rndKey, 60*time.Second))
	mustGet(fleet.AwaitOwner(all, cdcKey, 60*time.Second))

	var takeovers []time.Duration
	kills := s.pick(6, 3)
	for i := range kills {
		key := []string{rndKey, cdcKey}[i%2]
		victim := mustGet(fleet.AwaitOwner(all, key, 60*time.Second))
		var owned []string
		for _, k := range []string{rndKey, cdcKey} {
			if fleet.Owner(all, k) == victim {
				owned = append(owned, k)
			}
		}
		t0 := time.Now()
		victim.Kill()
		for _, k := range owned {
			next := mustGet(fleet.AwaitOwner(all, k, session+60*time.Second, victim))
			d := time.Since(t0)
			takeovers = append(takeovers, d)
			s.note("SIGKILL %d/%d of %s: %s taken over by %s in %s", i+1, kills, victim.ID, k, next.ID, d.Round(10*time.Millisecond))
		}
		must(victim.Run())
	}
	slices.Sort(takeovers)
	s.check(len(takeovers) > 0 && takeovers[len(takeovers)-1] < session+30*time.Second,
		"takeover after SIGKILL: median %s, worst %s over %d takeovers (session_timeout %s; bound session + 30 s)",
		takeovers[len(takeovers)/2].Round(10*time.Millisecond), takeovers[len(takeovers)-1].Round(10*time.Millisecond), len(takeovers), session)

	stale := mustGet(fleet.AwaitOwner(all, rndKey, 60*time.Second))
	t0 := time.Now()
	stale.Pause()
	s.inject("SIGSTOP %s (owner of %s) for %s", stale.ID, rndKey, 2*session)
	next := mustGet(fleet.AwaitOwner(all, rndKey, session+60*time.Second, stale))
	s.note("%s taken over by %s in %s", rndKey, next.ID, time.Since(t0).Round(10*time.Millisecond))
	time.Sleep(time.Until(t0.Add(2 * session)))
	stale.Resume()
	s.inject("SIGCONT %s", stale.ID)
	var en fleet.Entry
	deadline := time.Now().Add(session + 30*time.Second)
	for {
		en, _ = stale.Entry("source", rndKey)
		if (en.Status == "Standby" && en.Placement.Owner != stale.ID) || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	s.check(en.Status == "Standby" && en.Placement.Owner != stale.ID, "the woken owner stands by: %s, owner %q (%d log lines about fencing)",
		en.Status, en.Placement.Owner, strings.Count(strings.ToLower(stale.Output()), "fenc"))

	s.inject("rolling restart: SIGTERM and start each runtime in turn")
	for _, r := range rts {
		s.check(r.Term(60*time.Second) == nil, "%s: clean exit on SIGTERM", r.ID)
		must(r.Run())
	}
	mustGet(fleet.AwaitOwner(all, rndKey, session+60*time.Second))
	mustGet(fleet.AwaitOwner(all, cdcKey, session+60*time.Second))

	acked := prod.Halt()
	rows := w.Halt()
	s.inject("producer and writer stopped: %d rows", rows)
	group := "pico-connectors-" + sinkKey
	want := map[string]int64{}
	for t, n := range acked {
		want[t] = max(0, n-100)
	}
	if err := fleet.AwaitCommitted(b.Addr, group, want, 120*time.Second); err != nil {
		// What each sink shows, and its last warnings, to tell a stall.
		for _, r := range rts {
			en, eerr := r.Entry("sink", sinkKey)
			s.note("%s sink: %s, partitions %v, generation %d, consumed %d, committed %d, last error %q (%v)", r.ID, en.Status,
				en.Placement.Partitions, en.Placement.Generation, en.Counters.Consumed, en.Counters.Committed, en.LastError, eerr)
			for _, l := range warnings(r.Output(), 15) {
				s.note("  %s", l)
			}
		}
		mustf("%v", err)
	}
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		seen := mustGet(fleet.CountValues(b.Addr, "src.cdc", "id"))
		if missing, _ := fleet.Exactly(seen, 1, rows+1); missing == 0 || time.Now().After(deadline) {
			break
		}
	}
	for _, r := range rts {
		s.check(r.Term(60*time.Second) == nil, "%s: clean exit on SIGTERM", r.ID)
	}
	a := mustGet(fleet.AuditBucket(srv, sinkKey, acked))
	s.check(a.OK(), "S3 exactly_once over 8 topics: %s", a)

	cps, err := fleet.ReadCheckpoints(b.Addr, rndKey, fleet.RandomPos)
	s.check(err == nil, "%s: %d checkpoints, never backwards (%v)", rndKey, len(cps), err)
	if len(cps) > 0 {
		nextSeq, _ := fleet.RandomPos(cps[len(cps)-1])
		missing, twice := fleet.Exactly(mustGet(fleet.CountValues(b.Addr, "src.rnd", "seq")), 0, int64(nextSeq))
		s.check(missing == 0 && twice == 0, "src.rnd read_committed: sequences 0..%d, %d missing, %d more than once (a stale owner's records would repeat)", nextSeq-1, missing, twice)
	}
	cps, err = fleet.ReadCheckpoints(b.Addr, cdcKey, fleet.CDCPos)
	s.check(err == nil, "%s: %d checkpoints, never backwards (%v)", cdcKey, len(cps), err)
	missing, twice := fleet.Exactly(mustGet(fleet.CountValues(b.Addr, "src.cdc", "id")), 1, rows+1)
	s.check(missing == 0 && twice == 0, "src.cdc read_committed: rows 1..%d, %d missing, %d more than once", rows, missing, twice)
}

// warnings returns the last n lines of a runtime's JSON log at level WARN
// or ERROR.
func warnings(out string, n int) []string {
	var w []string
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, `"level":"WARN"`) || strings.Contains(l, `"level":"ERROR"`) {
			w = append(w, l)
		}
	}
	return w[max(0, len(w)-n):]
}
