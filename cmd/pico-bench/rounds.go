package main

import (
	"fmt"
	"maps"
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
		cfg := map[string]any{"prefix": c.prefix + "-warmup"}
		maps.Copy(cfg, c.common)
		maps.Copy(cfg, c.runs[0].cfg)
		sink, err := newS3Sink(targetOf(srv), cfg)
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
			cfg := map[string]any{"prefix": fmt.Sprintf("%s-%s/%d", c.prefix, r.name, i)}
			maps.Copy(cfg, c.common)
			maps.Copy(cfg, r.cfg)
			sink, err := newS3Sink(targetOf(srv), cfg)
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
