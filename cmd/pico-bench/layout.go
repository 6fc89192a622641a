package main

import (
	"context"
	"fmt"
	"runtime/pprof"
	"slices"
	"time"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// layoutTemplates are the layout row's two path_templates: the baseline
// first.
var layoutTemplates = [2]string{"{topic}", "{topic}/dt={yyyy}-{MM}-{dd}/region={field:region}"}

// layoutRows compares, on its own S3 server and broker, the S3 sink laying
// 1 KiB records out by a field and the date with the same sink writing
// {topic} only (see layoutRow).
func (b *bench) layoutRows() []row {
	// 400k records (410 MB) a round, as in the s3 rows: a group of files
	// of 10 directories holds up to 10 x 8 MiB (78k records) before its
	// first upload starts, and a round of 120k records, one and a half
	// groups, measured mostly the start and the end of the pipeline (the
	// uploads began two thirds into the round, and Close uploaded the
	// last 40 MiB while {topic} had 3 MiB left).
	const n = 400_000
	srv, br := b.hexBench("layout", "layout.hex", n)
	defer br.Close()
	return []row{b.layoutRow(srv, br.Addr(), `layout\.hex`, n)}
}

// layoutRow compares, on the same 1 KiB records (fillHex's, whose region
// takes 10 values), a sink that lays them out by {field:region} and the
// date with one that writes {topic} only: the same sink, settings and
// max_file_size, in interleaved rounds that take turns to go first. Each
// round's clock runs from the first batch to the end of Close, the upload
// of the last files included: with 10 directories a group of files holds
// 10 times max_file_size, so the note gives the time Close took apart.
func (b *bench) layoutRow(srv *s3test.Server, addr, pattern string, n int) row {
	const rounds = 3
	serverCPU := func() float64 { return b.serverCPU(srv) }
	var timed [2]int
	var took, tail [2]time.Duration
	var cpu, server [2]float64
	var objects [2]int
	var ratios []float64
	for i := 0; i < rounds; i++ {
		var rate [2]float64
		for j := range 2 {
			k := (i + j) % 2 // the baseline first in even rounds
			prefix := fmt.Sprintf("layout-%d/%d", k, i)
			sink, err := newS3Sink(targetOf(srv), map[string]any{"prefix": prefix, "max_file_size": "8MiB", "path_template": layoutTemplates[k]})
			b.must(err)
			self0, server0 := procCPU(b), serverCPU()
			var ts *timedSink
			// Labelled, so a --cpuprofile tells the two apart.
			pprof.Do(context.Background(), pprof.Labels("path_template", layoutTemplates[k]), func(context.Context) {
				ts, err = runSink(addr, sink, definition.Topics{Pattern: pattern, Schema: "json", BatchLength: 10000, PollInterval: "100ms"}, n)
			})
			b.must(err)
			cpu[k] += procCPU(b) - self0
			server[k] += serverCPU() - server0
			t := ts.closed.Sub(ts.first)
			timed[k] += n - ts.firstBatch
			took[k] += t
			tail[k] += ts.closed.Sub(ts.last)
			rate[k] = float64(n-ts.firstBatch) / t.Seconds()
			_, objs := b.written(srv, prefix)
			objects[k] += objs
		}
		ratios = append(ratios, rate[1]/rate[0])
		b.logf("layout: round %d: {topic} %.0f rec/s, {field:region} and date %.0f rec/s (%.2f)", i+1, rate[0], rate[1], rate[1]/rate[0])
	}
	var rate, us, serverUS, closeMS [2]float64
	for k := range 2 {
		rate[k] = float64(timed[k]) / took[k].Seconds()
		us[k] = cpu[k] / float64(rounds*n) * 1e6
		serverUS[k] = server[k] / float64(rounds*n) * 1e6
		closeMS[k] = float64(tail[k].Milliseconds()) / rounds
	}
	return row{Name: "S3 sink, path_template by {field:region} (10 values) and date, 1 KiB records", Value: rate[1], Unit: "rec/s",
		BaseName: "path_template = {topic}, same records", BaseValue: rate[0], BaseUnit: "rec/s", Ratio: rate[1] / rate[0],
		Note: fmt.Sprintf("target >= 0.85; %dk records x %d interleaved rounds (ratios %.2f to %.2f), json_lines, 8 MiB files, %d and %d objects per round; the last record to the end of Close (the last files' upload): %.0f ms against %.0f ms a round; CPU per record: the bench %.2f us against %.2f us, the S3 server %.2f us against %.2f us",
			n/1000, rounds, slices.Min(ratios), slices.Max(ratios), objects[1]/rounds, objects[0]/rounds, closeMS[1], closeMS[0], us[1], us[0], serverUS[1], serverUS[0])}
}

// procCPU returns this process's CPU seconds.
func procCPU(b *bench) float64 { return procCPUOf(b, 0) }

// procCPUOf returns the CPU seconds of the process pid (0: this one).
func procCPUOf(b *bench, pid int) float64 {
	t, err := procstat.CPUSeconds(pid)
	b.must(err)
	return t
}
