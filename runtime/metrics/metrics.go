// Package metrics exposes the runtime's Prometheus metrics from its own
// registry (never the global one): the running gauges and counters of
// every tracked connector, the stage-duration histograms the loops feed,
// and the connector-specific metrics plugins register through
// sdk.Metrics. Every series is labelled by connector key and type.
//
// README.md lists every metric.
package metrics

import (
	"log/slog"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// Prefix starts the name of every metric the runtime exports.
const Prefix = "picomq_connectors_"

// The stages whose durations the loops record with Stage.
const (
	StageDecode    = "decode"
	StageTransform = "transform"
	StageProduce   = "produce"
	StageStateSave = "state_save"
	StageConsume   = "consume"
)

// Names of the record counters the loops feed through Counter, beyond
// what the status tracker already counts.
const (
	// RecordsAcknowledged counts records of acknowledged batches (source:
	// produced and checkpointed; sink: Consume returned nil).
	RecordsAcknowledged = "records_acknowledged_total"
	// RecordsNacked counts records of nacked or failed batches.
	RecordsNacked = "records_nacked_total"
)

// StageBuckets are the buckets of the stage histograms, in seconds: 100µs
// to about 50s.
var StageBuckets = prometheus.ExponentialBuckets(0.0001, 2.5, 15)

// Registry holds every metric of one runtime. Create it with New.
type Registry struct {
	reg *prometheus.Registry
	log *slog.Logger

	stage    *prometheus.HistogramVec
	acked    *prometheus.CounterVec
	nacked   *prometheus.CounterVec
	trackers *trackerCollector

	mu      sync.Mutex
	custom  map[string]customMetric // by full name
	warned  map[string]bool
	handler http.Handler
}

type customMetric struct {
	kind string // "counter", "gauge" or "histogram"
	c    *prometheus.CounterVec
	g    *prometheus.GaugeVec
	h    *prometheus.HistogramVec
}

// New returns a registry with the runtime's metrics, the Go runtime's and
// the process's. logger (nil means slog.Default()) receives warnings about
// metrics a plugin registers wrongly.
func New(logger *slog.Logger) *Registry {
	if logger == nil {
		logger = slog.Default()
	}
	r := &Registry{
		reg:    prometheus.NewRegistry(),
		log:    logger,
		custom: map[string]customMetric{},
		warned: map[string]bool{},
	}
	r.stage = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    Prefix + "stage_duration_seconds",
		Help:    "Time spent in one stage of a loop (decode, transform, produce, state_save, consume), per batch.",
		Buckets: StageBuckets,
	}, []string{"key", "type", "stage"})
	r.acked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Prefix + RecordsAcknowledged,
		Help: "Records of acknowledged batches: produced and checkpointed (sources) or consumed without error (sinks).",
	}, []string{"key", "type"})
	r.nacked = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: Prefix + RecordsNacked,
		Help: "Records of nacked (sources) or failed (sinks) batches; they are read or delivered again.",
	}, []string{"key", "type"})
	r.trackers = newTrackerCollector()
	r.reg.MustRegister(r.stage, r.acked, r.nacked, r.trackers,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	r.custom[Prefix+RecordsAcknowledged] = customMetric{kind: "counter", c: r.acked}
	r.custom[Prefix+RecordsNacked] = customMetric{kind: "counter", c: r.nacked}
	r.handler = promhttp.HandlerFor(r.reg, promhttp.HandlerOpts{
		ErrorLog:      slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		ErrorHandling: promhttp.ContinueOnError,
	})
	return r
}

// Handler serves the Prometheus exposition of the registry.
func (r *Registry) Handler() http.Handler { return r.handler }

// Prometheus returns the underlying registry, to register more collectors
// or gather in tests.
func (r *Registry) Prometheus() *prometheus.Registry { return r.reg }

// Track exports the status and counters of t, replacing any tracker of the
// same type and key (as after a restart). The values are read from the
// tracker at each scrape.
func (r *Registry) Track(t *status.Tracker) { r.trackers.track(t) }

// Untrack stops exporting the tracker of one connector.
func (r *Registry) Untrack(kind, key string) { r.trackers.untrack(kind, key) }

// For returns the metrics of one connector, to hand to its plugin (as
// sdk.Env.Metrics) and to its loop (sinkloop/sourceloop Config.Metrics).
// kind is "source" or "sink".
func (r *Registry) For(kind, key string) *Connector {
	return &Connector{r: r, kind: kind, key: key}
}

// Connector is the metrics of one connector. It implements sdk.Metrics:
// every metric it registers is named Prefix+name and labelled by the
// connector's key and type.
type Connector struct {
	r         *Registry
	kind, key string
}

var _ sdk.Metrics = (*Connector)(nil)

// Key returns the connector's key.
func (c *Connector) Key() string { return c.key }

// Kind returns "source" or "sink".
func (c *Connector) Kind() string { return c.kind }

// Stage returns the histogram of one stage's durations in seconds.
func (c *Connector) Stage(stage string) sdk.Histogram {
	return c.r.stage.WithLabelValues(c.key, c.kind, stage)
}

// ObserveStage records that a stage took d.
func (c *Connector) ObserveStage(stage string, d time.Duration) {
	c.Stage(stage).Observe(d.Seconds())
}

// Counter returns the connector's counter named Prefix+name, registering
// it on first use. An invalid name, or one already used by a metric of
// another kind, yields a counter that records nothing and a warning.
func (c *Connector) Counter(name, help string) sdk.Counter {
	m, ok := c.r.custom0(name, help, "counter", nil)
	if !ok {
		return sdk.DiscardMetrics.Counter(name, help)
	}
	return m.c.WithLabelValues(c.key, c.kind)
}

// Gauge returns the connector's gauge named Prefix+name; see Counter.
func (c *Connector) Gauge(name, help string) sdk.Gauge {
	m, ok := c.r.custom0(name, help, "gauge", nil)
	if !ok {
		return sdk.DiscardMetrics.Gauge(name, help)
	}
	return m.g.WithLabelValues(c.key, c.kind)
}

// Histogram returns the connector's histogram named Prefix+name; nil
// buckets mean Prometheus' defaults. The buckets of the first registration
// of a name win. See Counter.
func (c *Connector) Histogram(name, help string, buckets []float64) sdk.Histogram {
	m, ok := c.r.custom0(name, help, "histogram", buckets)
	if !ok {
		return sdk.DiscardMetrics.Histogram(name, help, buckets)
	}
	return m.h.WithLabelValues(c.key, c.kind)
}

// Stage returns the histogram of one stage's durations from any
// sdk.Metrics: the shared stage histogram of a *Connector, or else a
// histogram named STAGE_duration_seconds.
func Stage(m sdk.Metrics, stage string) sdk.Histogram {
	if c, ok := m.(*Connector); ok {
		return c.Stage(stage)
	}
	if m == nil {
		m = sdk.DiscardMetrics
	}
	return m.Histogram(stage+"_duration_seconds", "Time spent in the "+stage+" stage, per batch.", StageBuckets)
}

var validName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

func (r *Registry) custom0(name, help, kind string, buckets []float64) (customMetric, bool) {
	full := Prefix + strings.TrimPrefix(name, Prefix)
	r.mu.Lock()
	defer r.mu.Unlock()
	if m, ok := r.custom[full]; ok {
		if m.kind == kind {
			return m, true
		}
		r.warnOnce(full, "metric registered twice with different kinds; the second registration records nothing", "metric", full, "first", m.kind, "second", kind)
		return customMetric{}, false
	}
	if !validName.MatchString(name) || r.trackers.reserved(full) || full == Prefix+"stage_duration_seconds" {
		r.warnOnce(full, "invalid or reserved metric name; it records nothing", "metric", full)
		return customMetric{}, false
	}
	if help == "" {
		help = full
	}
	labels := []string{"key", "type"}
	var m customMetric
	var col prometheus.Collector
	switch kind {
	case "counter":
		m.c = prometheus.NewCounterVec(prometheus.CounterOpts{Name: full, Help: help}, labels)
		col = m.c
	case "gauge":
		m.g = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: full, Help: help}, labels)
		col = m.g
	default:
		if len(buckets) == 0 {
			buckets = prometheus.DefBuckets
		}
		m.h = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: full, Help: help, Buckets: buckets}, labels)
		col = m.h
	}
	m.kind = kind
	if err := r.reg.Register(col); err != nil {
		r.warnOnce(full, "metric could not be registered; it records nothing", "metric", full, "error", err)
		return customMetric{}, false
	}
	r.custom[full] = m
	return m, true
}

func (r *Registry) warnOnce(name, msg string, args ...any) {
	if r.warned[name] {
		return
	}
	r.warned[name] = true
	r.log.Warn(msg, args...)
}
