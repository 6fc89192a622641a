package faultproxy

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"
)

func backend(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("X-Host", r.Host)
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(b))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, c *http.Client, url string) (int, string, error) {
	t.Helper()
	resp, err := c.Post(url, "text/plain", strings.NewReader("body"))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), nil
}

func TestStatusesThenForward(t *testing.T) {
	srv := backend(t)
	p := Start(t, srv.URL)
	for _, st := range []int{503, 500, 429, 408, 403} {
		p.FailNext(1, st)
	}
	p.Inject(1, Fault{Status: 503, Body: []byte("<Error/>"), Header: http.Header{"Retry-After": {"1"}}})
	want := []int{503, 500, 429, 408, 403, 503, 200, 200}
	for i, w := range want {
		code, body, err := get(t, http.DefaultClient, p.URL+"/x/y")
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if code != w {
			t.Fatalf("request %d: status %d, want %d", i, code, w)
		}
		if i == 5 && body != "<Error/>" {
			t.Fatalf("injected body = %q", body)
		}
		if w == 200 && body != "POST /x/y body" {
			t.Fatalf("forwarded body = %q", body)
		}
	}
	if p.Requests() != len(want) || p.Count("POST") != len(want) || p.Count("GET") != 0 {
		t.Fatalf("requests %d", p.Requests())
	}
	log := p.Log()
	if !log[0].Injected || log[0].Status != 503 || log[6].Injected || log[6].Status != 200 || log[6].Path != "/x/y" {
		t.Fatalf("log = %+v", log)
	}
}

func TestReset(t *testing.T) {
	srv := backend(t)
	p := Start(t, srv.URL)
	p.ResetNext(1)
	c := &http.Client{Transport: &http.Transport{}}
	_, _, err := get(t, c, p.URL+"/r")
	if err == nil {
		t.Fatal("want an error from a reset connection")
	}
	if !errors.Is(err, syscall.ECONNRESET) && !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("error = %v, want a connection reset", err)
	}
	if code, _, err := get(t, c, p.URL+"/r"); err != nil || code != 200 {
		t.Fatalf("after reset: %d %v", code, err)
	}
}

func TestMatchingAndLatency(t *testing.T) {
	srv := backend(t)
	p := Start(t, srv.URL)
	p.InjectMatching(func(r *http.Request) bool { return strings.HasSuffix(r.URL.Path, ".lost") }, -1, Fault{Status: 500})
	p.SetLatency(20 * time.Millisecond)
	for i := 0; i < 3; i++ {
		if code, _, _ := get(t, http.DefaultClient, p.URL+"/a.lost"); code != 500 {
			t.Fatalf("matching: %d", code)
		}
	}
	start := time.Now()
	if code, _, _ := get(t, http.DefaultClient, p.URL+"/a"); code != 200 {
		t.Fatalf("not matching: %d", code)
	}
	if time.Since(start) < 20*time.Millisecond {
		t.Fatal("latency not applied")
	}
	p.Clear()
	if code, _, _ := get(t, http.DefaultClient, p.URL+"/a.lost"); code != 200 {
		t.Fatalf("after Clear: %d", code)
	}
}

func TestBadTarget(t *testing.T) {
	if _, err := New("not a url"); err == nil {
		t.Fatal("want an error")
	}
}
