package state

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestHTTPRedirectIsAFailedSave: a state service that answers a PUT with
// 302 gets no GET replayed to the redirect's target, and the save fails.
// Before, the client followed the 302 as a GET, counted its 200 as a save
// and stored nothing (five "saves" in a row were lost).
func TestHTTPRedirectIsAFailedSave(t *testing.T) {
	var followed atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/elsewhere" {
			followed.Add(1)
			w.WriteHeader(http.StatusOK)
			return
		}
		http.Redirect(w, r, "/elsewhere?token=CANARY", http.StatusFound)
	}))
	defer srv.Close()
	st := newHTTPStore(t, srv, &bytes.Buffer{})
	err := st.Save(context.Background(), "src", []byte(`{"next":1}`))
	if err == nil {
		t.Fatal("a save answered with 302 succeeded")
	}
	if !strings.Contains(err.Error(), "302") || !strings.Contains(err.Error(), "never followed") || strings.Contains(err.Error(), "CANARY") {
		t.Fatalf("the failed save says %q: want the 302, that redirects are not followed, and no token", err)
	}
	if _, err := st.Load(context.Background(), "src"); err == nil {
		t.Fatal("a load answered with 302 succeeded")
	}
	if n := followed.Load(); n != 0 {
		t.Fatalf("the store followed the redirect %d times", n)
	}
}

// TestHTTPLoadBodyCapped: a body above MaxHTTPStateSize is refused without
// being read whole.
func TestHTTPLoadBodyCapped(t *testing.T) {
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for i := 0; i < 64; i++ { // 4 MiB
			n, err := w.Write(chunk)
			sent.Add(int64(n))
			if err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	st := newHTTPStore(t, srv, &bytes.Buffer{})
	blob, err := st.Load(context.Background(), "src")
	if err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Load of a 4 MiB body = %d bytes, %v; want a refusal", len(blob), err)
	}
}

// TestHTTPBearerOverPlainHTTPWarns: a bearer token sent over http:// to a
// host beyond loopback is named at start; over loopback or https, not.
func TestHTTPBearerOverPlainHTTPWarns(t *testing.T) {
	for _, c := range []struct {
		url  string
		warn bool
	}{{"http://state.example:8080/s", true}, {"http://10.1.2.3/s", true}, {"https://state.example/s", false}, {"http://127.0.0.1:9/s", false}, {"http://localhost/s", false}} {
		var logs bytes.Buffer
		if _, err := NewHTTPStore(HTTPConfig{URL: c.url, APIKey: "sekrit-token-123", Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(logs.String(), "plain http"); got != c.warn {
			t.Errorf("%s: warned %v, want %v (logs: %s)", c.url, got, c.warn, logs.String())
		}
		if strings.Contains(logs.String(), "sekrit") {
			t.Errorf("%s: the token is in the log: %s", c.url, logs.String())
		}
	}
	var logs bytes.Buffer
	if _, err := NewHTTPStore(HTTPConfig{URL: "http://state.example/s", Logger: slog.New(slog.NewTextHandler(&logs, nil))}); err != nil || logs.Len() > 0 {
		t.Fatalf("no token, no warning: %v %s", err, logs.String())
	}
}

// TestHTTPURLSecretsNeverShown: a token in state.http.url, as the user
// name or a query value, appears in no error of the store.
func TestHTTPURLSecretsNeverShown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "nope", http.StatusForbidden)
	}))
	defer srv.Close()
	for _, u := range []string{
		strings.Replace(srv.URL, "http://", "http://tok-CANARY@", 1) + "/s",
		srv.URL + "/s?access_token=CANARY",
		"http://u:pw-CANARY@127.0.0.1:1/s", // nothing listens: a transport error
	} {
		var logs bytes.Buffer
		st, err := NewHTTPStore(HTTPConfig{URL: u, MaxAttempts: 2, RetryDelay: time.Millisecond, Timeout: time.Second, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err != nil {
			t.Fatal(err)
		}
		err = st.Save(context.Background(), "src", []byte("{}"))
		if err == nil {
			t.Fatalf("%s: the save succeeded", u)
		}
		if strings.Contains(err.Error(), "CANARY") || strings.Contains(logs.String(), "CANARY") {
			t.Errorf("the secret of %s shows:\nerror: %v\nlogs: %s", u, err, logs.String())
		}
	}
}
