package randomsource

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	"github.com/picomq/pico-connectors/runtime/state"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

func logger() *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// seqSink collects the seq of every record it is handed.
type seqSink struct {
	mu   sync.Mutex
	seqs []int64
	err  error
}

func (s *seqSink) Open(context.Context) error  { return nil }
func (s *seqSink) Close(context.Context) error { return nil }
func (s *seqSink) Consume(_ context.Context, batch []sdk.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		var p struct{ Seq int64 }
		if err := json.Unmarshal(r.Payload, &p); err != nil && s.err == nil {
			s.err = err
		}
		s.seqs = append(s.seqs, p.Seq)
	}
	return nil
}

func (s *seqSink) count() int { s.mu.Lock(); defer s.mu.Unlock(); return len(s.seqs) }

type runner struct {
	cancel context.CancelFunc
	done   chan error
}

func goRun(t *testing.T, f func(ctx context.Context) error) *runner {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runner{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- f(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *runner) stop(t *testing.T) error {
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("loop did not stop")
		return nil
	}
}

func startBroker(t testing.TB) *broker.Broker {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func sourceTopics() []definition.Topics {
	return []definition.Topics{{Topic: definition.Route{Literal: "random"}, Schema: "json", CreateTopics: true, BatchLength: 1000, LingerTime: "2ms"}}
}

// TestEndToEnd runs random source -> source loop -> embedded broker ->
// sink loop -> a sink, with a restart of the source in the middle, and
// checks every sequence number arrives once, in order.
func TestEndToEnd(t *testing.T) {
	b := startBroker(t)
	store, err := state.NewFileStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	sink := &seqSink{}
	goRun(t, func(ctx context.Context) error {
		return sinkloop.Run(ctx, sinkloop.Config{Key: "e2e_sink", Topics: []definition.Topics{{Pattern: `rand.*`, Schema: "json", BatchLength: 500, PollInterval: "20ms"}},
			Sink: sink, BootstrapServers: b.Addr(), Logger: logger()})
	})
	runSource := func(limit int64) (*runner, *status.Tracker) {
		blob, err := store.Load(context.Background(), "random")
		if err != nil {
			t.Fatal(err)
		}
		opt := testConfig()
		opt.RecordsPerBatch, opt.MaxRecords = 250, confkit.Ptr(int(limit))
		src := newSource(opt)
		tr := status.New("source", "random", nil)
		return goRun(t, func(ctx context.Context) error {
			return sourceloop.Run(ctx, sourceloop.Config{Key: "random", Topics: sourceTopics(), Source: src, State: blob, Store: store,
				BootstrapServers: b.Addr(), Logger: logger(), Tracker: tr})
		}), tr
	}
	stored := func() int64 {
		blob, _ := store.Load(context.Background(), "random")
		st, _ := ParseState(blob)
		return st.NextSeq
	}
	r1, _ := runSource(3000)
	sdktest.WaitFor(t, 90*time.Second, "state 3000", func() bool { return stored() == 3000 })
	if err := r1.stop(t); err != nil {
		t.Fatal(err)
	}
	r2, tr := runSource(6000)
	sdktest.WaitFor(t, 90*time.Second, "state 6000", func() bool { return stored() == 6000 })
	sdktest.WaitFor(t, 90*time.Second, "6000 records at the sink", func() bool { return sink.count() >= 6000 })
	if err := r2.stop(t); err != nil {
		t.Fatal(err)
	}
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if sink.err != nil {
		t.Fatal(sink.err)
	}
	if len(sink.seqs) != 6000 {
		t.Fatalf("sink got %d records, want 6000", len(sink.seqs))
	}
	for i, s := range sink.seqs {
		if s != int64(i) {
			t.Fatalf("record %d has seq %d", i, s)
		}
	}
	if snap := tr.Snapshot(); snap.Counters.Produced != 3000 || snap.Status != status.Stopped {
		t.Fatalf("second run: %+v", snap)
	}
}

// TestHTTPStateStoreFailsThenRecovers uses the runtime's HTTP store against
// an endpoint that answers 500 for a while.
func TestHTTPStateStoreFailsThenRecovers(t *testing.T) {
	b := startBroker(t)
	var failing atomic.Bool
	failing.Store(true)
	var mu sync.Mutex
	var saved []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if failing.Load() {
			http.Error(w, "down", http.StatusInternalServerError)
			return
		}
		switch r.Method {
		case http.MethodPut:
			body, _ := io.ReadAll(r.Body)
			mu.Lock()
			saved = append(saved, string(body))
			mu.Unlock()
			w.WriteHeader(http.StatusNoContent)
		case http.MethodGet:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	store, err := state.NewHTTPStore(state.HTTPConfig{URL: srv.URL, MaxAttempts: 2, RetryDelay: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	opt := testConfig()
	opt.RecordsPerBatch, opt.MaxRecords = 100, confkit.Ptr(500)
	src := mustSource(t, opt, nil)
	tr := status.New("source", "random", nil)
	r := goRun(t, func(ctx context.Context) error {
		return sourceloop.Run(ctx, sourceloop.Config{Key: "random", Topics: sourceTopics(), Source: src, Store: store,
			BootstrapServers: b.Addr(), Logger: logger(), Tracker: tr, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond})
	})
	sdktest.WaitFor(t, 90*time.Second, "status Error", func() bool { return tr.Status() == status.Error })
	if src.Committed() != 0 {
		t.Fatal("the source committed while the store failed")
	}
	snap := tr.Snapshot()
	if !strings.Contains(snap.LastError, "state save failed") || snap.Counters.Acked != 0 || snap.Counters.StateFails == 0 {
		t.Fatalf("while failing: %+v", snap)
	}
	failing.Store(false)
	sdktest.WaitFor(t, 90*time.Second, "all 500 acknowledged", func() bool { return src.Committed() == 500 })
	if tr.Status() != status.Running {
		t.Fatalf("status %s after recovery", tr.Status())
	}
	r.stop(t)
	mu.Lock()
	last := saved[len(saved)-1]
	mu.Unlock()
	if last != `{"next_seq":500}` {
		t.Fatalf("last saved state %s", last)
	}
	// The first batch reached the topic once per failed save plus once.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, "random")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int64]bool{}
	for _, rec := range recs {
		var p struct{ Seq int64 }
		json.Unmarshal(rec.Value, &p)
		seen[p.Seq] = true
	}
	if len(seen) != 500 || len(recs) <= 500 {
		t.Fatalf("%d records, %d distinct; want every seq, with the unsaved batch duplicated", len(recs), len(seen))
	}
}
