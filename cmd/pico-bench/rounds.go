package main

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// setting is one S3 sink configuration of an interleaved comparison.
type setting struct {
	name string
	cfg  map[string]any
}

// comparison is a set of S3 sink settings run over the same records in
// interleaved rounds by interleave.
type comparison struct {
	group  string // names the rounds in the progress lines
	prefix string // each round writes under <prefix>-<setting>/<round>
	// common: the plugin_config keys every setting shares (a setting's
	// own win).
	common map[string]any
	runs   []setting
	// blocks: the [[topics]] block a setting reads, by its name; the
	// others read block.
	blocks map[string]definition.Topics
	block  definition.Topics
	n      int // records a round
	rounds int
	// rotate: each round starts one setting further on, so none always
	// runs first (after the kernel or the store settled) or last.
	rotate bool
	// warmup: one run of the first setting before the rounds, not
	// counted: the first run after the records were written ran at 0.6
	// of the next ones (the multipart rows' single files, 138k against
	// 218k rec/s).
	warmup bool
	// each, when set, edits a run's plugin_config before its sink is
	// built: round counts from 0, the warm-up is round -1.
	each func(cfg map[string]any, round int)
}

// totals is what one setting's rounds measured.
type totals struct {
	records  int           // timed: the first batch of each round left out
	consumed int           // all of the rounds' records
	took     time.Duration // first batch to the end of Close, summed
	self     float64       // CPU seconds of this process (the sink)
	server   float64       // CPU seconds of the S3 server
	rates    []float64     // each round's records/s
}

// ratioRange returns the lowest and the highest of the rounds' rates of t
// over base's.
func (t *totals) ratioRange(base *totals) (lo, hi float64) {
	var r []float64
	for i := range t.rates {
		r = append(r, t.rates[i]/base.rates[i])
	}
	return slices.Min(r), slices.Max(r)
}

// verdict says whether t meets target against base by the developers' rule
// for a target above what the machine carries: the ratio of rates at
// least target, or, where the cores (the sink's process and the S3 server
// on the same ones) carry at most less, this process's CPU per record
// within 10% of the baseline's. ceiling is the ratio of the CPU per record,
// this process and the S3 server, of base over t.
func (t *totals) verdict(base *totals, target float64) (met string, ceiling float64) {
	ceiling = (base.selfUS() + base.serverUS()) / (t.selfUS() + t.serverUS())
	switch {
	case t.rate() >= target*base.rate():
		return fmt.Sprintf("met (ratio >= %.2f)", target), ceiling
	case ceiling < target && t.selfUS() <= 1.1*base.selfUS():
		return fmt.Sprintf("met (the cores carry at most %.2f; this process's CPU per record within 10%% of the baseline's)", ceiling), ceiling
	case ceiling < target:
		return fmt.Sprintf("NOT met (the cores carry at most %.2f, but this process's CPU per record is more than 10%% above the baseline's)", ceiling), ceiling
	}
	return fmt.Sprintf("NOT met (the cores carry %.2f)", ceiling), ceiling
}

// rate is the records/s over the rounds' sums.
func (t *totals) rate() float64 { return float64(t.records) / t.took.Seconds() }

// selfUS is the CPU per record, in microseconds, of this process over
// all of the rounds' records.
func (t *totals) selfUS() float64 { return t.self / float64(t.consumed) * 1e6 }

// serverUS is the S3 server's CPU per record, in microseconds.
func (t *totals) serverUS() float64 { return t.server / float64(t.consumed) * 1e6 }

// interleave runs c: in each round every setting's sink consumes the same n
// records from addr into srv, one after the other, and the CPU of this
// process and of the S3 server is read around each run.
func (b *bench) interleave(srv *s3test.Server, addr string, c comparison) map[string]*totals {
	res := map[string]*totals{}
	for _, r := range c.runs {
		res[r.name] = &totals{}
	}
	if c.warmup {
		sink, err := newS3Sink(targetOf(srv), c.config(c.runs[0], -1))
		b.must(err)
		b.sinkRunBlock(addr, sink, c.blockOf(c.runs[0].name), c.n)
		b.logf("%s: warmed up with %s", c.group, c.runs[0].name)
	}
	for i := 0; i < c.rounds; i++ {
		for j := range c.runs {
			if c.rotate {
				j = (i + j) % len(c.runs)
			}
			r := c.runs[j]
			sink, err := newS3Sink(targetOf(srv), c.config(r, i))
			b.must(err)
			self0, server0 := procCPU(b), b.serverCPU(srv)
			k, t := b.sinkRunBlock(addr, sink, c.blockOf(r.name), c.n)
			tot := res[r.name]
			tot.self += procCPU(b) - self0
			tot.server += b.serverCPU(srv) - server0
			tot.records += k
			tot.consumed += c.n
			tot.took += t
			tot.rates = append(tot.rates, float64(k)/t.Seconds())
			b.logf("%s: round %d: %s %.0f rec/s", c.group, i+1, r.name, float64(k)/t.Seconds())
		}
	}
	return res
}

// config returns the plugin_config of setting r in round i (-1: the
// warm-up).
func (c comparison) config(r setting, i int) map[string]any {
	cfg := map[string]any{"prefix": fmt.Sprintf("%s-%s/%d", c.prefix, r.name, i)}
	if i < 0 {
		cfg["prefix"] = c.prefix + "-warmup"
	}
	maps.Copy(cfg, c.common)
	maps.Copy(cfg, r.cfg)
	if c.each != nil {
		c.each(cfg, i)
	}
	return cfg
}

// blockOf returns the [[topics]] block the setting name reads.
func (c comparison) blockOf(name string) definition.Topics {
	if block, ok := c.blocks[name]; ok {
		return block
	}
	return c.block
}

// hexBench starts an S3 server and a broker whose topic holds n records
// of 1 KiB of fillHex's; the caller closes the broker.
func (b *bench) hexBench(group, topic string, n int) (*s3test.Server, *broker.Broker) {
	srv := b.startS3()
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	b.logf("%s: writing %d records of 1 KiB with random hex filler to %s", group, n, topic)
	if err := fillHex(br.Addr(), topic, n, 1024); err != nil {
		br.Close()
		b.must(err)
	}
	return srv, br
}

// serverCPU returns the S3 server's CPU seconds.
func (b *bench) serverCPU(srv *s3test.Server) float64 {
	return procCPUOf(b, srv.PID())
}
