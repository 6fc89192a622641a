package state

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// stateServer is a real HTTP state endpoint that keeps blobs in memory and
// fails the first failures requests with a status.
type stateServer struct {
	mu       sync.Mutex
	blobs    map[string][]byte
	failures int
	failWith int
	requests []seen
}

type seen struct {
	method, path, idem, auth string
	body                     []byte
}

func (s *stateServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, seen{r.Method, r.URL.Path, r.Header.Get("Idempotency-Key"), r.Header.Get("Authorization"), body})
	if s.failures > 0 {
		s.failures--
		http.Error(w, "try later", s.failWith)
		return
	}
	key := strings.TrimPrefix(r.URL.Path, "/state/")
	switch r.Method {
	case http.MethodGet:
		b, ok := s.blobs[key]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Write(b)
	case http.MethodPut:
		s.blobs[key] = body
		w.WriteHeader(http.StatusNoContent)
	}
}

func (s *stateServer) fail(n, status int) {
	s.mu.Lock()
	s.failures, s.failWith = n, status
	s.mu.Unlock()
}

func (s *stateServer) take() []seen {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requests
	s.requests = nil
	return r
}

func newHTTPStore(t *testing.T, srv *httptest.Server, logs io.Writer) *HTTPStore {
	t.Helper()
	st, err := NewHTTPStore(HTTPConfig{
		URL: srv.URL + "/state", MaxAttempts: 4, RetryDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond,
		APIKey: "sekrit-token-123", Logger: slog.New(slog.NewTextHandler(logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func TestHTTPStoreRetriesAndIdempotencyKeys(t *testing.T) {
	ss := &stateServer{blobs: map[string][]byte{}}
	srv := httptest.NewServer(ss)
	defer srv.Close()
	var logs bytes.Buffer
	st := newHTTPStore(t, srv, &logs)
	ctx := context.Background()

	if b, err := st.Load(ctx, "gen"); err != nil || b != nil {
		t.Fatalf("404 must mean no state: %q %v", b, err)
	}
	ss.take()

	// First save: two 503s, then the server recovers.
	ss.fail(2, http.StatusServiceUnavailable)
	if err := st.Save(ctx, "gen", []byte("s1")); err != nil {
		t.Fatalf("save after recovery: %v", err)
	}
	first := ss.take()
	if len(first) != 3 {
		t.Fatalf("attempts = %d, want 3", len(first))
	}
	for _, r := range first {
		if r.method != http.MethodPut || r.path != "/state/gen" || string(r.body) != "s1" || r.auth != "Bearer sekrit-token-123" {
			t.Fatalf("request = %+v", r)
		}
		if r.idem == "" || r.idem != first[0].idem {
			t.Fatalf("Idempotency-Key changed across retries of one write: %q vs %q", r.idem, first[0].idem)
		}
	}

	// Second save: one 429, then success; a new key.
	ss.fail(1, http.StatusTooManyRequests)
	if err := st.Save(ctx, "gen", []byte("s2")); err != nil {
		t.Fatal(err)
	}
	second := ss.take()
	if len(second) != 2 || second[0].idem != second[1].idem {
		t.Fatalf("second write requests = %+v", second)
	}
	if second[0].idem == first[0].idem {
		t.Fatal("two writes share an Idempotency-Key")
	}

	// Load retries a 500 and returns what was saved.
	ss.fail(1, http.StatusInternalServerError)
	if b, err := st.Load(ctx, "gen"); err != nil || string(b) != "s2" {
		t.Fatalf("Load = %q, %v", b, err)
	}

	// A 400 is not retried.
	ss.take()
	ss.fail(1, http.StatusBadRequest)
	if err := st.Save(ctx, "gen", []byte("s3")); err == nil || !strings.Contains(err.Error(), "400") {
		t.Fatalf("err = %v", err)
	}
	if n := len(ss.take()); n != 1 {
		t.Fatalf("400 attempted %d times", n)
	}

	// Giving up after MaxAttempts keeps the error and never the token.
	ss.fail(10, http.StatusBadGateway)
	err := st.Save(ctx, "gen", []byte("s4"))
	if err == nil || !strings.Contains(err.Error(), "502") {
		t.Fatalf("err = %v", err)
	}
	if n := len(ss.take()); n != 4 {
		t.Fatalf("attempts = %d, want 4", n)
	}
	if strings.Contains(err.Error(), "sekrit") || strings.Contains(logs.String(), "sekrit") {
		t.Fatal("api key leaked into an error or a log line")
	}
	if !strings.Contains(logs.String(), "retrying") {
		t.Fatalf("no retry logged: %s", logs.String())
	}
}

// A server that is down (connection refused) is retried until the context
// ends; the error names the URL without its password.
func TestHTTPStoreDownAndCancelled(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	st, err := NewHTTPStore(HTTPConfig{URL: strings.Replace(url, "http://", "http://user:pw-secret@", 1), MaxAttempts: 100, RetryDelay: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	err = st.Save(ctx, "gen", []byte("x"))
	if err == nil {
		t.Fatal("save to a closed server succeeded")
	}
	if strings.Contains(err.Error(), "pw-secret") {
		t.Fatalf("password in error: %v", err)
	}
	if _, err := NewHTTPStore(HTTPConfig{URL: "ftp://x"}); err == nil {
		t.Fatal("ftp URL accepted")
	}
}
