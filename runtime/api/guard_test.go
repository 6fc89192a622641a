package api

import (
	"net/http"
	"strings"
	"testing"
)

// TestBrowserProof: a cross-site text/plain POST, a foreign Origin and a
// foreign Host (DNS rebinding) are refused before they restart anything;
// the API's own origin, JSON POSTs and names in AllowedHosts pass. Before,
// the keyless API answered 200 to all of them.
func TestBrowserProof(t *testing.T) {
	ts := newServer(t, newTable(), Options{Address: "127.0.0.1:8081", AllowedHosts: []string{"connectors.internal"}})
	port := ts.URL[strings.LastIndexByte(ts.URL, ':'):]
	send := func(method, host string, hdr map[string]string) int {
		t.Helper()
		req, err := http.NewRequest(method, ts.URL+"/sinks/archive/restart", nil)
		if err != nil {
			t.Fatal(err)
		}
		if method == http.MethodGet {
			req.URL.Path = "/sinks/archive"
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		name   string
		method string
		host   string
		hdr    map[string]string
		want   int
	}{
		{"cross-site form, text/plain", "POST", "", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, 403},
		{"text/plain without Origin", "POST", "", map[string]string{"Content-Type": "text/plain"}, 415},
		{"no Content-Type, no Origin", "POST", "", nil, 415},
		{"foreign Origin with JSON", "POST", "", map[string]string{"Content-Type": "application/json", "Origin": "https://evil.example"}, 403},
		{"DNS rebinding: a foreign Host", "POST", "evil.example" + port, map[string]string{"Content-Type": "application/json"}, 421},
		{"DNS rebinding, GET", "GET", "evil.example" + port, nil, 421},
		{"JSON POST", "POST", "", map[string]string{"Content-Type": "application/json; charset=utf-8"}, 200},
		{"the API's own origin", "POST", "", map[string]string{"Content-Type": "text/plain", "Origin": ts.URL}, 200},
		{"localhost", "POST", "localhost" + port, map[string]string{"Content-Type": "application/json"}, 200},
		{"a name in allowed_hosts", "GET", "connectors.internal" + port, nil, 200},
	} {
		if got := send(c.method, c.host, c.hdr); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}
