package api_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// TestSIGTERMFlushesAndKeepsState runs a busy random source and a busy S3
// sink in a real pico-connectors process, sends SIGTERM, and checks that
// the process exits 0 within the grace period, that every record up to the
// source's saved checkpoint is on the topic (and none beyond the last
// acknowledged batch), and that the sink flushed on close: every offset it
// committed is in an object in the bucket, although its rotation threshold
// was never reached.
func TestSIGTERMFlushesAndKeepsState(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs pico-connectors with a broker and an S3 server; skipped with -short")
	}
	s3 := s3test.Start(t)
	bin := runtimebin.Build(t)
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const topic = "term.numbers"
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"runtime.toml": fmt.Sprintf(`
shutdown_grace = "30s"
[broker]
bootstrap_servers = %q
[http]
address = "127.0.0.1:0"
[state]
path = "state"
[log]
format = "json"
`, b.Addr()),
		"connectors/numbers.toml": fmt.Sprintf(`
type = "source"
key = "numbers"
enabled = true
path = "libpicomq_connector_random_source"
[[topics]]
topic = %q
create_topics = true
[plugin_config]
records_per_batch = 100
interval = "0s"
payload_size = "32B"
`, topic),
		"connectors/archive.toml": archiveSink(s3, s3.Endpoint, `^term\..*`, "batch_length = 500\n", `
max_messages_per_file = 1000000
output_format = "json_lines"
include_metadata = true
`),
	})
	p := startProcess(t, bin, filepath.Join(dir, "runtime.toml"),
		[]string{"PICOMQ_CONNECTORS_SINK_ARCHIVE_PLUGIN_CONFIG_SECRET_ACCESS_KEY=" + s3.SecretKey})
	c := &client{base: "http://" + p.apiAddress(t)}
	get := func(kind, key string) api.Entry {
		code, body := c.do(t, "GET", "/"+kind+"s/"+key)
		var e api.Entry
		if code != 200 || json.Unmarshal(body, &e) != nil {
			t.Fatalf("GET /%ss/%s = %d %s", kind, key, code, body)
		}
		return e
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		src, sink := get("source", "numbers"), get("sink", "archive")
		if src.Counters.StateSaves >= 10 && sink.Counters.Consumed >= 2000 && sink.Status == "Running" {
			t.Logf("busy: source %+v, sink %+v", src.Counters, sink.Counters)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not busy in time: source %+v, sink %+v\n%s", src, sink, p.out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The metrics show both connectors, their stages and the sink's own
	// metrics registered through sdk.Metrics.
	code, m := c.do(t, "GET", "/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics = %d", code)
	}
	for _, want := range []string{
		`picomq_connectors_sources_running{key="numbers",type="source"} 1`,
		`picomq_connectors_sinks_running{key="archive",type="sink"} 1`,
		`picomq_connectors_records_consumed_total{key="archive",type="sink"} `,
		`picomq_connectors_records_produced_total{key="numbers",type="source"} `,
		`picomq_connectors_stage_duration_seconds_count{key="archive",stage="consume",type="sink"} `,
		`picomq_connectors_stage_duration_seconds_count{key="numbers",stage="produce",type="source"} `,
		`picomq_connectors_s3_sink_records_buffered_total{key="archive",type="sink"} `,
		`picomq_connectors_s3_sink_open_files{key="archive",type="sink"} `,
	} {
		if !bytes.Contains(m, []byte("\n"+want)) {
			t.Errorf("metrics lack %q", want)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	before, err := s3.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(before) != 0 {
		t.Fatalf("objects before the stop, although rotation is at 1e6 messages: %v", before)
	}

	start := time.Now()
	p.stop(t, 40*time.Second)
	t.Logf("stopped in %s", time.Since(start).Round(time.Millisecond))

	// The source: the checkpoint covers exactly what reached the topic.
	blob, err := os.ReadFile(filepath.Join(dir, "state", "numbers.state"))
	if err != nil {
		t.Fatal(err)
	}
	var st struct {
		NextSeq int64 `json:"next_seq"`
	}
	if err := json.Unmarshal(blob, &st); err != nil {
		t.Fatalf("state %q: %v", blob, err)
	}
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	seqs := map[int64]bool{}
	var max int64 = -1
	for _, r := range recs {
		var v struct {
			Seq *int64 `json:"seq"`
		}
		if json.Unmarshal(r.Value, &v) != nil || v.Seq == nil {
			t.Fatalf("offset %d: no seq in %q", r.Offset, r.Value)
		}
		seqs[*v.Seq] = true
		if *v.Seq > max {
			max = *v.Seq
		}
	}
	for s := int64(0); s < st.NextSeq; s++ {
		if !seqs[s] {
			t.Fatalf("sequence %d is below the checkpoint %d but not on the topic", s, st.NextSeq)
		}
	}
	if max+1 != st.NextSeq {
		t.Errorf("checkpoint next_seq=%d but the topic holds up to %d: the last batch's state was not saved", st.NextSeq, max)
	}

	// The sink: every committed offset is in the bucket.
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, "pico-connectors-archive")
	if err != nil {
		t.Fatal(err)
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok || o.Err != nil || o.At <= 0 {
		t.Fatalf("committed offset of the sink: %+v %v", o, ok)
	}
	objs, err := s3.List(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	inS3 := map[int64]bool{}
	for _, obj := range objs {
		body, err := s3.Get(ctx, obj.Key)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var line struct {
				Offset *int64 `json:"offset"`
				Topic  string `json:"topic"`
			}
			if err := json.Unmarshal(sc.Bytes(), &line); err != nil || line.Offset == nil {
				t.Fatalf("%s: bad line %q", obj.Key, sc.Bytes())
			}
			if line.Topic == topic {
				inS3[*line.Offset] = true
			}
		}
	}
	for off := int64(0); off < o.At; off++ {
		if !inS3[off] {
			t.Fatalf("offset %d was committed by the sink (committed %d) but is in no object: the buffer was not flushed; objects %v", off, o.At, objs)
		}
	}
	t.Logf("%d records on the topic, checkpoint %d; sink committed %d, %d offsets in %d objects", len(recs), st.NextSeq, o.At, len(inS3), len(objs))
}
