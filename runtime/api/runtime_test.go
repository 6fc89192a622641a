package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/picomq/pico-connectors/generated/registry"
	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/runtime/supervisor"
)

// stateServer is a real HTTP state store endpoint (GET loads, PUT saves)
// that can be told to answer 500.
type stateServer struct {
	*httptest.Server
	fail   atomic.Bool
	puts   atomic.Int64
	auth   atomic.Value // last Authorization header seen
	mu     sync.Mutex
	blobs  map[string][]byte
	failed atomic.Int64
}

func newStateServer(t *testing.T) *stateServer {
	s := &stateServer{blobs: map[string][]byte{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.auth.Store(r.Header.Get("Authorization"))
		if s.fail.Load() {
			s.failed.Add(1)
			http.Error(w, "store unavailable", http.StatusInternalServerError)
			return
		}
		key := strings.TrimPrefix(r.URL.Path, "/state/")
		s.mu.Lock()
		defer s.mu.Unlock()
		switch r.Method {
		case http.MethodGet:
			b, ok := s.blobs[key]
			if !ok {
				http.NotFound(w, r)
				return
			}
			w.Write(b)
		case http.MethodPut:
			b, _ := io.ReadAll(r.Body)
			s.blobs[key] = b
			s.puts.Add(1)
			w.WriteHeader(http.StatusNoContent)
		default:
			http.Error(w, "method", http.StatusMethodNotAllowed)
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// runtimeUnderTest is a supervisor with its API and metrics, in process.
type runtimeUnderTest struct {
	sup  *supervisor.Supervisor
	srv  *api.Server
	url  string
	key  string
	logs *runtimebin.Output
	stop func()
}

// startRuntime loads dir/runtime.toml with env, and starts the supervisor
// and the API as cmd/pico-connectors does.
func startRuntime(t *testing.T, dir string, env map[string]string, apiKey string) *runtimeUnderTest {
	t.Helper()
	cfg, err := definition.Load(filepath.Join(dir, "runtime.toml"), env)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	logs := &runtimebin.Output{}
	logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg := metrics.New(logger)
	sup, err := supervisor.New(cfg, supervisor.Options{Logger: logger, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := sup.Start(ctx); err != nil {
		cancel()
		t.Fatal(err)
	}
	srv, err := api.New(sup, api.Options{Address: "127.0.0.1:0", APIKey: apiKey, Metrics: reg.Handler(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	rt := &runtimeUnderTest{sup: sup, srv: srv, url: "http://" + srv.Addr(), key: apiKey, logs: logs}
	var once sync.Once
	rt.stop = func() {
		once.Do(func() {
			if err := sup.Stop(context.Background()); err != nil {
				t.Errorf("stop: %v", err)
			}
			srv.Shutdown(context.Background())
			cancel()
		})
	}
	t.Cleanup(rt.stop)
	return rt
}

func (rt *runtimeUnderTest) do(t *testing.T, method, path string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, rt.url+path, nil)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // as the API asks of a POST
	}
	if rt.key != "" {
		req.Header.Set("Authorization", "Bearer "+rt.key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func (rt *runtimeUnderTest) entry(t *testing.T, kind, key string) api.Entry {
	t.Helper()
	code, b := rt.do(t, "GET", "/"+kind+"s/"+key)
	if code != 200 {
		t.Fatalf("GET /%ss/%s = %d %s", kind, key, code, b)
	}
	var e api.Entry
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

// waitEntry polls the API until cond holds, failing after a minute.
func (rt *runtimeUnderTest) waitEntry(t *testing.T, kind, key, what string, cond func(api.Entry) bool) api.Entry {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		e := rt.entry(t, kind, key)
		if cond(e) {
			return e
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s never became %s; last entry %+v\nlogs:\n%s", kind, key, what, e, rt.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (rt *runtimeUnderTest) metrics(t *testing.T) string {
	t.Helper()
	code, b := rt.do(t, "GET", "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d %s", code, b)
	}
	return string(b)
}

func metricLine(t *testing.T, text, line string) {
	t.Helper()
	if !strings.Contains(text, "\n"+line+"\n") {
		t.Errorf("metrics lack %q", line)
	}
}

func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStatusFollowsFailingStateStore drives a random source against an
// HTTP state store that starts answering 500: the API and the metrics show
// Error with the store's failure, then Running again once it recovers.
// A restart through the API resumes from the stored checkpoint.
func TestStatusFollowsFailingStateStore(t *testing.T) {
	store := newStateServer(t)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"runtime.toml": fmt.Sprintf(`
[broker]
embedded_address = "127.0.0.1:0"
[state]
storage = "http"
[state.http]
url = %q
max_attempts = 2
retry_delay = "5ms"
timeout = "2s"
api_key = "store-token"
`, store.URL+"/state"),
		"connectors/numbers.toml": `
type = "source"
key = "numbers"
enabled = true
path = "libpicomq_connector_random_source"
[[topics]]
topic = "numbers"
create_topics = true
[plugin_config]
records_per_batch = 10
interval = "10ms"
payload_size = "16B"
`,
		"connectors/idle.toml": `
type = "source"
key = "idle"
enabled = false
path = "libpicomq_connector_random_source"
[[topics]]
topic = "idle"
create_topics = true
`,
	})
	rt := startRuntime(t, dir, nil, "")

	e := rt.waitEntry(t, "source", "numbers", "Running with saves", func(e api.Entry) bool {
		return e.Status == status.Running && e.Counters.StateSaves >= 3
	})
	if got := store.auth.Load(); got != "Bearer store-token" {
		t.Errorf("state store saw Authorization %q", got)
	}
	if e.Topics[0] != "numbers" || e.Path != "libpicomq_connector_random_source" || e.Type != "source" {
		t.Errorf("entry = %+v", e)
	}
	if d := rt.entry(t, "source", "idle"); d.Status != status.Disabled {
		t.Errorf("disabled source has status %s", d.Status)
	}
	m := rt.metrics(t)
	metricLine(t, m, `picomq_connectors_sources_running{key="numbers",type="source"} 1`)
	metricLine(t, m, `picomq_connectors_sources_running{key="idle",type="source"} 0`)
	metricLine(t, m, `picomq_connectors_status{key="idle",status="Disabled",type="source"} 1`)
	for _, name := range []string{"records_polled_total", "records_produced_total", "state_saves_total", "batches_acknowledged_total", "records_acknowledged_total"} {
		if !strings.Contains(m, "picomq_connectors_"+name+`{key="numbers",type="source"} `) {
			t.Errorf("metrics lack %s for numbers", name)
		}
	}
	for _, stage := range []string{"decode", "produce", "state_save"} {
		if !strings.Contains(m, `picomq_connectors_stage_duration_seconds_count{key="numbers",stage="`+stage+`",type="source"}`) {
			t.Errorf("metrics lack the %s stage histogram", stage)
		}
	}

	// The store fails: the source goes to Error with the store's error.
	store.fail.Store(true)
	e = rt.waitEntry(t, "source", "numbers", "Error", func(e api.Entry) bool { return e.Status == status.Error })
	if e.LastError == "" || e.LastErrorAt.IsZero() || e.Counters.StateFails == 0 || !strings.Contains(e.LastError, "500") {
		t.Errorf("entry in Error = %+v", e)
	}
	var h api.Health
	_, b := rt.do(t, "GET", "/health")
	json.Unmarshal(b, &h)
	if h.Status != "degraded" || h.Sources.Error != 1 {
		t.Errorf("health with a failing source = %s", b)
	}
	m = rt.metrics(t)
	metricLine(t, m, `picomq_connectors_sources_running{key="numbers",type="source"} 0`)
	metricLine(t, m, `picomq_connectors_status{key="numbers",status="Error",type="source"} 1`)
	if strings.Contains(m, `picomq_connectors_state_save_failures_total{key="numbers",type="source"} 0`) {
		t.Errorf("state_save_failures_total is 0 while the store fails")
	}
	if !strings.Contains(rt.logs.String(), `"to":"Error"`) {
		t.Errorf("no log line for the change to Error")
	}

	// The store recovers: the next good batch clears Error.
	store.fail.Store(false)
	e = rt.waitEntry(t, "source", "numbers", "Running again", func(e api.Entry) bool { return e.Status == status.Running })
	if e.LastError == "" {
		t.Errorf("last_error was dropped on recovery: %+v", e)
	}
	metricLine(t, rt.metrics(t), `picomq_connectors_sources_running{key="numbers",type="source"} 1`)

	// Restart through the API: it comes back Running and keeps saving.
	saves := rt.entry(t, "source", "numbers").Counters.StateSaves
	code, b := rt.do(t, "POST", "/sources/numbers/restart")
	if code != 200 {
		t.Fatalf("restart = %d %s", code, b)
	}
	rt.waitEntry(t, "source", "numbers", "Running after restart with new saves", func(e api.Entry) bool {
		return e.Status == status.Running && e.Counters.StateSaves > saves+2
	})
	if code, b := rt.do(t, "POST", "/sources/idle/restart"); code != http.StatusConflict {
		t.Errorf("restart of a disabled source = %d %s", code, b)
	}
	rt.stop()
	if e, _ := rt.sup.Get("source", "numbers"); e.Status != status.Stopped {
		t.Errorf("status after stop = %s", e.Status)
	}
}

// TestStatusFollowsFailingBroker runs a random source against a broker
// that is stopped mid-stream: batches are nacked and the API shows the
// produce failure and the run of nacks; once a broker is back on the same
// address the source recovers and the run resets.
func TestStatusFollowsFailingBroker(t *testing.T) {
	if testing.Short() {
		t.Skip("waits for librdkafka delivery timeouts; skipped with -short")
	}
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	addr := b.Addr()
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"runtime.toml": fmt.Sprintf(`
[broker]
bootstrap_servers = %q
[broker.properties]
"reconnect.backoff.max.ms" = "100"
[state]
path = "state"
`, addr),
		"connectors/numbers.toml": `
type = "source"
key = "numbers"
enabled = true
path = "libpicomq_connector_random_source"
[[topics]]
topic = "numbers"
create_topics = true
properties = { "message.timeout.ms" = "300" }
[plugin_config]
records_per_batch = 5
interval = "10ms"
payload_size = "16B"
`,
	})
	rt := startRuntime(t, dir, nil, "")
	rt.waitEntry(t, "source", "numbers", "Running with acks", func(e api.Entry) bool {
		return e.Status == status.Running && e.Counters.Acked >= 3
	})
	b.Close()
	e := rt.waitEntry(t, "source", "numbers", "nacking", func(e api.Entry) bool {
		return e.Counters.ConsecNacks >= 2 && e.LastError != ""
	})
	t.Logf("with the broker down: %+v", e)
	if !strings.Contains(rt.metrics(t), `picomq_connectors_batches_nacked_total{key="numbers",type="source"} `) {
		t.Errorf("metrics lack batches_nacked_total")
	}
	b2, err := broker.Start(broker.Config{Address: addr, AutoCreateTopics: true})
	if err != nil {
		t.Fatalf("restarting the broker on %s: %v", addr, err)
	}
	defer b2.Close()
	acked := e.Counters.Acked
	rt.waitEntry(t, "source", "numbers", "Running with acks after the broker came back", func(e api.Entry) bool {
		return e.Status == status.Running && e.Counters.ConsecNacks == 0 && e.Counters.Acked > acked
	})
	rt.stop()
}
