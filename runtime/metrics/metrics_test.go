package metrics

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

func scrape(t *testing.T, r *Registry) string {
	t.Helper()
	ts := httptest.NewServer(r.Handler())
	defer ts.Close()
	resp, err := ts.Client().Get(ts.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		t.Fatalf("scrape = %d %s", resp.StatusCode, b)
	}
	return string(b)
}

func wantLines(t *testing.T, text string, lines ...string) {
	t.Helper()
	for _, l := range lines {
		if !strings.Contains(text, "\n"+l+"\n") {
			t.Errorf("exposition lacks line %q", l)
		}
	}
}

func TestTrackedConnectors(t *testing.T) {
	r := New(slog.New(slog.DiscardHandler))
	src := status.New("source", "orders_cdc", nil)
	src.Set(status.Running)
	src.Counters.Polled.Add(10)
	src.Counters.Produced.Add(9)
	src.Counters.Batches.Add(3)
	src.Counters.Acked.Add(2)
	src.Counters.Nacked.Add(1)
	src.Counters.StateSaves.Add(2)
	src.Counters.StateFails.Add(1)
	src.Counters.ConsecNacks.Add(1)
	src.Counters.LastBatchAt.Store(1_700_000_000 * 1e9)
	sink := status.New("sink", "archive", nil)
	sink.Fail(errors.New("bucket gone"))
	sink.Counters.Consumed.Add(4)
	sink.Counters.Redelivered.Add(1)
	r.Track(src)
	r.Track(sink)

	text := scrape(t, r)
	wantLines(t, text,
		"# TYPE picomq_connectors_sources_running gauge",
		`picomq_connectors_sources_running{key="orders_cdc",type="source"} 1`,
		"# TYPE picomq_connectors_sinks_running gauge",
		`picomq_connectors_sinks_running{key="archive",type="sink"} 0`,
		`picomq_connectors_status{key="archive",status="Error",type="sink"} 1`,
		`picomq_connectors_status{key="archive",status="Running",type="sink"} 0`,
		`picomq_connectors_status{key="orders_cdc",status="Running",type="source"} 1`,
		"# TYPE picomq_connectors_records_polled_total counter",
		`picomq_connectors_records_polled_total{key="orders_cdc",type="source"} 10`,
		`picomq_connectors_records_produced_total{key="orders_cdc",type="source"} 9`,
		`picomq_connectors_records_consumed_total{key="archive",type="sink"} 4`,
		`picomq_connectors_batches_total{key="orders_cdc",type="source"} 3`,
		`picomq_connectors_batches_acknowledged_total{key="orders_cdc",type="source"} 2`,
		`picomq_connectors_batches_nacked_total{key="orders_cdc",type="source"} 1`,
		`picomq_connectors_batches_redelivered_total{key="archive",type="sink"} 1`,
		`picomq_connectors_state_saves_total{key="orders_cdc",type="source"} 2`,
		`picomq_connectors_state_save_failures_total{key="orders_cdc",type="source"} 1`,
		`picomq_connectors_consecutive_nacks{key="orders_cdc",type="source"} 1`,
		`picomq_connectors_last_batch_timestamp_seconds{key="orders_cdc",type="source"} 1.7e+09`,
	)
	for _, notWanted := range []string{
		`picomq_connectors_records_produced_total{key="archive"`,
		`picomq_connectors_state_saves_total{key="archive"`,
		`picomq_connectors_consecutive_nacks{key="archive"`,
		`picomq_connectors_records_consumed_total{key="orders_cdc"`,
		`picomq_connectors_batches_redelivered_total{key="orders_cdc"`,
	} {
		if strings.Contains(text, notWanted) {
			t.Errorf("exposition has %s, which does not apply to that type", notWanted)
		}
	}
	if !strings.Contains(text, "go_goroutines") || !strings.Contains(text, "process_") {
		t.Errorf("exposition lacks the Go and process collectors")
	}

	// Status changes show at the next scrape; a restart's new tracker
	// replaces the old one.
	src.Fail(errors.New("30 nacks"))
	fresh := status.New("sink", "archive", nil)
	fresh.Set(status.Running)
	r.Track(fresh)
	text = scrape(t, r)
	wantLines(t, text,
		`picomq_connectors_sources_running{key="orders_cdc",type="source"} 0`,
		`picomq_connectors_sinks_running{key="archive",type="sink"} 1`,
		`picomq_connectors_records_consumed_total{key="archive",type="sink"} 0`,
	)
	r.Untrack("sink", "archive")
	if text = scrape(t, r); strings.Contains(text, `key="archive"`) {
		t.Errorf("untracked sink still exported")
	}
}

func TestStagesAndRecordCounters(t *testing.T) {
	r := New(slog.New(slog.DiscardHandler))
	c := r.For("source", "orders_cdc")
	for _, s := range []string{StageDecode, StageTransform, StageProduce, StageStateSave} {
		c.ObserveStage(s, 3*time.Millisecond)
	}
	Stage(c, StageProduce).Observe(0.5)
	k := r.For("sink", "archive")
	k.ObserveStage(StageConsume, time.Second)
	c.Counter(RecordsAcknowledged, "").Add(5)
	k.Counter(RecordsNacked, "ignored help").Add(2)
	// The Prefix may be given or not.
	c.Counter(Prefix+RecordsAcknowledged, "").Add(1)

	text := scrape(t, r)
	wantLines(t, text,
		"# TYPE picomq_connectors_stage_duration_seconds histogram",
		`picomq_connectors_stage_duration_seconds_count{key="orders_cdc",stage="decode",type="source"} 1`,
		`picomq_connectors_stage_duration_seconds_count{key="orders_cdc",stage="transform",type="source"} 1`,
		`picomq_connectors_stage_duration_seconds_count{key="orders_cdc",stage="produce",type="source"} 2`,
		`picomq_connectors_stage_duration_seconds_sum{key="orders_cdc",stage="produce",type="source"} 0.503`,
		`picomq_connectors_stage_duration_seconds_count{key="orders_cdc",stage="state_save",type="source"} 1`,
		`picomq_connectors_stage_duration_seconds_count{key="archive",stage="consume",type="sink"} 1`,
		`picomq_connectors_records_acknowledged_total{key="orders_cdc",type="source"} 6`,
		`picomq_connectors_records_nacked_total{key="archive",type="sink"} 2`,
	)

	// Stage on another sdk.Metrics falls back to a named histogram.
	Stage(sdk.DiscardMetrics, StageDecode).Observe(1)
	Stage(nil, StageDecode).Observe(1)
}

func TestPluginMetrics(t *testing.T) {
	var logs bytes.Buffer
	r := New(slog.New(slog.NewTextHandler(&logs, nil)))
	var m sdk.Metrics = r.For("sink", "archive")
	m.Counter("s3_bytes_uploaded_total", "Bytes uploaded to S3.").Add(1024)
	m.Counter("s3_files_uploaded_total", "Files uploaded.").Add(2)
	m.Gauge("pending_files", "Files not yet uploaded.").Set(3)
	m.Histogram("upload_seconds", "Upload time.", []float64{0.1, 1}).Observe(0.5)
	// A second connector of the same plugin shares the metric, with its own labels.
	r.For("sink", "backup").Counter("s3_bytes_uploaded_total", "other help").Add(1)
	r.For("source", "pg").Gauge("postgres_slot_lag_bytes", "Replication slot lag.").Set(42)

	// Misuse records nothing, warns once, and does not panic.
	m.Gauge("s3_bytes_uploaded_total", "").Set(1) // kind clash
	m.Counter("bad-name", "").Add(1)              // invalid
	m.Counter("sources_running", "").Add(1)       // reserved by the tracker collector
	m.Histogram("stage_duration_seconds", "", nil).Observe(1)
	m.Counter("", "").Add(1)

	text := scrape(t, r)
	wantLines(t, text,
		"# HELP picomq_connectors_s3_bytes_uploaded_total Bytes uploaded to S3.",
		"# TYPE picomq_connectors_s3_bytes_uploaded_total counter",
		`picomq_connectors_s3_bytes_uploaded_total{key="archive",type="sink"} 1024`,
		`picomq_connectors_s3_bytes_uploaded_total{key="backup",type="sink"} 1`,
		`picomq_connectors_s3_files_uploaded_total{key="archive",type="sink"} 2`,
		`picomq_connectors_pending_files{key="archive",type="sink"} 3`,
		`picomq_connectors_upload_seconds_bucket{key="archive",type="sink",le="1"} 1`,
		`picomq_connectors_postgres_slot_lag_bytes{key="pg",type="source"} 42`,
	)
	if strings.Contains(text, "bad-name") || strings.Contains(text, `picomq_connectors_sources_running{key="archive"`) {
		t.Errorf("misused metrics were exported:\n%s", text)
	}
	for _, want := range []string{"different kinds", "invalid or reserved"} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("logs lack %q: %s", want, logs.String())
		}
	}
}

// TestConcurrentUse registers, records, tracks and scrapes from many
// goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	r := New(slog.New(slog.DiscardHandler))
	done := make(chan struct{})
	for i := 0; i < 8; i++ {
		go func() {
			defer func() { done <- struct{}{} }()
			key := "k" + string(rune('a'+i))
			for j := 0; j < 200; j++ {
				tr := status.New("source", key, nil)
				tr.Counters.Polled.Add(1)
				r.Track(tr)
				c := r.For("source", key)
				c.Counter("shared_total", "Shared.").Add(1)
				c.Gauge("shared_gauge", "Shared.").Set(float64(j))
				c.ObserveStage(StageProduce, time.Millisecond)
				if j%50 == 0 {
					r.Untrack("source", key)
				}
			}
		}()
	}
	for i := 0; i < 5; i++ {
		if _, err := r.Prometheus().Gather(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 8; i++ {
		<-done
	}
	wantLines(t, scrape(t, r), `picomq_connectors_shared_total{key="ka",type="source"} 200`)
}

// TestPlacementMetrics: ownership changes of a source, rebalances and
// partitions of a sink, and the Standby status come from the trackers.
func TestPlacementMetrics(t *testing.T) {
	r := New(slog.New(slog.DiscardHandler))
	src := status.New("source", "random", nil)
	src.Set(status.Standby)
	src.SetPlacement(status.Placement{Owner: "rt-b", Generation: 3})
	sink := status.New("sink", "archive", nil)
	sink.SetPlacement(status.Placement{Partitions: []string{"a/0", "b/0"}, Generation: 2})
	r.Track(src)
	r.Track(sink)
	wantLines(t, scrape(t, r),
		`picomq_connectors_ownership_changes_total{key="random",type="source"} 3`,
		`picomq_connectors_status{key="random",status="Standby",type="source"} 1`,
		`picomq_connectors_rebalances_total{key="archive",type="sink"} 2`,
		`picomq_connectors_partitions_held{key="archive",type="sink"} 2`,
	)
}
