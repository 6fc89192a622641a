// Package faultproxy is an HTTP reverse proxy for tests that sits in front of
// a real server and injects faults: error statuses, connection resets and
// latency, for the next N requests or for every request matching a filter.
// It counts and records every request it sees.
//
// It knows nothing about the protocol spoken behind it beyond HTTP.
package faultproxy

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"
)

// Fault is what happens to one request.
type Fault struct {
	// Status, when non-zero, answers the request with this status instead
	// of forwarding it.
	Status int
	// Header and Body go with Status.
	Header http.Header
	Body   []byte
	// Reset reads the request and then resets the TCP connection (RST),
	// without an answer.
	Reset bool
	// Delay waits this long before the request is forwarded or answered.
	Delay time.Duration
}

// Entry is one request the proxy saw.
type Entry struct {
	Method string
	Path   string
	// Status is the status the client got: the injected one, the
	// server's, or 0 for a reset or a failed forward.
	Status int
	// Injected is true when a fault was applied.
	Injected bool
}

type rule struct {
	match     func(*http.Request) bool
	remaining int // < 0: forever
	fault     Fault
}

// Proxy is a running fault-injecting reverse proxy.
type Proxy struct {
	// URL is the proxy's base URL, such as http://127.0.0.1:40123.
	URL string
	// Addr is the host:port the proxy listens on.
	Addr string

	target *url.URL
	rp     *httputil.ReverseProxy
	srv    *http.Server
	ln     net.Listener

	mu      sync.Mutex
	rules   []*rule
	latency time.Duration
	log     []Entry
}

// New starts a proxy on 127.0.0.1 at a free port in front of target, a base
// URL such as http://127.0.0.1:7070.
func New(target string) (*Proxy, error) {
	u, err := url.Parse(target)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("faultproxy: target %q is not an absolute URL", target)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(), target: u, ln: ln}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(u)
			// Keep the Host the client signed: S3 and others sign it.
			r.Out.Host = r.In.Host
		},
		ErrorLog: nil,
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	p.srv = &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Start starts a proxy in front of target and closes it with t.Cleanup.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// Inject applies f to the next n requests. Faults queue in the order they
// were injected.
func (p *Proxy) Inject(n int, f Fault) {
	p.InjectMatching(nil, n, f)
}

// InjectMatching applies f to the next n requests for which match returns
// true; n < 0 means every matching request until Clear. A nil match matches
// every request.
func (p *Proxy) InjectMatching(match func(*http.Request) bool, n int, f Fault) {
	if n == 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &rule{match: match, remaining: n, fault: f})
}

// FailNext answers the next n requests with status.
func (p *Proxy) FailNext(n, status int) { p.Inject(n, Fault{Status: status}) }

// ResetNext resets the connection of the next n requests.
func (p *Proxy) ResetNext(n int) { p.Inject(n, Fault{Reset: true}) }

// SetLatency delays every forwarded request by d, on top of any fault.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// Clear drops every pending fault and the latency.
func (p *Proxy) Clear() {
	p.mu.Lock()
	p.rules = nil
	p.latency = 0
	p.mu.Unlock()
}

// Requests returns how many requests the proxy has seen.
func (p *Proxy) Requests() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.log)
}

// Count returns how many requests with this method the proxy has seen.
func (p *Proxy) Count(method string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.log {
		if e.Method == method {
			n++
		}
	}
	return n
}

// Log returns a copy of every request seen so far, in arrival order.
func (p *Proxy) Log() []Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Entry(nil), p.log...)
}

// ResetLog forgets the requests seen so far.
func (p *Proxy) ResetLog() {
	p.mu.Lock()
	p.log = nil
	p.mu.Unlock()
}

// Close stops the proxy and drops its connections.
func (p *Proxy) Close() error {
	return p.srv.Close()
}

// next picks the fault for r, if any, and records the request. It returns
// the index of the log entry.
func (p *Proxy) next(r *http.Request) (Fault, bool, time.Duration, int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var f Fault
	found := false
	for i, ru := range p.rules {
		if ru.match != nil && !ru.match(r) {
			continue
		}
		f, found = ru.fault, true
		if ru.remaining > 0 {
			ru.remaining--
			if ru.remaining == 0 {
				p.rules = append(p.rules[:i:i], p.rules[i+1:]...)
			}
		}
		break
	}
	p.log = append(p.log, Entry{Method: r.Method, Path: r.URL.Path, Injected: found})
	return f, found, p.latency, len(p.log) - 1
}

func (p *Proxy) setStatus(i, status int) {
	p.mu.Lock()
	if i < len(p.log) {
		p.log[i].Status = status
	}
	p.mu.Unlock()
}

func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	f, found, latency, idx := p.next(r)
	if d := f.Delay + latency; d > 0 {
		select {
		case <-time.After(d):
		case <-r.Context().Done():
			return
		}
	}
	if found && f.Reset {
		_, _ = io.Copy(io.Discard, r.Body)
		if err := reset(w); err != nil {
			panic(http.ErrAbortHandler) // close the connection without an answer
		}
		return
	}
	if found && f.Status != 0 {
		_, _ = io.Copy(io.Discard, r.Body)
		for k, vs := range f.Header {
			for _, v := range vs {
				w.Header().Add(k, v)
			}
		}
		if len(f.Body) > 0 {
			w.Header().Set("Content-Length", fmt.Sprint(len(f.Body)))
		}
		w.WriteHeader(f.Status)
		_, _ = w.Write(f.Body)
		p.setStatus(idx, f.Status)
		return
	}
	sw := &statusWriter{ResponseWriter: w}
	p.rp.ServeHTTP(sw, r)
	p.setStatus(idx, sw.status)
}

// reset hijacks the connection and closes it with SO_LINGER 0, so the
// client sees a connection reset.
func reset(w http.ResponseWriter) error {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return errors.New("faultproxy: connection cannot be hijacked")
	}
	conn, _, err := hj.Hijack()
	if err != nil {
		return err
	}
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	return conn.Close()
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

// Flush lets streamed answers through.
func (s *statusWriter) Flush() {
	if f, ok := s.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
