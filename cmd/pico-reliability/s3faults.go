package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	s3sink "github.com/picomq/pico-connectors/connectors/s3_sink"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// s3Faults runs s3FaultsMode for delivery = "exactly_once" and "buffered".
func (s *suite) s3Faults() { s.eachDelivery(s.s3FaultsMode) }

// s3FaultsMode runs the S3 sink through a fault-injecting proxy in front of
// versitygw and injects 5xx bursts, 429, connection resets, latency, a
// failure on every attempt and a 403. exactly_once keeps every failed file
// and retries it until it lands (no .lost marker, status Error while a 403
// persists); buffered drops it into a .lost marker, as the spec says.
func (s *suite) s3FaultsMode(srv *s3test.Server, delivery string) {
	exact := delivery == "exactly_once"
	proxy, err := faultproxy.New(srv.Endpoint)
	must(err)
	s.cleanups.Add(func() { proxy.Close() })
	b := startBroker()
	defer b.Close()
	key := map[bool]string{true: "s3f_exact", false: "s3f_buffered"}[exact]
	topic := key + ".orders"
	const perFile, attempts = 200, 4
	r := s.newRT(b.Addr(), "", map[string]string{"s3.toml": s3Def(key, topic, proxy.URL, srv, perFile,
		fmt.Sprintf("delivery = %q\nmax_attempts = %d\nretry_delay = \"100ms\"\n", delivery, attempts))})
	s.inject("delivery = %q, %d attempts per upload", delivery, attempts)
	must(r.Run())
	if e, ok := r.WaitEntry("sink", key, 20*time.Second, func(e fleet.Entry) bool { return e.Status == "Running" }); !ok {
		mustf("sink not Running: %+v\n%s", e, r.Tail())
	}
	isPut := func(q *http.Request) bool {
		return q.Method == http.MethodPut && strings.Contains(q.URL.Path, "/"+key+"/") && !strings.HasSuffix(q.URL.Path, ".lost")
	}
	var next int64
	feed := func(n int) {
		vals := make([][]byte, n)
		for i := range vals {
			vals[i] = []byte(fmt.Sprintf(`{"n":%d}`, next+int64(i)))
		}
		must(produce(b.Addr(), topic, vals))
		next += int64(n)
	}
	waitObjects := func(what string, lost bool, before int) bool {
		deadline := time.Now().Add(30 * time.Second)
		for time.Now().Before(deadline) {
			data, l := s3Objects(srv, key)
			if !lost && len(data) > before || lost && len(l) > before {
				return true
			}
			time.Sleep(50 * time.Millisecond)
		}
		return s.check(false, "%s: no new object after 30 s\n%s", what, r.Tail())
	}
	injectedPuts := func() (faults, ok int) {
		for _, e := range proxy.Log() {
			if e.Method == http.MethodPut && !strings.HasSuffix(e.Path, ".lost") {
				if e.Injected {
					faults++
				} else if e.Status == 200 {
					ok++
				}
			}
		}
		return
	}
	// failNext fails the next n PutObject requests with f, feeds a file's
	// records and waits for a new object (a new .lost marker when lost);
	// false when none came.
	failNext := func(name string, f faultproxy.Fault, n int, lost bool) bool {
		proxy.ResetLog()
		data, markers := s3Objects(srv, key)
		before := len(data)
		if lost {
			before = len(markers)
		}
		s.inject("%s on the next %d PutObject requests", name, n)
		proxy.InjectMatching(isPut, n, f)
		feed(perFile)
		return waitObjects(name, lost, before)
	}
	retried := func(name string, f faultproxy.Fault, n int) {
		if !failNext(name, f, n, false) {
			return
		}
		// The proxy logs a PUT's status once it has relayed the whole
		// answer, which can be after the object is listed.
		faults, ok := injectedPuts()
		for wait := time.Now().Add(5 * time.Second); ok == 0 && time.Now().Before(wait); faults, ok = injectedPuts() {
			time.Sleep(20 * time.Millisecond)
		}
		_, lost := s3Objects(srv, key)
		e, _ := r.Entry("sink", key)
		s.check(faults == n && ok >= 1 && len(lost) == 0 && e.Status == "Running",
			"%s: %d failed attempts then the object uploaded (%d PUT ok), no .lost marker, status %s", name, faults, ok, e.Status)
	}
	retried("503 burst", faultproxy.Fault{Status: 503}, 2)
	retried("429 Too Many Requests", faultproxy.Fault{Status: 429}, 3)
	retried("connection reset", faultproxy.Fault{Reset: true}, 2)

	proxy.ResetLog()
	data, _ := s3Objects(srv, key)
	s.inject("400 ms latency on every request")
	proxy.SetLatency(400 * time.Millisecond)
	feed(perFile)
	if waitObjects("latency", false, len(data)) {
		e, _ := r.Entry("sink", key)
		s.check(e.Status == "Running", "latency: object uploaded, status %s", e.Status)
	}
	proxy.Clear()

	lostStep := func(name string, f faultproxy.Fault, n, wantAttempts int) {
		before, _ := r.Entry("sink", key)
		if !failNext(name, f, n, true) {
			return
		}
		faults, _ := injectedPuts()
		_, lost := s3Objects(srv, key)
		var m s3sink.LostMarker
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		body, err := srv.Get(ctx, lost[len(lost)-1])
		cancel()
		must(err)
		must(json.Unmarshal(body, &m))
		s.check(faults == wantAttempts && m.RecordCount == int(m.LastOffset-m.FirstOffset+1) && m.RecordCount > 0 && strings.Contains(m.Error, fmt.Sprint(f.Status)),
			"%s: %d attempt(s), then marker %s (offsets %d-%d, %d records, error %.80q)", name, faults, lost[len(lost)-1], m.FirstOffset, m.LastOffset, m.RecordCount, m.Error)
		// The marker is written before Consume returns the loss: wait for
		// the redelivery, not only for a Running status, which it still
		// shows before that (a CI flake: "0 redeliveries").
		e, ok := r.WaitEntry("sink", key, 20*time.Second, func(e fleet.Entry) bool {
			return e.Status == "Running" && e.Counters.ConsecNacks == 0 && e.Counters.Redelivered > before.Counters.Redelivered
		})
		s.check(ok && e.LastError != "" && e.Counters.Redelivered > before.Counters.Redelivered, "%s: batch redelivered (%d redeliveries), last_error kept (%.60q), status back to %s without operator action",
			name, e.Counters.Redelivered, e.LastError, e.Status)
	}
	if exact {
		s.s3FaultsExact(r, proxy, srv, b, key, topic, isPut, feed, &next)
		return
	}
	lostStep("500 on every attempt", faultproxy.Fault{Status: 500}, attempts, attempts)
	lostStep("403 Forbidden (not retried)", faultproxy.Fault{Status: 403}, 1, 1)

	// A store that keeps failing: each file that rotates is dropped with
	// its .lost marker, the batch is redelivered into a new file, and the
	// sink carries on; it never blocks the partition.
	proxy.ResetLog()
	_, lostBefore := s3Objects(srv, key)
	s.inject("503 on every PutObject for three rotations")
	proxy.InjectMatching(isPut, -1, faultproxy.Fault{Status: 503})
	w := watchEntry(r, "sink", key)
	for i := 0; i < 3; i++ {
		feed(perFile)
		time.Sleep(1500 * time.Millisecond)
	}
	statuses, during := w.end()
	_, lostAfter := s3Objects(srv, key)
	s.check(len(lostAfter)-len(lostBefore) >= 2 && during.LastError != "",
		"sustained outage: %d more .lost markers, statuses seen %v, last_error %.60q", len(lostAfter)-len(lostBefore), statuses, during.LastError)
	proxy.Clear()
	s.inject("faults cleared")
	e, ok := r.WaitEntry("sink", key, 60*time.Second, func(e fleet.Entry) bool { return e.Status == "Running" && e.Counters.ConsecNacks == 0 })
	s.check(ok, "status %s without operator action once uploads succeed", e.Status)

	s.inject("no faults; %d more records, then SIGTERM (flush)", perFile)
	feed(perFile)
	s.waitCommitted(r, b.Addr(), "pico-connectors-"+key, topic, next, 30*time.Second)
	err = r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)

	keys, lostKeys := s3Objects(srv, key)
	seen := offsetsIn(srv, keys)
	type rng struct{ a, b int64 }
	var lostRanges []rng
	for _, k := range lostKeys {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		body, err := srv.Get(ctx, k)
		cancel()
		must(err)
		var m s3sink.LostMarker
		must(json.Unmarshal(body, &m))
		lostRanges = append(lostRanges, rng{m.FirstOffset, m.LastOffset})
	}
	hw := b.HighWatermark(topic)
	var present, inMarker, unaccounted int
	for o := int64(0); o < hw; o++ {
		if seen[o] > 0 {
			present++
			continue
		}
		found := false
		for _, lr := range lostRanges {
			if o >= lr.a && o <= lr.b {
				found = true
			}
		}
		if found {
			inMarker++
		} else {
			unaccounted++
		}
	}
	s.check(unaccounted == 0, "%d records: %d uploaded, %d named by .lost markers (earlier batches of a dropped file, as the spec says), %d unaccounted",
		hw, present, inMarker, unaccounted)
}

// s3FaultsExact is the exactly_once half of s3FaultsMode after the retried
// faults: every attempt failing, then a 403 that persists until the status
// says Error; each file is kept and lands once the store answers again, and
// in the end every offset is in exactly one object.
func (s *suite) s3FaultsExact(r *fleet.Runtime, proxy *faultproxy.Proxy, srv *s3test.Server, b *broker.Broker, key, topic string,
	isPut func(*http.Request) bool, feed func(int), next *int64) {
	const perFile = 200
	// kept fails every data PutObject until the status says Error. With
	// traffic, records keep arriving (one more file's worth every 500 ms);
	// without, the failing file is all there is and the status must show it
	// all the same.
	kept := func(name string, f faultproxy.Fault, traffic bool) {
		proxy.ResetLog()
		data, _ := s3Objects(srv, key)
		s.inject("%s on every PutObject until the status says Error (records keep arriving: %v)", name, traffic)
		proxy.InjectMatching(isPut, -1, f)
		feed(perFile)
		deadline := time.Now().Add(30 * time.Second)
		var e fleet.Entry
		for time.Now().Before(deadline) {
			if e, _ = r.Entry("sink", key); e.Status == "Error" {
				break
			}
			time.Sleep(500 * time.Millisecond)
			if traffic {
				feed(perFile)
			}
		}
		s.check(e.Status == "Error" && strings.Contains(e.LastError, fmt.Sprint(f.Status)), "%s: status %s with last_error %.100q", name, e.Status, e.LastError)
		after, lost := s3Objects(srv, key)
		s.check(len(after) == len(data) && len(lost) == 0, "%s: nothing uploaded, no .lost marker (%d markers)", name, len(lost))
		proxy.Clear()
		s.inject("faults cleared")
		var now []string
		e, ok := r.WaitEntry("sink", key, 60*time.Second, func(e fleet.Entry) bool {
			now, _ = s3Objects(srv, key)
			return e.Status == "Running" && len(now) > len(data)
		})
		s.check(ok, "%s: the kept file landed once the store answered (%d new objects), status %s without operator action",
			name, len(now)-len(data), e.Status)
	}
	kept("500", faultproxy.Fault{Status: 500}, false)
	kept("403 Forbidden", faultproxy.Fault{Status: 403}, true)

	s.inject("no faults; %d more records, then SIGTERM (flush)", perFile)
	feed(perFile)
	group := "pico-connectors-" + key
	s.waitCommitted(r, b.Addr(), group, topic, *next-perFile+1, 30*time.Second)
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	// Redelivered batches count again in records_consumed: a fresh process
	// tells when the sink has seen every record.
	c0, err := committed(b.Addr(), group, topic)
	must(err)
	must(r.Run())
	if e, ok := r.WaitEntry("sink", key, 30*time.Second, func(e fleet.Entry) bool { return e.Counters.Consumed >= *next-c0 }); !ok {
		mustf("sink consumed %d of %d records\n%s", e.Counters.Consumed, *next-c0, r.Tail())
	}
	err = r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	keys, lost := s3Objects(srv, key)
	seen := offsetsIn(srv, keys)
	hw := b.HighWatermark(topic)
	var missing, twice int
	for o := int64(0); o < hw; o++ {
		switch {
		case seen[o] == 0:
			missing++
		case seen[o] > 1:
			twice++
		}
	}
	s.check(missing == 0 && twice == 0 && len(lost) == 0, "exactly_once: %d records in %d objects, %d missing, %d in two objects, %d .lost markers",
		hw, len(keys), missing, twice, len(lost))
}
