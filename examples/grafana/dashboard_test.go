// Package grafana holds the Grafana dashboard of pico-connectors
// (pico-connectors.json) and its test: every metric and label the
// dashboard queries is one a live runtime exports.
package grafana

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	_ "github.com/picomq/pico-connectors/connectors" // the standard connectors, as the binary links them
	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/supervisor"
)

// dashboard is the part of the dashboard JSON the test reads.
type dashboard struct {
	Panels []struct {
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// query is one PromQL expression of a panel.
type query struct{ panel, expr string }

func readQueries(t *testing.T) []query {
	t.Helper()
	b, err := os.ReadFile("pico-connectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatalf("pico-connectors.json: %v", err)
	}
	var out []query
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, query{p.Title, tg.Expr})
		}
	}
	return out
}

var (
	// selectorRE finds a metric name and its optional label matchers.
	selectorRE = regexp.MustCompile(`\b(picomq_connectors_[a-z0-9_]+)(\{([^}]*)\})?`)
	matcherRE  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)\s*"((?:[^"\\]|\\.)*)"`)
	groupingRE = regexp.MustCompile(`\b(?:by|without)\s*\(([^)]*)\)`)
	seriesRE   = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s`)
	labelRE    = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// exposition is a scrape of /metrics: per series name (a histogram's
// _bucket, _sum and _count apart), the values seen of each label.
type exposition map[string]map[string]map[string]bool

func parseExposition(text string) exposition {
	out := exposition{}
	for _, line := range strings.Split(text, "\n") {
		m := seriesRE.FindStringSubmatch(line)
		if m == nil || strings.HasPrefix(line, "#") {
			continue
		}
		labels := out[m[1]]
		if labels == nil {
			labels = map[string]map[string]bool{}
			out[m[1]] = labels
		}
		for _, l := range labelRE.FindAllStringSubmatch(m[3], -1) {
			if labels[l[1]] == nil {
				labels[l[1]] = map[string]bool{}
			}
			labels[l[1]][l[2]] = true
		}
	}
	return out
}

// problems lists what q asks of the exposition that it lacks: a metric,
// a label of a matcher or a grouping, or the value of an = matcher.
func (e exposition) problems(q query) []string {
	var out []string
	var names []string
	for _, m := range selectorRE.FindAllStringSubmatch(q.expr, -1) {
		name := m[1]
		names = append(names, name)
		labels, ok := e[name]
		if !ok {
			out = append(out, fmt.Sprintf("%s: metric %s is not exported", q.panel, name))
			continue
		}
		for _, mt := range matcherRE.FindAllStringSubmatch(m[3], -1) {
			label, op, value := mt[1], mt[2], mt[3]
			values, ok := labels[label]
			switch {
			case !ok:
				out = append(out, fmt.Sprintf("%s: %s has no label %s", q.panel, name, label))
			case op == "=" && !values[value]:
				out = append(out, fmt.Sprintf("%s: %s has no series with %s=%q", q.panel, name, label, value))
			}
		}
	}
	// A grouping label must be on every metric of the expression.
	for _, g := range groupingRE.FindAllStringSubmatch(q.expr, -1) {
		for _, label := range strings.Split(g[1], ",") {
			label = strings.TrimSpace(label)
			for _, name := range names {
				if _, ok := e[name][label]; !ok && e[name] != nil {
					out = append(out, fmt.Sprintf("%s: %s has no label %s to group by", q.panel, name, label))
				}
			}
		}
	}
	return out
}

func TestQueriesParse(t *testing.T) {
	qs := readQueries(t)
	if len(qs) < 15 {
		t.Fatalf("only %d queries in the dashboard", len(qs))
	}
	e := parseExposition(`picomq_connectors_status{key="a",status="Running",type="sink"} 1
picomq_connectors_stage_duration_seconds_bucket{key="a",le="0.1",stage="consume",type="sink"} 3
`)
	for q, want := range map[string]string{
		`rate(picomq_connectors_nope_total[1m])`:        "metric picomq_connectors_nope_total is not exported",
		`picomq_connectors_status{status="Broken"}`:     `has no series with status="Broken"`,
		`picomq_connectors_status{zone=~".*"}`:          "has no label zone",
		`sum by (key, zone) (picomq_connectors_status)`: "has no label zone to group by",
		`histogram_quantile(0.9, sum by (le) (picomq_connectors_stage_duration_seconds_bucket{stage="consume"}))`: "",
	} {
		got := strings.Join(e.problems(query{"p", q}), "; ")
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%s: problems %q, want %q", q, got, want)
		}
	}
}

// TestDashboardMatchesLiveMetrics starts a runtime as run does (embedded
// broker, a Postgres CDC source on a real server, two random sources and
// an S3 sink on a real S3 server, with a dead-letter topic that receives
// the text records the sink cannot parse as JSON), scrapes its /metrics
// and checks every query of the dashboard against it.
func TestDashboardMatchesLiveMetrics(t *testing.T) {
	pg := pgtest.Start(t)
	pg.Exec(t, `CREATE TABLE orders (id serial PRIMARY KEY, tenant text); INSERT INTO orders (tenant) VALUES ('a'), ('b')`)
	s3 := s3test.Start(t)
	dir := t.TempDir()
	files := map[string]string{
		"runtime.toml": `[broker]
embedded_address = "127.0.0.1:0"
[state]
path = "state"
`,
		"connectors/numbers.toml": fleet.SourceDef("numbers", "libpicomq_connector_random_source", "dash.numbers",
			"records_per_batch = 20\ninterval = \"50ms\"\n"),
		"connectors/words.toml": fleet.SourceDef("words", "libpicomq_connector_random_source", "dash.words",
			"records_per_batch = 5\ninterval = \"200ms\"\npayload_shape = \"text\"\n"),
		"connectors/orders.toml": fleet.SourceDef("orders", "libpicomq_connector_postgres_source", "dash.orders",
			fmt.Sprintf("connection_string = %q\ntables = [\"public.orders\"]\nslot_check_interval = \"1s\"\n", pg.DSN())),
		"connectors/lake.toml": fleet.S3SinkDef("lake", `dash\..*`, s3, 50, "", ""),
	}
	if err := os.Mkdir(filepath.Join(dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// The words are text; the sink reads them as JSON, which they are
	// not, so they go to the dead-letter topic.
	env := map[string]string{
		"PICOMQ_CONNECTORS_SOURCE_WORDS_TOPICS_0_SCHEMA":         "text",
		"PICOMQ_CONNECTORS_SINK_LAKE_TOPICS_0_DEAD_LETTER_TOPIC": "dash-dlq",
	}
	cfg, err := definition.Load(filepath.Join(dir, "runtime.toml"), env)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	reg := metrics.New(logger)
	sup, err := supervisor.New(cfg, supervisor.Options{Logger: logger, Metrics: reg})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sup.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer sup.Stop(context.Background())
	srv, err := api.New(sup, api.Options{Address: "127.0.0.1:0", Metrics: reg.Handler(), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer srv.Shutdown(context.Background())
	scrape := func() string {
		resp, err := http.Get("http://" + srv.Addr() + "/metrics")
		if err != nil {
			return ""
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	qs := readQueries(t)
	var last []string
	// The lazy series (a stage's histogram, dead letters, committed
	// records) appear once their first batch is through.
	testwait.Eventually(t, 90*time.Second, func() error {
		e := parseExposition(scrape())
		last = nil
		for _, q := range qs {
			last = append(last, e.problems(q)...)
		}
		if len(last) > 0 {
			return fmt.Errorf("%d problems, such as %s", len(last), last[0])
		}
		return nil
	})
	t.Logf("%d dashboard queries match the live /metrics", len(qs))
}
