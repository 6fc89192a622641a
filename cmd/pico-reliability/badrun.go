package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
)

// strangerOnEmbeddedBroker runs the random source on the runtime's own
// embedded broker, and a client without credentials tries to delete its
// topic and to commit offsets for a group: both fail, and the source keeps
// producing.
func (s *suite) strangerOnEmbeddedBroker() string {
	const topic = "bad.stranger"
	r := s.newRT("", "", map[string]string{"numbers.toml": randomDef("numbers", topic, 10, "20ms")})
	addr := r.Addr
	must(r.Run())
	defer r.Term(30 * time.Second)
	if _, ok := r.WaitEntry("source", "numbers", 60*time.Second, func(e fleet.Entry) bool { return e.Counters.Produced > 0 }); !ok {
		return "the source produced nothing:\n" + r.Tail()
	}
	// A stranger: no login.
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RequestRetries(0), kgo.RetryTimeout(2*time.Second))
	if err != nil {
		return err.Error()
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if res, err := adm.DeleteTopics(ctx, topic); err == nil && res[topic].Err == nil {
		return "a client without credentials deleted the source's topic"
	}
	if res, err := adm.CommitOffsets(ctx, "pico-connectors-stranger", kadm.Offsets{topic: {0: {Topic: topic, At: 0}}}); err == nil && res.Ok() {
		return "a client without credentials committed a group's offsets"
	}
	before, _ := r.Entry("source", "numbers")
	if _, ok := r.WaitEntry("source", "numbers", 30*time.Second, func(e fleet.Entry) bool { return e.Counters.Produced > before.Counters.Produced }); !ok {
		return "the source stopped producing after the stranger's attempts:\n" + r.Tail()
	}
	return ""
}

// browserRequests sends the API what a web page could make a browser send:
// a cross-site text/plain POST to restart a connector, and a request with a
// foreign Host (DNS rebinding). Both are refused; a JSON POST restarts it.
func (s *suite) browserRequests() string {
	r := s.newRT("", "", map[string]string{"numbers.toml": randomDef("numbers", "bad.browser", 10, "20ms")})
	must(r.Run())
	defer r.Term(30 * time.Second)
	send := func(host string, hdr map[string]string) (int, error) {
		req, err := http.NewRequest(http.MethodPost, "http://"+r.API+"/sources/numbers/restart", strings.NewReader("x=1"))
		if err != nil {
			return 0, err
		}
		if host != "" {
			req.Host = host
		}
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			return 0, err
		}
		resp.Body.Close()
		return resp.StatusCode, nil
	}
	for _, c := range []struct {
		name string
		host string
		hdr  map[string]string
		want int
	}{
		{"a cross-site text/plain POST", "", map[string]string{"Content-Type": "text/plain", "Origin": "https://evil.example"}, 403},
		{"a rebound Host", "evil.example:80", map[string]string{"Content-Type": "application/json"}, 421},
		{"a JSON POST", "", map[string]string{"Content-Type": "application/json"}, 200},
	} {
		code, err := send(c.host, c.hdr)
		if err != nil || code != c.want {
			return fmt.Sprintf("%s: %d (%v), want %d", c.name, code, err, c.want)
		}
	}
	return ""
}

// redirectingStateStore points state.http.url at a server that answers
// every request with 302: no checkpoint counts as saved, the source shows
// Error saying the redirect is not followed, and the runtime keeps running.
func (s *suite) redirectingStateStore() string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/elsewhere?token=CANARY", http.StatusFound)
	}))
	defer srv.Close()
	r := s.newRT("", fmt.Sprintf("[state]\nstorage = \"http\"\n[state.http]\nurl = %q\nmax_attempts = 1\n", srv.URL+"/state"),
		map[string]string{"numbers.toml": randomDef("numbers", "bad.redirect", 10, "20ms")})
	must(r.Run())
	defer r.Term(30 * time.Second)
	e, ok := r.WaitEntry("source", "numbers", 60*time.Second, func(e fleet.Entry) bool { return strings.Contains(e.LastError, "never followed") })
	switch {
	case !ok:
		return fmt.Sprintf("no error about the redirect (status %s, last error %q)", e.Status, e.LastError)
	case e.Counters.StateSaves != 0:
		return fmt.Sprintf("%d checkpoints counted as saved behind a 302", e.Counters.StateSaves)
	case strings.Contains(r.Output(), "CANARY") || strings.Contains(e.LastError, "CANARY"):
		return "the redirect's token shows in the log or the status"
	case !r.Alive():
		return "the runtime exited"
	}
	return ""
}
