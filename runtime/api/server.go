// Package api serves the operator HTTP API of pico-connectors: health, the
// status of every source and sink, their effective (redacted) definitions,
// restarts, and the Prometheus metrics.
//
// Routes (README.md documents every JSON field):
//
//	GET  /health                  liveness and a summary; never needs the API key
//	GET  /ready                   readiness: 200 when every enabled connector is
//	                              Running or Standby, else 503; never needs the API key
//	GET  /sources                 every source's Entry, sorted by key
//	GET  /sources/{key}           one source's Entry
//	GET  /sources/{key}/config    its effective definition, secrets masked
//	POST /sources/{key}/restart   restart it; answers with the new Entry
//	POST /sources/{key}/snapshot  {"tables":["public.t"]}: a snapshot on demand of the running source (202, its Entry)
//	GET  /sinks, /sinks/{key}, /sinks/{key}/config, POST /sinks/{key}/restart
//	GET  /metrics                 Prometheus exposition
//
// With an API key configured, every route but /health and /ready needs
// it, sent as "Authorization: Bearer KEY" or "api-key: KEY". Errors are
// JSON objects {"error": "..."} with a matching status code.
package api

import (
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/runtime/status"
)

// DefaultAddress is where the API listens when the runtime config names
// no address.
const DefaultAddress = "127.0.0.1:8081"

// Options configure a Server. The fields mirror the runtime config's
// [http] table.
type Options struct {
	// Address is the listen address; empty means DefaultAddress.
	Address string
	// APIKey, when not empty, is required on every route but /health and
	// /ready.
	APIKey string
	// TLSCert and TLSKey are PEM files; with both set the API serves
	// HTTPS. Setting only one is an error.
	TLSCert string
	TLSKey  string
	// AllowedHosts are further names a request's Host may carry, besides
	// an IP address, localhost and the host of Address (see guard).
	AllowedHosts []string
	// Metrics serves /metrics; nil answers 404.
	Metrics http.Handler
	// Logger receives the start-up line and warnings; nil means
	// slog.Default().
	Logger *slog.Logger
}

// Server is the HTTP API.
type Server struct {
	conns   Connectors
	opts    Options
	log     *slog.Logger
	keyHash [sha256.Size]byte
	handler http.Handler

	srv *http.Server
	ln  net.Listener
}

// New returns a server over conns. It checks the TLS options; it does not
// listen yet.
func New(conns Connectors, opts Options) (*Server, error) {
	if opts.Address == "" {
		opts.Address = DefaultAddress
	}
	if (opts.TLSCert == "") != (opts.TLSKey == "") {
		return nil, errors.New("http: tls_cert and tls_key must be set together (PICOMQ_CONNECTORS_HTTP_TLS_CERT, PICOMQ_CONNECTORS_HTTP_TLS_KEY)")
	}
	s := &Server{conns: conns, opts: opts, log: opts.Logger}
	if s.log == nil {
		s.log = slog.Default()
	}
	if opts.APIKey != "" {
		s.keyHash = sha256.Sum256([]byte(opts.APIKey))
	}
	s.handler = s.routes()
	return s, nil
}

// Handler returns the API's handler, with authentication applied.
func (s *Server) Handler() http.Handler { return s.handler }

// Start listens on the configured address and serves in the background.
// It logs the address, and warns when no API key protects an address
// other than loopback.
func (s *Server) Start() error {
	var tlsCfg *tls.Config
	if s.opts.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(s.opts.TLSCert, s.opts.TLSKey)
		if err != nil {
			return fmt.Errorf("http: loading tls_cert %q and tls_key %q: %w", s.opts.TLSCert, s.opts.TLSKey, err)
		}
		tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", s.opts.Address)
	if err != nil {
		return fmt.Errorf("http: listening on address %q: %w", s.opts.Address, err)
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	s.ln = ln
	s.srv = &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	scheme := "http"
	if tlsCfg != nil {
		scheme = "https"
	}
	s.log.Info("http api listening", "address", ln.Addr().String(), "scheme", scheme, "auth", s.opts.APIKey != "")
	s.warnIfExposed()
	go func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http api stopped", "error", err)
		}
	}()
	return nil
}

// warnIfExposed logs a warning when no API key protects an address other
// than loopback.
func (s *Server) warnIfExposed() {
	if s.opts.APIKey == "" && !IsLoopback(s.opts.Address) {
		s.log.Warn("http api has no api_key and listens beyond loopback: anyone who can reach it can read status and restart connectors; set http.api_key or PICOMQ_CONNECTORS_HTTP_API_KEY", "address", s.opts.Address)
	}
}

// Addr returns the address the server listens on, once started.
func (s *Server) Addr() string {
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops accepting requests and waits for those in flight, until
// ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	if s.srv == nil {
		return nil
	}
	return s.srv.Shutdown(ctx)
}

// IsLoopback reports whether a listen address only accepts local
// connections: a loopback IP or "localhost". An empty host (all
// interfaces) is not loopback.
func IsLoopback(address string) bool {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

func (s *Server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/health", only(http.MethodGet, s.health))
	mux.HandleFunc("/ready", only(http.MethodGet, s.ready))
	for _, k := range []struct{ kind, plural string }{{KindSource, "sources"}, {KindSink, "sinks"}} {
		mux.HandleFunc("/"+k.plural, only(http.MethodGet, s.list(k.kind, k.plural)))
		mux.HandleFunc("/"+k.plural+"/{key}", only(http.MethodGet, s.get(k.kind)))
		mux.HandleFunc("/"+k.plural+"/{key}/config", only(http.MethodGet, s.config(k.kind)))
		mux.HandleFunc("/"+k.plural+"/{key}/restart", only(http.MethodPost, s.restart(k.kind)))
	}
	mux.HandleFunc("/sources/{key}/snapshot", only(http.MethodPost, s.snapshot))
	mux.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) {
		if s.opts.Metrics == nil {
			writeError(w, http.StatusNotFound, "metrics are not enabled")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			methodNotAllowed(w, http.MethodGet)
			return
		}
		s.opts.Metrics.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, fmt.Sprintf("no route %s %s", r.Method, r.URL.Path))
	})
	return s.guard(s.auth(mux))
}

// auth requires the API key, when one is configured, on every route but
// the probes, /health and /ready. Both sides are hashed first so the
// comparison takes the same time whatever the length of the key sent.
func (s *Server) auth(next http.Handler) http.Handler {
	if s.opts.APIKey == "" {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" || r.URL.Path == "/ready" {
			next.ServeHTTP(w, r)
			return
		}
		if !s.keyMatches(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="pico-connectors"`)
			writeError(w, http.StatusUnauthorized, "missing or wrong API key: send Authorization: Bearer <key> or api-key: <key>")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// keyMatches reports whether r carries the configured API key.
func (s *Server) keyMatches(r *http.Request) bool {
	sent, ok := presentedKey(r)
	if !ok {
		return false
	}
	h := sha256.Sum256([]byte(sent))
	return subtle.ConstantTimeCompare(h[:], s.keyHash[:]) == 1
}

func presentedKey(r *http.Request) (string, bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, token, found := strings.Cut(h, " ")
		if found && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(token), true
		}
	}
	if h := r.Header.Get("api-key"); h != "" {
		return h, true
	}
	return "", false
}

// Health is the body of GET /health.
type Health struct {
	// Status is "ok" when no connector is in status Error, else
	// "degraded". The code is 200 either way: the process is alive.
	Status  string `json:"status"`
	Sources Count  `json:"sources"`
	Sinks   Count  `json:"sinks"`
	// RuntimeID, Mode and Members come from a Connectors that implements
	// Fleet; RuntimeID and Members only for a request with the API key.
	RuntimeID string   `json:"runtime_id,omitempty"`
	Mode      string   `json:"mode,omitempty"`
	Members   []string `json:"members,omitempty"`
}

// Count summarises the connectors of one kind.
type Count struct {
	Total   int `json:"total"`
	Running int `json:"running"`
	Error   int `json:"error"`
	// Standby counts sources another runtime of the fleet runs.
	Standby int `json:"standby,omitempty"`
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	h := Health{Status: "ok", Sources: count(s.conns.List(KindSource)), Sinks: count(s.conns.List(KindSink))}
	if h.Sources.Error+h.Sinks.Error > 0 {
		h.Status = "degraded"
	}
	if f, ok := s.conns.(Fleet); ok {
		m := f.Membership()
		h.Mode = m.Mode
		// The ids name the fleet's consumer group members: with one, a
		// stranger could join a lease group as this runtime and fence it.
		// Only a caller with the API key sees them.
		if s.opts.APIKey != "" && s.keyMatches(r) {
			h.RuntimeID, h.Members = m.RuntimeID, m.Members
		}
	}
	writeJSON(w, http.StatusOK, h)
}

// Readiness is the body of GET /ready.
type Readiness struct {
	// Status is "ready" (code 200) when every enabled connector is
	// Running or Standby, else "not_ready" (code 503).
	Status string `json:"status"`
	// NotReady lists the enabled connectors that are neither, sorted by
	// type and key; omitted when ready. It names them and their status
	// only: /ready needs no API key, so it shows no error text.
	NotReady []NotReady `json:"not_ready,omitempty"`
}

// NotReady is an enabled connector that holds a runtime back from ready.
type NotReady struct {
	// Type is "source" or "sink".
	Type string `json:"type"`
	// Key is the connector's key from its definition file.
	Key string `json:"key"`
	// Status is its status: Starting, Stopping, Stopped or Error.
	Status status.Status `json:"status"`
}

// ready answers 200 when every enabled connector is Running or Standby
// (another runtime of the fleet runs the source), else 503 with the ones
// that are not: a readiness probe then holds traffic and rollouts back
// while a connector is Starting or in Error.
func (s *Server) ready(w http.ResponseWriter, r *http.Request) {
	rd := Readiness{Status: "ready"}
	for _, kind := range []string{KindSink, KindSource} {
		for _, e := range s.conns.List(kind) {
			if e.Enabled && e.Status != status.Running && e.Status != status.Standby {
				rd.NotReady = append(rd.NotReady, NotReady{Type: kind, Key: e.Key, Status: e.Status})
			}
		}
	}
	if len(rd.NotReady) == 0 {
		writeJSON(w, http.StatusOK, rd)
		return
	}
	slices.SortFunc(rd.NotReady, func(a, b NotReady) int {
		return cmp.Or(strings.Compare(a.Type, b.Type), strings.Compare(a.Key, b.Key))
	})
	rd.Status = "not_ready"
	writeJSON(w, http.StatusServiceUnavailable, rd)
}

func count(es []Entry) Count {
	c := Count{Total: len(es)}
	for _, e := range es {
		switch e.Status {
		case "Running":
			c.Running++
		case "Error":
			c.Error++
		case status.Standby:
			c.Standby++
		}
	}
	return c
}

func (s *Server) list(kind, plural string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		es := s.conns.List(kind)
		if es == nil {
			es = []Entry{}
		}
		slices.SortFunc(es, func(a, b Entry) int { return strings.Compare(a.Key, b.Key) })
		writeJSON(w, http.StatusOK, es)
	}
}

func (s *Server) get(kind string) http.HandlerFunc { return serveFound(kind, s.conns.Get) }

func (s *Server) config(kind string) http.HandlerFunc { return serveFound(kind, s.conns.Config) }

// serveFound writes what find returns for the connector the path's key
// names, or 404 when there is none.
func serveFound[T any](kind string, find func(kind, key string) (T, bool)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		v, ok := find(kind, key)
		if !ok {
			notFound(w, kind, key)
			return
		}
		writeJSON(w, http.StatusOK, v)
	}
}

func (s *Server) restart(kind string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		if _, ok := s.conns.Get(kind, key); !ok {
			notFound(w, kind, key)
			return
		}
		// A restart, once begun, finishes even if the client goes away:
		// abandoning it half-way would leave the connector stopped.
		err := s.conns.Restart(context.WithoutCancel(r.Context()), kind, key)
		switch {
		case errors.Is(err, ErrNotFound):
			notFound(w, kind, key)
			return
		case errors.Is(err, ErrDisabled):
			writeError(w, http.StatusConflict, fmt.Sprintf("%s %q is disabled; enable it in its definition file", kind, key))
			return
		case err != nil:
			s.log.Warn("restart failed", "type", kind, "key", key, "error", err)
			writeError(w, http.StatusInternalServerError, fmt.Sprintf("restarting %s %q: %v", kind, key, err))
			return
		}
		s.log.Info("restarted through the api", "type", kind, "key", key)
		e, ok := s.conns.Get(kind, key)
		if !ok {
			notFound(w, kind, key)
			return
		}
		writeJSON(w, http.StatusOK, e)
	}
}

// SnapshotRequest is the body of POST /sources/{key}/snapshot.
type SnapshotRequest struct {
	// Tables are the collections to read again, as the source's
	// configuration names them (for the Postgres source, schema.table).
	Tables []string `json:"tables"`
}

func (s *Server) snapshot(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	sn, ok := s.conns.(Snapshotter)
	if _, found := s.conns.Get(KindSource, key); !found {
		notFound(w, KindSource, key)
		return
	}
	if !ok {
		writeError(w, http.StatusNotImplemented, "this runtime takes no snapshots on demand")
		return
	}
	var req SnapshotRequest
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || len(req.Tables) == 0 {
		writeError(w, http.StatusBadRequest, `the body must be {"tables":["schema.table", ...]} with at least one table`)
		return
	}
	err := sn.Snapshot(r.Context(), key, req.Tables)
	switch {
	case errors.Is(err, ErrNotFound):
		notFound(w, KindSource, key)
		return
	case errors.Is(err, ErrNotRunning):
		e, _ := s.conns.Get(KindSource, key)
		writeError(w, http.StatusConflict, fmt.Sprintf("source %q takes no snapshot now: it is not open on this runtime (status %s) or takes no snapshots on demand", key, e.Status))
		return
	case err != nil:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("snapshot of source %q: %v", key, err))
		return
	}
	s.log.Info("snapshot requested through the api", "key", key, "tables", req.Tables)
	e, _ := s.conns.Get(KindSource, key)
	writeJSON(w, http.StatusAccepted, e)
}

func only(method string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
			methodNotAllowed(w, method)
			return
		}
		h(w, r)
	}
}

func methodNotAllowed(w http.ResponseWriter, allowed string) {
	if allowed == http.MethodGet {
		allowed = "GET, HEAD"
	}
	w.Header().Set("Allow", allowed)
	writeError(w, http.StatusMethodNotAllowed, "method not allowed; use "+allowed)
}

func notFound(w http.ResponseWriter, kind, key string) {
	writeError(w, http.StatusNotFound, fmt.Sprintf("no %s with key %q", kind, key))
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, Error{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
