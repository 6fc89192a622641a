package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
)

// soakPG runs the Postgres source in CDC mode (default reader) and in
// polling mode in one runtime for 3 minutes (45 s with --quick) while two
// writers insert 1 KiB rows continuously (up to 8 MB/s each), and samples the runtime's RSS
// and goroutine count. RSS after the warm-up (the first minute; the first
// third with --quick) must stay within 1.5x of the warm-up's highest
// sample, the heap live after every collection (gctrace) under
// liveLimitMB for the whole run, the goroutine count flat, both sources
// must deliver in every interval, and once the writers stop every row must
// be on its topic exactly once.
func (s *suite) soakPG() {
	srv, err := pgtest.New()
	if errors.Is(err, pgtest.ErrNoBinaries) {
		mustf("%v", err)
	}
	must(err)
	s.cleanups.Add(srv.Close)
	must(pgtest.ExecDSN(srv.DSN(), "CREATE DATABASE soak_pg"))
	dsn := srv.DSNFor("postgres", "soak_pg")
	must(pgtest.ExecDSN(dsn, `CREATE TABLE c (id bigint PRIMARY KEY, note text); CREATE TABLE p (id bigint PRIMARY KEY, note text)`))
	b := startBroker()
	defer b.Close()

	// Each writer commits 100 rows every 12 ms at most (about 8,000 rows
	// and 8 MB/s per table on an idle machine): continuous load that
	// keeps the tables within a few GB over 3 minutes.
	const batch, pad, txnRows, pause = 5000, 1000, 100, 12 * time.Millisecond
	const cdcTopic, pollTopic = "soak.cdc", "soak.poll"
	def := func(key, topic, table, extra string) string {
		return fleet.SourceDef(key, "libpicomq_connector_postgres_source", topic, fmt.Sprintf(`connection_string = %q
tables = [%q]
batch_size = %d
poll_interval = "20ms"
%s
`, dsn, table, batch, extra))
	}
	// gctrace prints the heap still live after each collection: a spike
	// bounded in time (issue 12's arena) shows there even in the warm-up,
	// where the RSS check does not look.
	r := s.newRT(b.Addr(), "", map[string]string{
		"cdc.toml":  def("soakcdc", cdcTopic, "public.c", "mode = \"cdc\"\nreplication_slot = \"soak_slot\"\npublication = \"soak_pub\""),
		"poll.toml": def("soakpoll", pollTopic, "public.p", "mode = \"polling\"\ntracking_column = \"id\""),
	}, "GODEBUG=gctrace=1")
	must(r.Run())
	// The CDC source creates its slot at start; rows are written after.
	deadline := time.Now().Add(30 * time.Second)
	for {
		e, err := r.Entry("source", "soakcdc")
		if err == nil && e.Status == "Running" && pgValue(dsn, `SELECT count(*)::text FROM pg_replication_slots WHERE slot_name = 'soak_slot'`) == "1" {
			break
		}
		if time.Now().After(deadline) {
			mustf("CDC source not running with its slot after 30 s: %s (%s)\n%s", e.Status, e.LastError, r.Tail())
		}
		time.Sleep(50 * time.Millisecond)
	}
	wc := fleet.StartPaddedPGWriter(dsn, "c", pad, txnRows, pause)
	wp := fleet.StartPaddedPGWriter(dsn, "p", pad, txnRows, pause)
	stopped := false
	defer func() {
		if !stopped {
			wc.Halt()
			wp.Halt()
		}
	}()

	dur := time.Duration(s.pick(180, 45)) * time.Second
	warm := time.Duration(s.pick(60, 15)) * time.Second
	every := time.Duration(s.pick(10, 3)) * time.Second
	s.inject("two writers inserting %d-row transactions of ~1 KiB rows every %s into c (CDC, default reader) and p (polling), batch_size %d, for %s, sampling every %s",
		txnRows, pause, batch, dur, every)
	type sample struct {
		at        time.Duration
		rss, gor  int64
		cdc, poll int64 // records produced
		wc, wp    int64 // rows committed
	}
	var samples []sample
	t0 := time.Now()
	sampleRuntime(r, t0, dur, every, func(at time.Duration, rss, g int64) {
		heap, _ := metricValue(r.API, "go_memstats_heap_inuse_bytes")
		ec, _ := r.Entry("source", "soakcdc")
		ep, _ := r.Entry("source", "soakpoll")
		if ec.Status != "Running" || ep.Status != "Running" {
			s.check(false, "statuses at %s: CDC %s (%s), polling %s (%s)", at, ec.Status, ec.LastError, ep.Status, ep.LastError)
		}
		x := sample{at, rss, g, b.HighWatermark(cdcTopic), b.HighWatermark(pollTopic), wc.Written(), wp.Written()}
		samples = append(samples, x)
		s.note("t=%-5s RSS %6.1f MiB (Go heap %6.1f MiB)  goroutines %4d  CDC %8d/%8d rows  polling %8d/%8d rows", x.at, float64(rss)/1024, heap/(1<<20), g, x.cdc, x.wc, x.poll, x.wp)
	})
	nc, np := wc.Halt(), wp.Halt()
	stopped = true
	took := time.Since(t0)
	s.inject("writers stopped: %d rows in c, %d in p (%.0f and %.0f rows/s)", nc, np, float64(nc)/took.Seconds(), float64(np)/took.Seconds())
	if len(samples) < 4 {
		mustf("only %d samples", len(samples))
	}

	var base, after sample // highest RSS during and after the warm-up
	stalls := 0
	var lagC, lagP int64 // highest rows committed but not yet on the topic
	for i, x := range samples {
		lagC, lagP = max(lagC, x.wc-x.cdc), max(lagP, x.wp-x.poll)
		if x.at <= warm {
			if x.rss > base.rss {
				base.rss = x.rss
			}
			base.gor = max(base.gor, x.gor)
			continue
		}
		after.rss, after.gor = max(after.rss, x.rss), max(after.gor, x.gor)
		if i > 0 && (x.cdc <= samples[i-1].cdc || x.poll <= samples[i-1].poll) {
			stalls++
		}
	}
	last := samples[len(samples)-1]
	s.check(after.rss <= base.rss*3/2, "RSS flat: first sample %.1f MiB, highest in the warm-up (%s) %.1f MiB, highest after %.1f MiB, last %.1f MiB (limit 1.5x: %.1f MiB)",
		float64(samples[0].rss)/1024, warm, float64(base.rss)/1024, float64(after.rss)/1024, float64(last.rss)/1024, float64(base.rss*3/2)/1024)
	s.check(after.gor <= base.gor+10, "goroutines flat: first %d, highest in the warm-up %d, highest after %d, last %d", samples[0].gor, base.gor, after.gor, last.gor)
	s.check(stalls == 0, "rows flowing: both sources produced in every %s interval after the warm-up (%d intervals without progress)", every, stalls)
	endC, endP := last.wc-last.cdc, last.wp-last.poll
	s.check(endC <= last.wc/4+batch && endP <= last.wp/4+batch,
		"sources keep up: behind the writers at the end by %d rows (CDC) and %d rows (polling), at most by %d and %d (allowed: a quarter of what was written plus one batch)",
		endC, endP, lagC, lagP)
	for _, x := range []struct {
		name, topic, key string
		n                int64
	}{{"CDC", cdcTopic, "soakcdc", nc}, {"polling", pollTopic, "soakpoll", np}} {
		end := s.waitEnd(r, b.Addr(), x.topic, x.n, 2*time.Minute)
		s.check(end == x.n, "%s: %d rows committed, %d records on %s (%.0f rows/s over the run)", x.name, x.n, end, x.topic, float64(end)/took.Seconds())
	}
	live, at, gcs := liveHeapPeak(r.Output())
	s.check(gcs > 0 && live <= liveLimitMB, "live heap bounded: highest heap live after a collection %d MB (at %.1fs of %d collections; limit %d MB; a batch of 5,000 rows of 1 KiB is about 5.5 MB)",
		live, at, gcs, liveLimitMB)
	err = r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
}

// liveLimitMB bounds the heap live after a collection in soak-pg, over
// the whole run.
const liveLimitMB = 64

var gcTraceRE = regexp.MustCompile(`(?m)^gc \d+ @([0-9.]+)s .* \d+->\d+->(\d+) MB`)

// liveHeapPeak reads GODEBUG=gctrace=1 lines and returns the highest heap
// live after a collection, when it was (seconds since the process
// started), and how many collections were seen.
func liveHeapPeak(out string) (mb int, at float64, gcs int) {
	for _, m := range gcTraceRE.FindAllStringSubmatch(out, -1) {
		gcs++
		if v, _ := strconv.Atoi(m[2]); v > mb {
			mb = v
			at, _ = strconv.ParseFloat(m[1], 64)
		}
	}
	return mb, at, gcs
}

// pgValue runs a query returning one text value, "" on any error.
func pgValue(dsn, sql string) string {
	var v string
	if pgtest.QueryRow(dsn, sql, &v) != nil {
		return ""
	}
	return v
}
