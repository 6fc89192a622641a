package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/tlstest"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// secretConfig is a sdk.Config whose Redacted masks its secret the way
// the generated code does.
type secretConfig struct {
	Bucket string
	Secret string
}

func (c secretConfig) Redacted() map[string]any {
	return map[string]any{"bucket": c.Bucket, "secret_access_key": confkit.Mask}
}

const marker = "MARKER-s3cr3t-value"

// table is a small in-memory Connectors over real status trackers.
type table struct {
	mu       sync.Mutex
	defs     map[[2]string]definition.Connector
	trackers map[[2]string]*status.Tracker
	cfgs     map[[2]string]sdk.Config
	restarts map[[2]string]int
	failNext error
}

func newTable() *table {
	t := &table{
		defs:     map[[2]string]definition.Connector{},
		trackers: map[[2]string]*status.Tracker{},
		cfgs:     map[[2]string]sdk.Config{},
		restarts: map[[2]string]int{},
	}
	t.add(definition.Connector{
		Type: KindSource, Key: "orders_cdc", Enabled: true, Name: "Orders CDC", Path: "libpicomq_connector_postgres_source",
		Topics: []definition.Topics{{
			Topic:  definition.Route{Strategy: "field", Path: "tenant", Template: "orders.{value}", Fallback: "orders.unrouted"},
			Schema: "json", Properties: map[string]string{"sasl.password": marker, "linger.ms": "5"},
		}},
		PluginConfig: map[string]any{"connection_string": "postgres://u:" + marker + "@db/app"},
	}, secretConfig{Bucket: "b", Secret: marker}, status.Running)
	t.add(definition.Connector{Type: KindSource, Key: "random", Enabled: false, Path: "libpicomq_connector_random_source",
		Topics: []definition.Topics{{Topic: definition.Route{Literal: "random"}}}}, nil, status.Disabled)
	t.add(definition.Connector{Type: KindSink, Key: "archive", Enabled: true, Path: "libpicomq_connector_s3_sink",
		Topics:       []definition.Topics{{Pattern: "^orders\\..*"}},
		PluginConfig: map[string]any{"secret_access_key": marker, "bucket": "b"},
	}, secretConfig{Bucket: "b", Secret: marker}, status.Running)
	return t
}

func (t *table) add(def definition.Connector, cfg sdk.Config, s status.Status) {
	id := [2]string{def.Type, def.Key}
	tr := status.New(def.Type, def.Key, nil)
	tr.Set(s)
	t.defs[id], t.trackers[id], t.cfgs[id] = def, tr, cfg
}

func (t *table) List(kind string) []Entry {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Entry
	for id, def := range t.defs {
		if id[0] == kind {
			out = append(out, NewEntry(def, t.trackers[id].Snapshot()))
		}
	}
	return out
}

func (t *table) Get(kind, key string) (Entry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := [2]string{kind, key}
	def, ok := t.defs[id]
	if !ok {
		return Entry{}, false
	}
	return NewEntry(def, t.trackers[id].Snapshot()), true
}

func (t *table) Config(kind, key string) (map[string]any, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := [2]string{kind, key}
	def, ok := t.defs[id]
	if !ok {
		return nil, false
	}
	return Definition(def, t.cfgs[id], nil), true
}

func (t *table) Restart(ctx context.Context, kind, key string) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	id := [2]string{kind, key}
	def, ok := t.defs[id]
	switch {
	case !ok:
		return fmt.Errorf("%s %q: %w", kind, key, ErrNotFound)
	case !def.Enabled:
		return fmt.Errorf("%s %q: %w", kind, key, ErrDisabled)
	case t.failNext != nil:
		err := t.failNext
		t.failNext = nil
		t.trackers[id].Fail(err)
		return err
	}
	t.restarts[id]++
	tr := status.New(kind, key, nil)
	tr.Set(status.Running)
	t.trackers[id] = tr
	return nil
}

func newServer(t *testing.T, conns Connectors, opts Options) *httptest.Server {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := New(conns, opts)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(s.Handler())
	t.Cleanup(ts.Close)
	return ts
}

type answer struct {
	code int
	hdr  http.Header
	body []byte
}

func do(t *testing.T, c *http.Client, method, url string, hdr map[string]string) answer {
	t.Helper()
	return doBody(t, c, method, url, nil, hdr)
}

// doBody is do with a request body.
func doBody(t *testing.T, c *http.Client, method, url string, body io.Reader, hdr map[string]string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // as the API asks of a POST
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if c == nil {
		c = http.DefaultClient
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return answer{resp.StatusCode, resp.Header, b}
}

func (a answer) decode(t *testing.T, v any) {
	t.Helper()
	if ct := a.hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type = %q, want application/json; body %s", ct, a.body)
	}
	if err := json.Unmarshal(a.body, v); err != nil {
		t.Fatalf("decoding %s: %v", a.body, err)
	}
}

func TestEndpoints(t *testing.T) {
	tab := newTable()
	ts := newServer(t, tab, Options{Metrics: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "picomq_connectors_sources_running{key=\"orders_cdc\",type=\"source\"} 1\n")
	})})

	t.Run("health", func(t *testing.T) {
		a := do(t, nil, "GET", ts.URL+"/health", nil)
		var h Health
		a.decode(t, &h)
		want := Health{Status: "ok", Sources: Count{Total: 2, Running: 1}, Sinks: Count{Total: 1, Running: 1}}
		if a.code != 200 || !reflect.DeepEqual(h, want) {
			t.Fatalf("GET /health = %d %+v, want 200 %+v", a.code, h, want)
		}
	})

	t.Run("list sources", func(t *testing.T) {
		a := do(t, nil, "GET", ts.URL+"/sources", nil)
		var es []Entry
		a.decode(t, &es)
		if a.code != 200 || len(es) != 2 || es[0].Key != "orders_cdc" || es[1].Key != "random" {
			t.Fatalf("GET /sources = %d %s", a.code, a.body)
		}
		if es[1].Status != status.Disabled || es[1].Enabled {
			t.Errorf("random: status %s enabled %v, want Disabled false", es[1].Status, es[1].Enabled)
		}
		if got := strings.Join(es[0].Topics, ","); got != "orders.{value},orders.unrouted" {
			t.Errorf("topics = %q", got)
		}
	})

	t.Run("get source with counters and error", func(t *testing.T) {
		tr := tab.trackers[[2]string{KindSource, "orders_cdc"}]
		tr.Counters.Polled.Add(7)
		tr.Counters.Produced.Add(5)
		tr.Counters.StateSaves.Add(2)
		tr.Fail(errors.New("broker down"))
		a := do(t, nil, "GET", ts.URL+"/sources/orders_cdc", nil)
		var raw map[string]any
		a.decode(t, &raw)
		for _, k := range []string{"key", "type", "name", "path", "version", "enabled", "status", "last_error", "last_error_at", "topics", "counters"} {
			if _, ok := raw[k]; !ok {
				t.Errorf("entry lacks field %q: %s", k, a.body)
			}
		}
		var e Entry
		a.decode(t, &e)
		if e.Status != status.Error || e.LastError != "broker down" || e.LastErrorAt.IsZero() ||
			e.Counters.Polled != 7 || e.Counters.Produced != 5 || e.Counters.StateSaves != 2 || e.Type != "source" {
			t.Fatalf("entry = %+v", e)
		}
		var h Health
		do(t, nil, "GET", ts.URL+"/health", nil).decode(t, &h)
		if h.Status != "degraded" || h.Sources.Error != 1 {
			t.Errorf("health after failure = %+v", h)
		}
		tr.Set(status.Running)
	})

	t.Run("list and get sinks", func(t *testing.T) {
		var es []Entry
		a := do(t, nil, "GET", ts.URL+"/sinks", nil)
		a.decode(t, &es)
		if a.code != 200 || len(es) != 1 || es[0].Key != "archive" || es[0].Topics[0] != "^orders\\..*" {
			t.Fatalf("GET /sinks = %d %s", a.code, a.body)
		}
		var e Entry
		a = do(t, nil, "GET", ts.URL+"/sinks/archive", nil)
		a.decode(t, &e)
		if a.code != 200 || e.Key != "archive" || e.Type != "sink" || e.Status != status.Running {
			t.Fatalf("GET /sinks/archive = %d %s", a.code, a.body)
		}
	})

	t.Run("config is redacted", func(t *testing.T) {
		for _, path := range []string{"/sources/orders_cdc/config", "/sinks/archive/config"} {
			a := do(t, nil, "GET", ts.URL+path, nil)
			var m map[string]any
			a.decode(t, &m)
			if a.code != 200 {
				t.Fatalf("GET %s = %d %s", path, a.code, a.body)
			}
			if bytes.Contains(a.body, []byte(marker)) {
				t.Fatalf("GET %s shows the secret: %s", path, a.body)
			}
			pc, _ := m["plugin_config"].(map[string]any)
			if pc["secret_access_key"] != confkit.Mask || pc["bucket"] != "b" {
				t.Errorf("GET %s plugin_config = %v", path, pc)
			}
		}
		var m map[string]any
		do(t, nil, "GET", ts.URL+"/sources/orders_cdc/config", nil).decode(t, &m)
		topic := m["topics"].([]any)[0].(map[string]any)
		if props := topic["properties"].(map[string]any); props["sasl.password"] != confkit.Mask || props["linger.ms"] != "5" {
			t.Errorf("properties = %v", props)
		}
		if r := topic["topic"].(map[string]any); r["strategy"] != "field" || r["template"] != "orders.{value}" {
			t.Errorf("route = %v", r)
		}
		// A connector whose config did not load shows no plugin_config.
		m = nil
		do(t, nil, "GET", ts.URL+"/sources/random/config", nil).decode(t, &m)
		if _, ok := m["plugin_config"]; ok || m["topics"].([]any)[0].(map[string]any)["topic"] != "random" {
			t.Errorf("random config = %v", m)
		}
	})

	t.Run("restart", func(t *testing.T) {
		before := tab.trackers[[2]string{KindSink, "archive"}]
		before.Counters.Consumed.Add(3)
		a := do(t, nil, "POST", ts.URL+"/sinks/archive/restart", nil)
		var e Entry
		a.decode(t, &e)
		if a.code != 200 || e.Status != status.Running || e.Counters.Consumed != 0 || tab.restarts[[2]string{KindSink, "archive"}] != 1 {
			t.Fatalf("POST restart = %d %s", a.code, a.body)
		}
		a = do(t, nil, "POST", ts.URL+"/sources/orders_cdc/restart", nil)
		if a.code != 200 || tab.restarts[[2]string{KindSource, "orders_cdc"}] != 1 {
			t.Fatalf("POST source restart = %d %s", a.code, a.body)
		}
		var ae Error
		a = do(t, nil, "POST", ts.URL+"/sources/random/restart", nil)
		a.decode(t, &ae)
		if a.code != http.StatusConflict || !strings.Contains(ae.Error, "disabled") {
			t.Errorf("restart disabled = %d %s", a.code, a.body)
		}
		tab.failNext = errors.New("open failed: bucket missing")
		a = do(t, nil, "POST", ts.URL+"/sinks/archive/restart", nil)
		a.decode(t, &ae)
		if a.code != 500 || !strings.Contains(ae.Error, "bucket missing") {
			t.Errorf("failed restart = %d %s", a.code, a.body)
		}
		if tab.trackers[[2]string{KindSink, "archive"}].Status() != status.Error {
			t.Errorf("status after failed restart = %s", tab.trackers[[2]string{KindSink, "archive"}].Status())
		}
		a = do(t, nil, "GET", ts.URL+"/sinks/archive/restart", nil)
		if a.code != http.StatusMethodNotAllowed || a.hdr.Get("Allow") != "POST" {
			t.Errorf("GET restart = %d allow %q", a.code, a.hdr.Get("Allow"))
		}
	})

	t.Run("404 and 405 are JSON", func(t *testing.T) {
		for _, c := range []struct{ method, path, want string }{
			{"GET", "/sources/nope", `no source with key "nope"`},
			{"GET", "/sinks/nope", `no sink with key "nope"`},
			{"GET", "/sources/nope/config", `no source with key "nope"`},
			{"GET", "/sinks/orders_cdc/config", `no sink with key "orders_cdc"`},
			{"POST", "/sources/nope/restart", `no source with key "nope"`},
			{"POST", "/sinks/nope/restart", `no sink with key "nope"`},
			{"GET", "/nowhere", "no route GET /nowhere"},
		} {
			a := do(t, nil, c.method, ts.URL+c.path, nil)
			var e Error
			a.decode(t, &e)
			if a.code != 404 || e.Error != c.want {
				t.Errorf("%s %s = %d %q, want 404 %q", c.method, c.path, a.code, e.Error, c.want)
			}
		}
		a := do(t, nil, "DELETE", ts.URL+"/sources", nil)
		var e Error
		a.decode(t, &e)
		if a.code != 405 || e.Error == "" {
			t.Errorf("DELETE /sources = %d %s", a.code, a.body)
		}
	})

	t.Run("metrics", func(t *testing.T) {
		a := do(t, nil, "GET", ts.URL+"/metrics", nil)
		if a.code != 200 || !strings.Contains(string(a.body), "picomq_connectors_sources_running") {
			t.Fatalf("GET /metrics = %d %s", a.code, a.body)
		}
	})
}

func TestMetricsDisabled(t *testing.T) {
	ts := newServer(t, newTable(), Options{})
	var e Error
	a := do(t, nil, "GET", ts.URL+"/metrics", nil)
	a.decode(t, &e)
	if a.code != 404 {
		t.Fatalf("GET /metrics without metrics = %d", a.code)
	}
}

func TestAuth(t *testing.T) {
	const key = "k3y-for-tests"
	ts := newServer(t, newTable(), Options{APIKey: key, Metrics: http.NotFoundHandler()})
	ok := []map[string]string{
		{"Authorization": "Bearer " + key},
		{"Authorization": "bearer " + key},
		{"api-key": key},
		{"Api-Key": key},
	}
	refused := []map[string]string{
		nil,
		{"Authorization": "Bearer wrong"},
		{"Authorization": "Bearer " + key + "x"},
		{"Authorization": "Bearer " + key[:len(key)-1]},
		{"Authorization": "Basic " + key},
		{"Authorization": key},
		{"api-key": "wrong"},
		{"api-key": ""},
	}
	for _, path := range []string{"/sources", "/sinks/archive", "/sources/orders_cdc/config"} {
		for _, h := range ok {
			if a := do(t, nil, "GET", ts.URL+path, h); a.code != 200 {
				t.Errorf("GET %s with %v = %d %s", path, h, a.code, a.body)
			}
		}
		for _, h := range refused {
			a := do(t, nil, "GET", ts.URL+path, h)
			var e Error
			a.decode(t, &e)
			if a.code != 401 || !strings.Contains(e.Error, "API key") || a.hdr.Get("WWW-Authenticate") == "" {
				t.Errorf("GET %s with %v = %d %s, want 401", path, h, a.code, a.body)
			}
		}
	}
	// Refused requests change nothing.
	if a := do(t, nil, "POST", ts.URL+"/sinks/archive/restart", map[string]string{"api-key": "wrong"}); a.code != 401 {
		t.Errorf("restart with a wrong key = %d", a.code)
	}
	if a := do(t, nil, "POST", ts.URL+"/sinks/archive/restart", map[string]string{"api-key": key}); a.code != 200 {
		t.Errorf("restart with the key = %d %s", a.code, a.body)
	}
	if a := do(t, nil, "GET", ts.URL+"/metrics", nil); a.code != 401 {
		t.Errorf("metrics without the key = %d", a.code)
	}
	if a := do(t, nil, "GET", ts.URL+"/nowhere", nil); a.code != 401 {
		t.Errorf("unknown route without the key = %d, want 401 (no route discovery)", a.code)
	}
	// Health and readiness stay open for probes.
	if a := do(t, nil, "GET", ts.URL+"/health", nil); a.code != 200 {
		t.Errorf("health without the key = %d", a.code)
	}
	if a := do(t, nil, "GET", ts.URL+"/ready", nil); a.code != 200 {
		t.Errorf("ready without the key = %d %s", a.code, a.body)
	}
}

// TestReady checks /ready against each status of an enabled connector:
// only Running and Standby are ready, a disabled connector never holds
// readiness back, and a 503 names the connectors that are not ready and
// nothing else (no error text, no runtime id: it needs no API key).
func TestReady(t *testing.T) {
	const key = "k3y-for-tests"
	for _, c := range []struct {
		sink  status.Status
		ready bool
	}{
		{status.Running, true},
		{status.Standby, true},
		{status.Starting, false},
		{status.Error, false},
		{status.Stopping, false},
		{status.Stopped, false},
	} {
		t.Run(string(c.sink), func(t *testing.T) {
			tab := newTable() // orders_cdc Running, random disabled, archive set below
			tr := tab.trackers[[2]string{KindSink, "archive"}]
			if c.sink == status.Error {
				tr.Fail(errors.New("s3 down at https://" + marker + "@s3.example"))
			} else {
				tr.Set(c.sink)
			}
			ts := newServer(t, tab, Options{APIKey: key})
			a := do(t, nil, "GET", ts.URL+"/ready", nil)
			var rd Readiness
			a.decode(t, &rd)
			if c.ready {
				if a.code != 200 || rd.Status != "ready" || rd.NotReady != nil {
					t.Fatalf("GET /ready = %d %s, want 200 ready", a.code, a.body)
				}
				return
			}
			want := Readiness{Status: "not_ready", NotReady: []NotReady{{Type: KindSink, Key: "archive", Status: c.sink}}}
			if a.code != http.StatusServiceUnavailable || !reflect.DeepEqual(rd, want) {
				t.Fatalf("GET /ready = %d %s, want 503 %+v", a.code, a.body, want)
			}
			if strings.Contains(string(a.body), marker) || strings.Contains(string(a.body), "s3.example") {
				t.Errorf("/ready shows error text: %s", a.body)
			}
			if h := do(t, nil, "HEAD", ts.URL+"/ready", nil); h.code != http.StatusServiceUnavailable {
				t.Errorf("HEAD /ready = %d", h.code)
			}
		})
	}
	t.Run("both kinds sorted", func(t *testing.T) {
		tab := newTable()
		tab.trackers[[2]string{KindSink, "archive"}].Set(status.Starting)
		tab.trackers[[2]string{KindSource, "orders_cdc"}].Fail(errors.New("boom"))
		ts := newServer(t, tab, Options{})
		a := do(t, nil, "GET", ts.URL+"/ready", nil)
		var rd Readiness
		a.decode(t, &rd)
		want := []NotReady{{KindSink, "archive", status.Starting}, {KindSource, "orders_cdc", status.Error}}
		if a.code != 503 || !reflect.DeepEqual(rd.NotReady, want) {
			t.Fatalf("GET /ready = %d %s, want 503 %+v", a.code, a.body, want)
		}
		if p := do(t, nil, "POST", ts.URL+"/ready", map[string]string{"Content-Type": "application/json"}); p.code != 405 {
			t.Errorf("POST /ready = %d", p.code)
		}
	})
}

func TestLoopbackWarning(t *testing.T) {
	for _, c := range []struct {
		addr, key string
		warn      bool
	}{
		{"127.0.0.1:8081", "", false},
		{"localhost:8081", "", false},
		{"[::1]:8081", "", false},
		{":8081", "", true},
		{"0.0.0.0:8081", "", true},
		{"10.1.2.3:8081", "", true},
		{"0.0.0.0:8081", "k", false},
	} {
		var buf bytes.Buffer
		s, err := New(newTable(), Options{Address: c.addr, APIKey: c.key, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
		if err != nil {
			t.Fatal(err)
		}
		s.warnIfExposed()
		if got := strings.Contains(buf.String(), `"level":"WARN"`); got != c.warn {
			t.Errorf("address %q key %v: warned %v, want %v (%s)", c.addr, c.key != "", got, c.warn, buf.String())
		}
	}
}

func TestStartLogsAndServes(t *testing.T) {
	var buf bytes.Buffer
	s, err := New(newTable(), Options{Address: "127.0.0.1:0", APIKey: marker, Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	a := do(t, nil, "GET", "http://"+s.Addr()+"/sources/orders_cdc", map[string]string{"Authorization": "Bearer " + marker})
	if a.code != 200 {
		t.Fatalf("GET = %d %s", a.code, a.body)
	}
	if !strings.Contains(buf.String(), "http api listening") || strings.Contains(buf.String(), marker) {
		t.Errorf("start log = %s", buf.String())
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	s, err := New(newTable(), Options{Address: "127.0.0.1:0", TLSCert: certFile, TLSKey: keyFile, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	a := do(t, client, "GET", "https://"+s.Addr()+"/sinks/archive", nil)
	var e Entry
	a.decode(t, &e)
	if a.code != 200 || e.Key != "archive" {
		t.Fatalf("GET over TLS = %d %s", a.code, a.body)
	}
	// Plain HTTP to a TLS port fails.
	resp, err := http.Get("http://" + s.Addr() + "/health")
	if err == nil {
		if resp.StatusCode == 200 {
			t.Errorf("plain HTTP to the TLS port answered 200")
		}
		resp.Body.Close()
	}
	// An untrusting client refuses the certificate.
	if _, err := http.Get("https://" + s.Addr() + "/health"); err == nil {
		t.Errorf("a client without the CA accepted the self-signed certificate")
	}
}

func TestTLSOptions(t *testing.T) {
	if _, err := New(newTable(), Options{TLSCert: "cert.pem"}); err == nil || !strings.Contains(err.Error(), "tls_key") {
		t.Errorf("cert without key: %v", err)
	}
	s, err := New(newTable(), Options{Address: "127.0.0.1:0", TLSCert: "/nonexistent/cert.pem", TLSKey: "/nonexistent/key.pem", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(); err == nil || !strings.Contains(err.Error(), "/nonexistent/cert.pem") {
		t.Errorf("missing cert files: %v", err)
	}
}

func TestDefinitionNeverCopiesRawPluginConfig(t *testing.T) {
	def := definition.Connector{Type: "sink", Key: "k", Path: "p",
		PluginConfig: map[string]any{"secret_access_key": marker},
		Transforms:   []map[string]any{{"type": "add_fields", "token": marker}},
		Topics:       []definition.Topics{{Topic: definition.Route{Literal: "t"}, Properties: map[string]string{"ssl.key.password": marker, "SASL.PASSWORD": marker, "x.secret": marker}}},
	}
	b, _ := json.Marshal(Definition(def, nil, nil))
	if bytes.Contains(b, []byte(marker)) {
		t.Fatalf("Definition shows a secret: %s", b)
	}
	if !bytes.Contains(b, []byte(`"transforms":[{"type":"add_fields"}]`)) {
		t.Errorf("transforms = %s", b)
	}
	b, _ = json.Marshal(Definition(def, secretConfig{Secret: marker}, []sdk.Config{secretConfig{Secret: marker}}))
	if bytes.Contains(b, []byte(marker)) || !bytes.Contains(b, []byte(`"plugin_config":{"bucket":"","secret_access_key":"****"}`)) {
		t.Fatalf("Definition = %s", b)
	}
}

func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := tlstest.Write(certFile, keyFile); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		t.Fatalf("no certificate in %s", certFile)
	}
	return certFile, keyFile, pool
}

// fleetTable is a table in a fleet of runtimes.
type fleetTable struct{ *table }

func (fleetTable) Membership() Membership {
	return Membership{RuntimeID: "rt-a", Mode: "distributed", Members: []string{"rt-a", "rt-b"}}
}

// TestFleetHealthAndPlacement: /health shows the runtime id, mode, members
// and the sources on standby; an entry carries its placement.
func TestFleetHealthAndPlacement(t *testing.T) {
	tab := newTable()
	tr := tab.trackers[[2]string{KindSource, "orders_cdc"}]
	tr.Set(status.Standby)
	tr.SetPlacement(status.Placement{Owner: "rt-b", Generation: 2})
	const key = "fleet-key"
	ts := newServer(t, fleetTable{tab}, Options{APIKey: key})
	var h Health
	do(t, nil, "GET", ts.URL+"/health", map[string]string{"Authorization": "Bearer " + key}).decode(t, &h)
	want := Health{Status: "ok", Sources: Count{Total: 2, Standby: 1}, Sinks: Count{Total: 1, Running: 1},
		RuntimeID: "rt-a", Mode: "distributed", Members: []string{"rt-a", "rt-b"}}
	if !reflect.DeepEqual(h, want) {
		t.Fatalf("GET /health with the key = %+v, want %+v", h, want)
	}
	// Without the key, the ids of the fleet's members stay hidden: with
	// one, a stranger could join a lease group as this runtime and fence
	// it. The same without any key configured.
	for _, c := range []struct {
		opts Options
		hdr  map[string]string
	}{{Options{APIKey: key}, nil}, {Options{APIKey: key}, map[string]string{"Authorization": "Bearer wrong"}}, {Options{}, nil}} {
		var h Health
		do(t, nil, "GET", newServer(t, fleetTable{tab}, c.opts).URL+"/health", c.hdr).decode(t, &h)
		if h.RuntimeID != "" || h.Members != nil || h.Mode != "distributed" || h.Sources.Standby != 1 {
			t.Fatalf("GET /health (key configured: %v, headers %v) = %+v: shows the runtime ids, or lacks the rest", c.opts.APIKey != "", c.hdr, h)
		}
	}
	var e Entry
	do(t, nil, "GET", ts.URL+"/sources/orders_cdc", map[string]string{"Authorization": "Bearer " + key}).decode(t, &e)
	if e.Status != status.Standby || e.Placement == nil || e.Placement.Owner != "rt-b" || e.Placement.Generation != 2 {
		t.Fatalf("entry = %+v (placement %+v)", e, e.Placement)
	}
}
