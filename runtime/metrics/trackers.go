package metrics

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/picomq/pico-connectors/runtime/status"
)

// trackerCollector reads every tracked connector's status and counters at
// scrape time.
type trackerCollector struct {
	mu       sync.Mutex
	trackers map[[2]string]*status.Tracker

	sourcesRunning, sinksRunning, statusDesc, consecNacks, lastBatch *prometheus.Desc
	ownershipChanges, rebalances, partitionsHeld                     *prometheus.Desc
	counters                                                         []counterDesc
	names                                                            map[string]bool
}

type counterDesc struct {
	desc *prometheus.Desc
	kind string // "source", "sink", or "" for both
	get  func(status.Figures) int64
}

var statuses = []status.Status{status.Starting, status.Running, status.Stopping, status.Stopped, status.Error, status.Disabled, status.Standby}

func newTrackerCollector() *trackerCollector {
	labels := []string{"key", "type"}
	names := map[string]bool{Prefix + "status": true}
	d := func(name, help string) *prometheus.Desc {
		names[Prefix+name] = true
		return prometheus.NewDesc(Prefix+name, help, labels, nil)
	}
	c := &trackerCollector{
		names:          names,
		trackers:       map[[2]string]*status.Tracker{},
		sourcesRunning: d("sources_running", "1 while the source is Running, else 0 (sum for the number of running sources)."),
		sinksRunning:   d("sinks_running", "1 while the sink is Running, else 0 (sum for the number of running sinks)."),
		statusDesc:     prometheus.NewDesc(Prefix+"status", "1 for the connector's current status, 0 for the others.", []string{"key", "type", "status"}, nil),
		consecNacks:    d("consecutive_nacks", "Current run of consecutive nacked batches."),
		lastBatch:      d("last_batch_timestamp_seconds", "Unix time of the last resolved batch; 0 before the first."),
		// From status.Placement, set in a fleet of runtimes.
		ownershipChanges: d("ownership_changes_total", "Sources: changes of the runtime that runs the source, as this runtime saw them (mode = distributed)."),
		rebalances:       d("rebalances_total", "Sinks: rebalances of the sink's consumer group this runtime took part in."),
		partitionsHeld:   d("partitions_held", "Sinks: topic partitions this runtime's sink holds now."),
	}
	add := func(kind, name, help string, get func(status.Figures) int64) {
		c.counters = append(c.counters, counterDesc{d(name, help), kind, get})
	}
	add("source", "records_polled_total", "Records returned by the source's Poll.", func(f status.Figures) int64 { return f.Polled })
	add("source", "records_produced_total", "Records the broker acknowledged (sources).", func(f status.Figures) int64 { return f.Produced })
	add("sink", "records_consumed_total", "Records handed to the sink's Consume.", func(f status.Figures) int64 { return f.Consumed })
	add("", "batches_total", "Batches resolved: acknowledged or nacked (sources), consumed (sinks).", func(f status.Figures) int64 { return f.Batches })
	add("source", "batches_acknowledged_total", "Source batches acknowledged.", func(f status.Figures) int64 { return f.Acked })
	add("", "batches_nacked_total", "Source batches nacked, or sink batches whose Consume failed.", func(f status.Figures) int64 { return f.Nacked })
	add("sink", "batches_redelivered_total", "Sink batches delivered again after a failed Consume.", func(f status.Figures) int64 { return f.Redelivered })
	add("", "records_dead_lettered_total", "Records sent to a dead-letter topic.", func(f status.Figures) int64 { return f.DeadLetters })
	add("sink", "records_committed_total", "Records whose offsets the sink committed: durable in the destination.", func(f status.Figures) int64 { return f.Committed })
	add("source", "state_saves_total", "Successful state saves.", func(f status.Figures) int64 { return f.StateSaves })
	add("source", "state_save_failures_total", "Failed state saves.", func(f status.Figures) int64 { return f.StateFails })
	return c
}

func (c *trackerCollector) reserved(full string) bool {
	return c.names[full]
}

func (c *trackerCollector) allDescs() []*prometheus.Desc {
	ds := []*prometheus.Desc{c.sourcesRunning, c.sinksRunning, c.statusDesc, c.consecNacks, c.lastBatch, c.ownershipChanges, c.rebalances, c.partitionsHeld}
	for _, cd := range c.counters {
		ds = append(ds, cd.desc)
	}
	return ds
}

func (c *trackerCollector) track(t *status.Tracker) {
	c.mu.Lock()
	c.trackers[[2]string{t.Kind, t.Key}] = t
	c.mu.Unlock()
}

func (c *trackerCollector) untrack(kind, key string) {
	c.mu.Lock()
	delete(c.trackers, [2]string{kind, key})
	c.mu.Unlock()
}

// Describe implements prometheus.Collector.
func (c *trackerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.allDescs() {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *trackerCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	ts := make([]*status.Tracker, 0, len(c.trackers))
	for _, t := range c.trackers {
		ts = append(ts, t)
	}
	c.mu.Unlock()
	for _, t := range ts {
		s := t.Snapshot()
		running := 0.0
		if s.Status == status.Running {
			running = 1
		}
		var place status.Placement
		if s.Placement != nil {
			place = *s.Placement
		}
		switch s.Kind {
		case "source":
			ch <- prometheus.MustNewConstMetric(c.sourcesRunning, prometheus.GaugeValue, running, s.Key, s.Kind)
			ch <- prometheus.MustNewConstMetric(c.ownershipChanges, prometheus.CounterValue, float64(place.Generation), s.Key, s.Kind)
		case "sink":
			ch <- prometheus.MustNewConstMetric(c.sinksRunning, prometheus.GaugeValue, running, s.Key, s.Kind)
			ch <- prometheus.MustNewConstMetric(c.rebalances, prometheus.CounterValue, float64(place.Generation), s.Key, s.Kind)
			ch <- prometheus.MustNewConstMetric(c.partitionsHeld, prometheus.GaugeValue, float64(len(place.Partitions)), s.Key, s.Kind)
		}
		for _, st := range statuses {
			v := 0.0
			if s.Status == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.statusDesc, prometheus.GaugeValue, v, s.Key, s.Kind, string(st))
		}
		if s.Kind != "sink" {
			ch <- prometheus.MustNewConstMetric(c.consecNacks, prometheus.GaugeValue, float64(s.Counters.ConsecNacks), s.Key, s.Kind)
		}
		ch <- prometheus.MustNewConstMetric(c.lastBatch, prometheus.GaugeValue, float64(t.Counters.LastBatchAt.Load())/1e9, s.Key, s.Kind)
		for _, cd := range c.counters {
			if cd.kind != "" && cd.kind != s.Kind {
				continue
			}
			ch <- prometheus.MustNewConstMetric(cd.desc, prometheus.CounterValue, float64(cd.get(s.Counters)), s.Key, s.Kind)
		}
	}
}
