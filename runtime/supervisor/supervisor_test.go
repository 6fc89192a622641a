package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

type seqConfig struct{}

func (seqConfig) Redacted() map[string]any { return map[string]any{} }

// seqSource emits {"seq": n} in batches of 20; its state is the next
// sequence number, committed on Ack.
type seqSource struct {
	committed, candidate int
}

func (s *seqSource) Poll(ctx context.Context) (sdk.Batch, error) {
	select {
	case <-ctx.Done():
		return sdk.Batch{}, ctx.Err()
	case <-time.After(2 * time.Millisecond):
	}
	var b sdk.Batch
	for i := 0; i < 20; i++ {
		b.Messages = append(b.Messages, sdk.Message{Payload: []byte(fmt.Sprintf(`{"seq":%d}`, s.committed+i))})
	}
	s.candidate = s.committed + 20
	b.State = []byte(strconv.Itoa(s.candidate))
	return b, nil
}

func (s *seqSource) OnBatchResult(_ context.Context, r sdk.Result) error {
	if r == sdk.Ack {
		s.committed = s.candidate
	}
	return nil
}

func (s *seqSource) Open(_ context.Context, state []byte) error {
	if state != nil {
		n, err := strconv.Atoi(string(state))
		if err != nil {
			return fmt.Errorf("bad state %q", state)
		}
		s.committed = n
	}
	return nil
}

func (s *seqSource) Close(context.Context) error { return nil }

func init() {
	sdk.Register(sdk.Registration{
		Name: "sup_test_source", Path: "libpicomq_connector_sup_test_source", Kind: sdk.KindSource,
		Load:      func(map[string]any, string, sdk.LookupEnv) (sdk.Config, error) { return seqConfig{}, nil },
		NewSource: func(sdk.Config, sdk.Env) (sdk.Source, error) { return &seqSource{}, nil },
	})
}

func writeConfig(t *testing.T, runtime string, defs map[string]string) *definition.Config {
	t.Helper()
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "connectors"), 0o755)
	os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtime), 0o644)
	for name, body := range defs {
		os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o644)
	}
	cfg, err := definition.Load(filepath.Join(dir, "runtime.toml"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func sourceDef(key string, enabled bool) string {
	return fmt.Sprintf("type = \"source\"\nkey = %q\nenabled = %v\npath = \"libpicomq_connector_sup_test_source\"\n[[topics]]\ntopic = \"seq_%s\"\ncreate_topics = true\n", key, enabled, key)
}

func TestSupervisorRunRestartStop(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	cfg := writeConfig(t, fmt.Sprintf("shutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\n[state]\npath = \"st\"\n", b.Addr()),
		map[string]string{"gen.toml": sourceDef("gen", true), "off.toml": sourceDef("off", false)})
	sup, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	tr, _ := sup.Tracker("source", "gen")
	sdktest.WaitFor(t, 30*time.Second, "100 records produced", func() bool { return tr.Counters.Produced.Load() >= 100 })
	if e, ok := sup.Get("source", "off"); !ok || e.Status != status.Disabled {
		t.Fatalf("disabled connector: %+v", e)
	}
	if e, _ := sup.Get("source", "gen"); e.Status != status.Running || len(e.Topics) != 1 || e.Topics[0] != "seq_gen" {
		t.Fatalf("entry = %+v", e)
	}
	if got := sup.List("source"); len(got) != 2 || got[0].Key != "gen" {
		t.Fatalf("List = %+v", got)
	}
	if view, ok := sup.Config("source", "gen"); !ok || view["key"] != "gen" {
		t.Fatalf("Config = %v", view)
	}
	if err := sup.Restart(ctx, "source", "off"); !errors.Is(err, api.ErrDisabled) {
		t.Fatalf("restart disabled: %v", err)
	}
	if err := sup.Restart(ctx, "source", "nope"); !errors.Is(err, api.ErrNotFound) {
		t.Fatalf("restart unknown: %v", err)
	}
	before := tr.Counters.Produced.Load()
	if err := sup.Restart(ctx, "source", "gen"); err != nil {
		t.Fatal(err)
	}
	sdktest.WaitFor(t, 30*time.Second, "records after restart", func() bool { return tr.Counters.Produced.Load() >= before+100 && tr.Status() == status.Running })
	if err := sup.Stop(ctx); err != nil {
		t.Fatal(err)
	}
	if st := tr.Status(); st != status.Stopped {
		t.Fatalf("status after stop = %s", st)
	}

	// Every acknowledged record is on the topic, in order, and the saved
	// state is exactly the count: the restart resumed from the checkpoint.
	recs, err := b.ReadTopic(ctx, "seq_gen")
	if err != nil {
		t.Fatal(err)
	}
	blob, err := os.ReadFile(filepath.Join(filepath.Dir(cfg.File), "st", "gen.state"))
	if err != nil {
		t.Fatal(err)
	}
	saved, _ := strconv.Atoi(string(blob))
	if saved != len(recs) || saved == 0 {
		t.Fatalf("state %d, topic has %d records", saved, len(recs))
	}
	for i, r := range recs {
		var v struct{ Seq int }
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Seq != i {
			t.Fatalf("record %d = %s", i, r.Value)
		}
	}
}

// TestSupervisorEmbeddedBrokerKeepsData: the embedded broker keeps its
// records in broker.data_dir (by default broker-data beside the runtime
// config), so a second run still has every record the first one
// checkpointed, and the source continues after them.
func TestSupervisorEmbeddedBrokerKeepsData(t *testing.T) {
	cfg := writeConfig(t, "[broker]\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"st\"\n", map[string]string{"gen.toml": sourceDef("gen", true)})
	if want := filepath.Join(filepath.Dir(cfg.File), definition.DefaultBrokerDataDir); cfg.BrokerDataDir() != want {
		t.Fatalf("data dir %q, want %q", cfg.BrokerDataDir(), want)
	}
	run := func(minProduced int64) (*Supervisor, func()) {
		sup, err := New(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sup.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if sup.BootstrapServers() == "" {
			t.Fatal("no embedded broker address")
		}
		tr, _ := sup.Tracker("source", "gen")
		sdktest.WaitFor(t, 30*time.Second, "records on the embedded broker", func() bool { return tr.Counters.Produced.Load() >= minProduced })
		return sup, func() {
			if err := sup.Stop(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
	}
	_, stop := run(40)
	stop()
	blob, err := os.ReadFile(filepath.Join(filepath.Dir(cfg.File), "st", "gen.state"))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := strconv.Atoi(string(blob))
	sup, stop := run(20)
	defer stop()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := sup.broker.ReadTopic(ctx, "seq_gen")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < first+20 {
		t.Fatalf("%d records after the restart; the first run checkpointed %d", len(recs), first)
	}
	for i, r := range recs[:first+20] {
		var v struct{ Seq int }
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Seq != i {
			t.Fatalf("record %d = %s", i, r.Value)
		}
	}
}

func TestSupervisorOpenFailureIsError(t *testing.T) {
	cfg := writeConfig(t, "[broker]\nbootstrap_servers = \"127.0.0.1:1\"\n[state]\npath = \"st\"\n", map[string]string{"gen.toml": sourceDef("gen", true)})
	// A state blob the plugin rejects makes the source's Open fail.
	os.MkdirAll(filepath.Join(filepath.Dir(cfg.File), "st"), 0o755)
	os.WriteFile(filepath.Join(filepath.Dir(cfg.File), "st", "gen.state"), []byte("garbage"), 0o644)
	sup, err := New(cfg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	isError := func() bool {
		e, _ := sup.Get("source", "gen")
		return e.Status == status.Error && strings.Contains(e.LastError, `open source: bad state "garbage"`)
	}
	sdktest.WaitFor(t, 30*time.Second, "status Error naming the bad state", isError)
	if err := sup.Restart(context.Background(), "source", "gen"); err != nil {
		t.Fatal(err)
	}
	sdktest.WaitFor(t, 30*time.Second, "status Error again after a restart", isError)
	if err := sup.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// collectSink records what it consumes; Close marks it closed, as a flush.
type collectSink struct {
	mu     *sync.Mutex
	seqs   *[]int
	closed *bool
}

func (s collectSink) Open(context.Context) error { return nil }

func (s collectSink) Consume(_ context.Context, batch []sdk.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		var v struct{ Seq int }
		if err := json.Unmarshal(r.Payload, &v); err != nil {
			return err
		}
		*s.seqs = append(*s.seqs, v.Seq)
	}
	return nil
}

func (s collectSink) Close(context.Context) error {
	s.mu.Lock()
	*s.closed = true
	s.mu.Unlock()
	return nil
}

var (
	sinkMu     sync.Mutex
	sinkSeqs   []int
	sinkClosed bool
)

func init() {
	sdk.Register(sdk.Registration{
		Name: "sup_test_sink", Path: "libpicomq_connector_sup_test_sink", Kind: sdk.KindSink,
		Load: func(map[string]any, string, sdk.LookupEnv) (sdk.Config, error) { return seqConfig{}, nil },
		NewSink: func(sdk.Config, sdk.Env) (sdk.Sink, error) {
			return collectSink{&sinkMu, &sinkSeqs, &sinkClosed}, nil
		},
	})
}

// TestSupervisorSourceToSink runs a source and a sink together: the sink
// receives every record in order, and Stop closes it.
func TestSupervisorSourceToSink(t *testing.T) {
	sinkMu.Lock()
	sinkSeqs, sinkClosed = nil, false
	sinkMu.Unlock()
	cfg := writeConfig(t, "[broker]\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"st\"\n", map[string]string{
		"gen.toml":  sourceDef("gen", true),
		"sink.toml": "type = \"sink\"\nkey = \"collect\"\npath = \"libpicomq_connector_sup_test_sink\"\n[[topics]]\npattern = 'seq_.*'\nbatch_length = 30\npoll_interval = \"20ms\"\n",
	})
	sup, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	sdktest.WaitFor(t, 30*time.Second, "200 records in the sink", func() bool {
		sinkMu.Lock()
		defer sinkMu.Unlock()
		return len(sinkSeqs) >= 200
	})
	if e, _ := sup.Get("sink", "collect"); e.Status != status.Running || e.Counters.Consumed < 200 {
		t.Fatalf("sink entry = %+v", e)
	}
	if err := sup.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	sinkMu.Lock()
	defer sinkMu.Unlock()
	if !sinkClosed {
		t.Fatal("Stop did not close the sink")
	}
	for i, seq := range sinkSeqs {
		if seq != i {
			t.Fatalf("sink record %d has seq %d", i, seq)
		}
	}
}

// failCloseSink takes every batch and fails its Close, as a sink that
// cannot upload its open files at the stop.
type failCloseSink struct{}

func (failCloseSink) Open(context.Context) error                  { return nil }
func (failCloseSink) Consume(context.Context, []sdk.Record) error { return nil }
func (failCloseSink) Close(context.Context) error {
	return errors.New("3 files (137 records) not uploaded")
}

func init() {
	sdk.Register(sdk.Registration{
		Name: "sup_test_failclose_sink", Path: "libpicomq_connector_sup_test_failclose_sink", Kind: sdk.KindSink,
		Load:    func(map[string]any, string, sdk.LookupEnv) (sdk.Config, error) { return seqConfig{}, nil },
		NewSink: func(sdk.Config, sdk.Env) (sdk.Sink, error) { return failCloseSink{}, nil },
	})
}

// TestStopReportsAFailedClose: a sink whose Close fails makes Stop fail
// (the process's exit status), naming the sink and the cause.
func TestStopReportsAFailedClose(t *testing.T) {
	sup := startSink(t, embeddedRuntime, "type = \"sink\"\nkey = \"leaky\"\npath = \"libpicomq_connector_sup_test_failclose_sink\"\n[[topics]]\npattern = 'seq_.*'\n")
	sdktest.WaitFor(t, 30*time.Second, "the sink running", func() bool {
		e, _ := sup.Get("sink", "leaky")
		return e.Status == status.Running
	})
	err := sup.Stop(context.Background())
	if err == nil || !strings.Contains(err.Error(), "sink leaky stopped with an error") || !strings.Contains(err.Error(), "137 records") {
		t.Fatalf("Stop = %v; want the sink's failed Close", err)
	}
}

// flakySinkOpens counts the Opens of flakySink; the first two fail, as a
// sink whose endpoint is down when the runtime starts.
var flakySinkOpens atomic.Int64

type flakySink struct{ failCloseSink }

func (flakySink) Open(context.Context) error {
	if flakySinkOpens.Add(1) <= 2 {
		return errors.New("connectivity check failed: connection refused")
	}
	return nil
}
func (flakySink) Close(context.Context) error { return nil }

func init() {
	sdk.Register(sdk.Registration{
		Name: "sup_test_flaky_sink", Path: "libpicomq_connector_sup_test_flaky_sink", Kind: sdk.KindSink,
		Load:    func(map[string]any, string, sdk.LookupEnv) (sdk.Config, error) { return seqConfig{}, nil },
		NewSink: func(sdk.Config, sdk.Env) (sdk.Sink, error) { return flakySink{}, nil },
	})
}

// TestFailedConnectorStartsAgain: a sink whose Open fails shows Error with
// the cause, and the runtime starts it again after a back-off (1 s, then
// 2 s) until it runs, with no restart through the API.
func TestFailedConnectorStartsAgain(t *testing.T) {
	flakySinkOpens.Store(0)
	sup := startSink(t, embeddedRuntime, "type = \"sink\"\nkey = \"flaky\"\npath = \"libpicomq_connector_sup_test_flaky_sink\"\n[[topics]]\npattern = 'seq_.*'\n")
	defer sup.Stop(context.Background())
	sdktest.WaitFor(t, 10*time.Second, "the sink in Error after its first Open", func() bool {
		e, _ := sup.Get("sink", "flaky")
		return e.Status == status.Error && strings.Contains(e.LastError, "connection refused")
	})
	start := time.Now()
	sdktest.WaitFor(t, 30*time.Second, "the sink running after two failed Opens", func() bool {
		e, _ := sup.Get("sink", "flaky")
		return e.Status == status.Running
	})
	if n := flakySinkOpens.Load(); n != 3 {
		t.Fatalf("%d Opens, want 3 (two failed, then one that ran)", n)
	}
	if took := time.Since(start); took < 2*time.Second {
		t.Fatalf("running %v after the first failure; the back-off is 1 s, then 2 s", took)
	}
}

// panicSinkOpens counts the Opens of panicSink; the first one panics.
var panicSinkOpens atomic.Int64

type panicSink struct{ flakySink }

func (panicSink) Open(context.Context) error {
	if panicSinkOpens.Add(1) == 1 {
		var m map[string]int
		m["boom"]++ // a plugin bug: assignment to a nil map
	}
	return nil
}

func init() {
	sdk.Register(sdk.Registration{
		Name: "sup_test_panic_sink", Path: "libpicomq_connector_sup_test_panic_sink", Kind: sdk.KindSink,
		Load:    func(map[string]any, string, sdk.LookupEnv) (sdk.Config, error) { return seqConfig{}, nil },
		NewSink: func(sdk.Config, sdk.Env) (sdk.Sink, error) { return panicSink{}, nil },
	})
}

// TestPanickedConnectorStartsAgain: a connector whose loop panics shows
// Error with the panic, and is started again like one that failed.
func TestPanickedConnectorStartsAgain(t *testing.T) {
	panicSinkOpens.Store(0)
	sup := startSink(t, embeddedRuntime, "type = \"sink\"\nkey = \"panicky\"\npath = \"libpicomq_connector_sup_test_panic_sink\"\n[[topics]]\npattern = 'seq_.*'\n")
	defer sup.Stop(context.Background())
	sdktest.WaitFor(t, 10*time.Second, "the sink in Error after its Open panicked", func() bool {
		e, _ := sup.Get("sink", "panicky")
		return e.Status == status.Error && strings.Contains(e.LastError, "panicked") && strings.Contains(e.LastError, "nil map")
	})
	sdktest.WaitFor(t, 30*time.Second, "the sink running after the panic", func() bool {
		e, _ := sup.Get("sink", "panicky")
		return e.Status == status.Running
	})
	if n := panicSinkOpens.Load(); n != 2 {
		t.Fatalf("%d Opens, want 2 (one panicked, then one that ran)", n)
	}
}

// TestStopCancelsARestart: a connector waiting out its back-off is not
// started again once the runtime stops.
func TestStopCancelsARestart(t *testing.T) {
	flakySinkOpens.Store(-100) // every Open fails
	sup := startSink(t, embeddedRuntime, "type = \"sink\"\nkey = \"flaky\"\npath = \"libpicomq_connector_sup_test_flaky_sink\"\n[[topics]]\npattern = 'seq_.*'\n")
	// Once the failure is counted, the restart's timer is set.
	sdktest.WaitFor(t, 10*time.Second, "the first failure counted", func() bool { return sup.conns["sink/flaky"].failures.Load() >= 1 })
	if err := sup.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	n := flakySinkOpens.Load()
	time.Sleep(2500 * time.Millisecond) // past the first back-off
	if got := flakySinkOpens.Load(); got != n {
		t.Fatalf("%d Opens after Stop", got-n)
	}
}

// TestFencedSinkStartsAgain: a broker that answers the sink's heartbeat
// with FENCED_INSTANCE_ID (as one that restarted and forgot the member
// does) stops the sink's consumer; the runtime starts the sink again and
// it runs. Fenced on every start (a stranger joining its group with the
// runtime's id), it shows Error with the cause and keeps being started
// again, past fencesBeforeError, so it runs once the fences stop: nothing
// from outside stops it for good.
func TestFencedSinkStartsAgain(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	var fences, limit atomic.Int64
	limit.Store(1)
	c := b.Cluster()
	c.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.KeepControl()
		r := req.(*kmsg.HeartbeatRequest)
		if r.Group != "pico-connectors-fenced" || fences.Load() >= limit.Load() {
			return nil, nil, false
		}
		fences.Add(1)
		resp := r.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.Version = r.Version
		resp.ErrorCode = 82 // FENCED_INSTANCE_ID
		return resp, nil, true
	})
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	// A topic the pattern matches: the consumer joins its group only then.
	if err := cl.ProduceSync(context.Background(), &kgo.Record{Topic: "seq_fenced", Value: []byte(`{"seq":0}`)}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	cl.Close()
	flakySinkOpens.Store(1000) // every Open succeeds
	sup := startSink(t, fmt.Sprintf("[broker]\nbootstrap_servers = %q\n[state]\npath = \"st\"\n", b.Addr()), "type = \"sink\"\nkey = \"fenced\"\npath = \"libpicomq_connector_sup_test_flaky_sink\"\n[[topics]]\npattern = 'seq_.*'\n")
	defer sup.Stop(context.Background())
	sdktest.WaitFor(t, 60*time.Second, "the sink fenced once", func() bool {
		e, _ := sup.Get("sink", "fenced")
		return fences.Load() == 1 && strings.Contains(e.LastError, "same id")
	})
	sdktest.WaitFor(t, 60*time.Second, "the sink running again after the fence", func() bool {
		e, _ := sup.Get("sink", "fenced")
		return e.Status == status.Running && fences.Load() == 1
	})

	limit.Store(1 << 30) // fenced on every start from now on
	sdktest.WaitFor(t, 2*time.Minute, "the sink fenced past fencesBeforeError, in Error and still started again", func() bool {
		e, _ := sup.Get("sink", "fenced")
		return e.Status == status.Error && strings.Contains(e.LastError, "same id") && fences.Load() > 2+fencesBeforeError
	})
	limit.Store(fences.Load()) // the stranger leaves
	sdktest.WaitFor(t, 2*time.Minute, "the sink running again once the fences stop", func() bool {
		e, _ := sup.Get("sink", "fenced")
		return e.Status == status.Running
	})
}

// embeddedRuntime is a runtime config with an embedded broker and file
// state.
const embeddedRuntime = "[broker]\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"st\"\n"

// startSink starts a supervisor with runtime config rt and one sink
// definition, logging only what goes wrong beyond errors.
func startSink(t *testing.T, rt, def string) *Supervisor {
	t.Helper()
	sup, err := New(writeConfig(t, rt, map[string]string{"sink.toml": def}),
		Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError + 4}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return sup
}
