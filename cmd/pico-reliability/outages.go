package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/freeport"
)

// watch polls a connector's entry every 100 ms until stop and collects
// the statuses seen and the last entry.
type watch struct {
	mu       sync.Mutex
	statuses []string
	last     fleet.Entry
	stop     chan struct{}
	done     chan struct{}
}

// watchEntry starts a watch of r's entry for connector key.
func watchEntry(r *fleet.Runtime, kind, key string) *watch {
	w := &watch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			if e, err := r.Entry(kind, key); err == nil {
				w.mu.Lock()
				if n := len(w.statuses); n == 0 || w.statuses[n-1] != e.Status {
					w.statuses = append(w.statuses, e.Status)
				}
				w.last = e
				w.mu.Unlock()
			}
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return w
}

func (w *watch) end() ([]string, fleet.Entry) {
	close(w.stop)
	<-w.done
	return w.statuses, w.last
}

// brokerOutage takes an external broker process away from a runtime
// running the random source, brings it back on the same address and
// data, and checks the source recovers without losing acknowledged
// records.
func (s *suite) brokerOutage() {
	addr, data := mustGet(freeport.Addr()), s.tempDir()
	bp := s.startBroker(addr, data)
	const topic, key, perBatch = "outage.numbers", "numbers", 100
	// A short delivery timeout, so the outage fails batches (Nack, back
	// off, poll again) instead of librdkafka holding them until it ends.
	def := strings.Replace(randomDef(key, topic, perBatch, "5ms"), "create_topics = true\n",
		"create_topics = true\nproperties = { \"message.timeout.ms\" = \"1500\" }\n", 1)
	r := s.newRT(addr, "", map[string]string{"numbers.toml": def})
	statePath := filepath.Join(r.Dir, "state", key+".state")
	must(r.Run())
	s.waitEnd(r, addr, topic, 2000, 30*time.Second)
	before, _ := r.Entry("source", key)
	outage := time.Duration(s.pick(8, 5)) * time.Second
	s.inject("SIGKILL the broker process (%s) for %s", addr, outage)
	bp.kill()
	w := watchEntry(r, "source", key)
	time.Sleep(outage)
	// A batch sent just before the kill can take longer than the outage
	// to time out (a CI flake: "nacked (0)"): the broker stays away until
	// the first Nack, 15 s longer at most.
	for end := time.Now().Add(15 * time.Second); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		if e, err := r.Entry("source", key); err == nil && e.Counters.Nacked > before.Counters.Nacked {
			break
		}
	}
	seen, during := w.end()
	cp := readSeq(statePath)
	s.note("during the outage: statuses %v, produced %d -> %d, batches nacked %d, checkpoint next_seq=%d, last_error %.70q",
		seen, before.Counters.Produced, during.Counters.Produced, during.Counters.Nacked, cp, during.LastError)
	s.check(during.Counters.Produced-before.Counters.Produced <= int64(perBatch)*2,
		"no batch acknowledged while the broker is down (produced +%d)", during.Counters.Produced-before.Counters.Produced)
	s.check(during.Counters.Nacked > before.Counters.Nacked && during.Counters.Nacked < 30 && !slices.Contains(seen, "Error") && during.LastError != "",
		"failed deliveries nacked (%d) with back-off, status stays Running below 30 consecutive Nacks, last_error set", during.Counters.Nacked)
	s.inject("broker back on %s with the same data", addr)
	bp = s.startBroker(addr, data)
	e, ok := r.WaitEntry("source", key, 60*time.Second, func(e fleet.Entry) bool {
		return e.Status == "Running" && e.Counters.Produced > during.Counters.Produced+1000
	})
	s.check(ok, "recovered without operator action: status %s, produced %d (+%d since the broker returned)", e.Status, e.Counters.Produced, e.Counters.Produced-during.Counters.Produced)
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	final := readSeq(statePath)
	s.seqCheck(bp.addr, topic, final, nil, perBatch)
	bp.kill()
}

// pgRestart restarts PostgreSQL under a runtime running CDC while a writer
// inserts rows.
func (s *suite) pgRestart() {
	pg := s.startPG("restart")
	b := startBroker()
	defer b.Close()
	const topic, key, batch, txnRows = "pg.restart", "pg", 500, 25
	r := s.newRT(b.Addr(), "", map[string]string{"pg.toml": pgDef(key, topic, pg.dsn, "cdc", batch)})
	wr := startWriter(pg.dsn, txnRows, 3*time.Millisecond)
	must(r.Run())
	s.waitEnd(r, b.Addr(), topic, 1000, 30*time.Second)
	s.inject("PostgreSQL stopped (pg_ctl stop -m fast) for 3 s under the running CDC source and writer")
	w := watchEntry(r, "source", key)
	must(pg.srv.Stop())
	time.Sleep(3 * time.Second)
	must(pg.srv.Start())
	s.inject("PostgreSQL started again on the same port")
	time.Sleep(2 * time.Second)
	n := wr.Halt()
	s.waitEnd(r, b.Addr(), topic, n, 60*time.Second)
	e, ok := r.WaitEntry("source", key, 30*time.Second, func(e fleet.Entry) bool { return e.Status == "Running" && e.Counters.Produced >= n })
	seen, _ := w.end()
	s.note("statuses seen: %v; writer reconnects %d; last_error %.80q", seen, wr.Errors(), e.LastError)
	s.check(ok && e.LastError != "" && !slices.Contains(seen, "Error"),
		"poll errors logged and retried (status never Error, as the spec's table says); recovered without operator action: status %s, the outage recorded as last_error", e.Status)
	s.idCheck(b.Addr(), topic, n, 2, batch+txnRows)
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
}

// stateServer is an HTTP state store that can be told to fail.
type stateServer struct {
	mu     sync.Mutex
	blobs  map[string][]byte
	fail   atomic.Bool
	puts   atomic.Int64
	errors atomic.Int64
	addr   string
}

func (s *suite) startStateServer() *stateServer {
	st := &stateServer{blobs: map[string][]byte{}}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	st.addr = l.Addr().String()
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, q *http.Request) {
		if st.fail.Load() {
			st.errors.Add(1)
			http.Error(w, "store down", http.StatusInternalServerError)
			return
		}
		key := q.URL.Path
		st.mu.Lock()
		defer st.mu.Unlock()
		switch q.Method {
		case http.MethodGet:
			b, ok := st.blobs[key]
			if !ok {
				http.NotFound(w, q)
				return
			}
			w.Write(b)
		case http.MethodPut:
			b, err := io.ReadAll(q.Body)
			if err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			st.blobs[key] = b
			st.puts.Add(1)
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "method", http.StatusMethodNotAllowed)
		}
	})}
	go srv.Serve(l)
	s.cleanups.Add(func() { srv.Close() })
	return st
}

func (st *stateServer) nextSeq(key string) int64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	var v struct {
		NextSeq int64 `json:"next_seq"`
	}
	json.Unmarshal(st.blobs["/"+key], &v)
	return v.NextSeq
}

// httpState runs the random source with the http state store and takes
// the store away (500s), then makes it flap.
func (s *suite) httpState() {
	st := s.startStateServer()
	b := startBroker()
	defer b.Close()
	const topic, key, perBatch = "state.numbers", "numbers", 100
	extra := fmt.Sprintf("[state]\nstorage = \"http\"\n[state.http]\nurl = \"http://%s\"\nmax_attempts = 2\nretry_delay = \"20ms\"\ntimeout = \"1s\"\n", st.addr)
	r := s.newRT(b.Addr(), extra, map[string]string{"numbers.toml": randomDef(key, topic, perBatch, "5ms")})
	must(r.Run())
	s.waitEnd(r, b.Addr(), topic, 1000, 30*time.Second)

	s.inject("state store answers 500 to everything for 3 s")
	st.fail.Store(true)
	e, ok := r.WaitEntry("source", key, 3*time.Second, func(e fleet.Entry) bool { return e.Status == "Error" })
	cpDuring := st.nextSeq(key)
	s.check(ok && e.Counters.StateFails > 0, "status Error after a failed state save (spec: Nack and Error); %d failed saves, last_error %.70q", e.Counters.StateFails, e.LastError)
	time.Sleep(3 * time.Second)
	s.check(st.nextSeq(key) == cpDuring, "no checkpoint moved during the outage (next_seq=%d)", cpDuring)
	st.fail.Store(false)
	s.inject("state store back")
	e, ok = r.WaitEntry("source", key, 20*time.Second, func(e fleet.Entry) bool { return e.Status == "Running" && st.nextSeq(key) > cpDuring })
	s.check(ok, "status back to Running by the next good batch, checkpoint moving again (%s, next_seq=%d)", e.Status, st.nextSeq(key))

	s.inject("state store flapping: down/up every 150 ms for 3 s")
	stop := time.Now().Add(3 * time.Second)
	for time.Now().Before(stop) {
		st.fail.Store(!st.fail.Load())
		time.Sleep(150 * time.Millisecond)
	}
	st.fail.Store(false)
	cpFlap := st.nextSeq(key)
	e, ok = r.WaitEntry("source", key, 20*time.Second, func(e fleet.Entry) bool { return e.Status == "Running" && st.nextSeq(key) > cpFlap })
	s.check(ok, "after flapping: status %s, %d failed saves in all, %d 500s served, checkpoint moving (next_seq=%d)", e.Status, e.Counters.StateFails, st.errors.Load(), st.nextSeq(key))
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	s.seqCheck(b.Addr(), topic, st.nextSeq(key), nil, perBatch)
}
