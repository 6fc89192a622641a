package main

import (
	"fmt"
	"runtime"

	"github.com/picomq/pico-connectors/runtime/definition"
)

// multipartRows compares, on its own S3 server and broker, the S3 sink
// writing 1 KiB records into 64 MiB files, uploaded in parts of 16 MiB
// (part_size, the default), with the same sink writing 8 MiB files of one
// PutObject each (issue 26: at least 0.9). Two 64 MiB settings: streamed
// (max_buffer_size 64MiB, so a file streams its parts into a staging
// upload while it fills, and the store copies the staging object to the
// file's key at the cut) and held whole (max_buffer_size 256MiB, the
// default: the parts go up at the cut, under the file's key).
//
// On this machine the S3 server shares the 2 cores with the sink, so its
// work on the parts (assembling them, and for a streamed file copying the
// staging object, every byte a second time) slows the sink; on AWS that is
// the store's work. Each row prints the CPU per record of this process
// (broker, consumer and sink) and of the S3 server apart, and the ceiling
// of the ratio with the server's extra work on the machine and off it.
// The target is met when this process's CPU per record for the 64 MiB
// files is within 10% of the single files'.
func (b *bench) multipartRows() []row {
	// 400k records (460 MB stored) a round: seven 64 MiB files and a
	// part, or 55 files of 8 MiB. Three rounds, each setting first once.
	const n, rounds = 400_000, 3
	srv, br := b.hexBench("multipart", "mp.hex", n)
	defer br.Close()
	c := comparison{group: "multipart", prefix: "mp",
		common: map[string]any{"include_metadata": true, "part_size": "16MiB"},
		runs: []setting{
			{"single", map[string]any{"max_file_size": "8MiB"}},
			{"streamed", map[string]any{"max_file_size": "64MiB", "max_buffer_size": "64MiB"}},
			{"held", map[string]any{"max_file_size": "64MiB"}},
		},
		block: definition.Topics{Pattern: `mp\.hex`, Schema: "json", BatchLength: 10000, PollInterval: "100ms"},
		n:     n, rounds: rounds, rotate: true, warmup: true}
	res := b.interleave(srv, br.Addr(), c)
	single := res["single"]
	objects := func(name string) int {
		_, objs := b.written(srv, "mp-"+name)
		return objs / rounds
	}
	add := func(name, key, how string) row {
		r := res[key]
		met, ceiling := r.verdict(single, 0.9)
		// With the server's extra work over the single files' off the
		// machine, the rates are at most in the ratio of the CPU per
		// record of the sink's process and the single files' server work.
		offMachine := (single.selfUS() + single.serverUS()) / (r.selfUS() + single.serverUS())
		lo, hi := r.ratioRange(single)
		return row{Name: name, Value: r.rate(), Unit: "rec/s",
			BaseName: "8 MiB files, one PutObject each, same records", BaseValue: single.rate(), BaseUnit: "rec/s", Ratio: r.rate() / single.rate(),
			Note: fmt.Sprintf("target >= 0.9 (issue 26): %s; CPU per record, this process (broker, consumer, sink) %.2f us against %.2f us (%+.1f%%), the S3 server %.2f us against %.2f us (%s), so %d busy cores carry at most %.2f of the baseline's rate, and %.2f with the server's extra work off the machine as on AWS; %dk records x %d interleaved rounds (ratios %.2f to %.2f), json_lines+metadata, part_size 16 MiB, %d and %d objects per round",
				met, r.selfUS(), single.selfUS(), (r.selfUS()/single.selfUS()-1)*100, r.serverUS(), single.serverUS(), how,
				runtime.NumCPU(), ceiling, offMachine, n/1000, rounds, lo, hi, objects(key), objects("single"))}
	}
	return []row{
		add("S3 sink, multipart, 64 MiB files streamed while they fill, 1 KiB records", "streamed",
			"it assembles the parts, then copies the staging object to the file's key"),
		add("S3 sink, multipart, 64 MiB files held whole (max_buffer_size 256 MiB), 1 KiB records", "held",
			"it assembles the parts"),
	}
}
