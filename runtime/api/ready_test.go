package api_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/status"
)

// archiveSink is the definition file of an S3 sink with the key "archive"
// over the topics pattern matches, writing to the bucket of s3 through
// endpoint (the server's own, or a proxy in front of it), a file every
// max_messages_per_file records. topics and plugin are further lines of its
// [[topics]] block and its plugin_config. Its secret key is not in the file:
// set PICOMQ_CONNECTORS_SINK_ARCHIVE_PLUGIN_CONFIG_SECRET_ACCESS_KEY.
func archiveSink(s3 *s3test.Server, endpoint, pattern, topics, plugin string) string {
	return fmt.Sprintf(`
type = "sink"
key = "archive"
enabled = true
path = "libpicomq_connector_s3_sink"
[[topics]]
pattern = '%s'
poll_interval = "50ms"
%s
[plugin_config]
bucket = %q
region = %q
endpoint = %q
access_key_id = %q
file_rotation = "messages"
%s`, pattern, topics, s3.Bucket, s3test.Region, endpoint, s3.AccessKey, plugin)
}

// waitReady polls GET /ready until it answers code and cond holds for its
// body, failing after a minute. /ready needs no API key, so it is asked
// without one.
func (rt *runtimeUnderTest) waitReady(t *testing.T, code int, what string, cond func(api.Readiness) bool) api.Readiness {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(rt.url + "/ready")
		if err != nil {
			t.Fatal(err)
		}
		var rd api.Readiness
		err = json.NewDecoder(resp.Body).Decode(&rd)
		resp.Body.Close()
		if err != nil {
			t.Fatalf("GET /ready: %v", err)
		}
		if resp.StatusCode == code && cond(rd) {
			return rd
		}
		if time.Now().After(deadline) {
			t.Fatalf("/ready never became %s; last %d %+v\nlogs:\n%s", what, resp.StatusCode, rd, rt.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestReadyFollowsS3Endpoint runs a random source into an S3 sink whose
// endpoint, a real S3 server behind the fault proxy, stops answering:
// /ready goes from 200 to 503 naming the sink in Error (and only it), and
// back to 200 once the endpoint answers again, while /health answers 200
// throughout. With an API key set, /ready still needs none.
func TestReadyFollowsS3Endpoint(t *testing.T) {
	s3 := s3test.Start(t)
	proxy := faultproxy.Start(t, s3.Endpoint)
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"runtime.toml": `
[broker]
embedded_address = "127.0.0.1:0"
[state]
path = "state"
`,
		"connectors/numbers.toml": `
type = "source"
key = "numbers"
path = "libpicomq_connector_random_source"
[[topics]]
topic = "ready.numbers"
create_topics = true
[plugin_config]
records_per_batch = 10
interval = "10ms"
payload_size = "16B"
`,
		"connectors/archive.toml": archiveSink(s3, proxy.URL, `^ready\..*`, "", `
max_messages_per_file = 20
max_attempts = 2
retry_delay = "10ms"
`),
	})
	rt := startRuntime(t, dir, map[string]string{
		"PICOMQ_CONNECTORS_SINK_ARCHIVE_PLUGIN_CONFIG_SECRET_ACCESS_KEY": s3.SecretKey,
	}, "api-key-for-tests")

	rt.waitEntry(t, "sink", "archive", "Running with commits", func(e api.Entry) bool {
		return e.Status == status.Running && e.Counters.Committed >= 40
	})
	rt.waitReady(t, http.StatusOK, "ready", func(rd api.Readiness) bool { return rd.Status == "ready" })

	// The endpoint fails every request: uploads fail, the sink goes to
	// Error and the runtime is not ready, for the sink alone.
	proxy.InjectMatching(nil, -1, faultproxy.Fault{Status: http.StatusServiceUnavailable,
		Header: http.Header{"Content-Type": {"application/xml"}},
		Body:   []byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>down</Message></Error>`)})
	rd := rt.waitReady(t, http.StatusServiceUnavailable, "not ready with a connector in Error", func(rd api.Readiness) bool {
		return len(rd.NotReady) > 0 && rd.NotReady[0].Status == status.Error
	})
	want := api.NotReady{Type: "sink", Key: "archive", Status: status.Error}
	if rd.Status != "not_ready" || len(rd.NotReady) != 1 || rd.NotReady[0] != want {
		t.Errorf("/ready with the S3 endpoint down = %+v, want not_ready with only %+v", rd, want)
	}
	if code, b := rt.do(t, "GET", "/health"); code != http.StatusOK {
		t.Errorf("/health with a sink in Error = %d %s, want 200 (liveness)", code, b)
	}

	// The endpoint answers again: the kept file lands, the sink is Running
	// and the runtime ready.
	proxy.Clear()
	rt.waitReady(t, http.StatusOK, "ready again", func(rd api.Readiness) bool { return rd.Status == "ready" && rd.NotReady == nil })
	rt.waitEntry(t, "sink", "archive", "Running", func(e api.Entry) bool { return e.Status == status.Running })
}
