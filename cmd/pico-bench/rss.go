package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"runtime"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
	"github.com/picomq/pico-connectors/sdk"
)

// rssChildFlag makes the binary run one sink and report its peak RSS;
// hidden from --help.
const rssChildFlag = "--rss-child"

// rssParams is what the parent passes to the child, as JSON.
type rssParams struct {
	Target      s3Target
	Broker      string
	Partitions  int
	Records     int // in total
	MaxFileSize string
	MaxBuffer   string // max_buffer_size
	NoOp        bool   // a sink that drops every batch, for the base
	// Extra is more plugin_config: compression, output_format.
	Extra map[string]any
}

// rssReport is what the child prints.
type rssReport struct {
	StartKiB int64 // VmRSS once the sink is built, before consuming
	PeakKiB  int64 // VmHWM after the sink stopped
	GoKiB    int64 // memory the Go runtime obtained from the OS (MemStats.Sys), its peak
	Err      string
}

// rssChild runs in the re-executed binary: one S3 sink consuming every
// rssN.* topic until all records are in, then a graceful stop.
func rssChild(args []string) int {
	var p rssParams
	var rep rssReport
	out := func() int {
		json.NewEncoder(os.Stdout).Encode(rep)
		if rep.Err != "" {
			return 1
		}
		return 0
	}
	if len(args) != 1 || json.Unmarshal([]byte(args[0]), &p) != nil {
		rep.Err = "usage: " + rssChildFlag + " JSON"
		return out()
	}
	var sink sdk.Sink = noopSink{} // sinkloop.go
	if !p.NoOp {
		var err error
		cfg := map[string]any{"prefix": fmt.Sprintf("rss-%d", p.Partitions), "max_file_size": p.MaxFileSize, "max_buffer_size": p.MaxBuffer}
		for k, v := range p.Extra {
			cfg[k] = v
		}
		sink, err = newS3Sink(p.Target, cfg)
		if err != nil {
			rep.Err = err.Error()
			return out()
		}
	}
	rep.StartKiB, _ = procstat.KiB(0, "VmRSS")
	if _, _, err := sinkRun(p.Broker, sink, fmt.Sprintf(`rss%d\..*`, p.Partitions), p.Records, 1000); err != nil {
		rep.Err = err.Error()
		return out()
	}
	var err error
	rep.PeakKiB, err = procstat.KiB(0, "VmHWM")
	if err != nil {
		rep.Err = err.Error()
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	rep.GoKiB = int64(ms.Sys >> 10)
	return out()
}

// rssVariant is a sink setting of an RSS row: a label for its name and
// more plugin_config.
type rssVariant struct {
	label string
	extra map[string]any
}

// rssRows measures the peak RSS of a process running one S3 sink with 1,
// 16 and 256 partitions (topics) open, each filled past max_file_size,
// against the sink's configured max_buffer_size plus the peak of the same
// process with a no-op sink on the same partitions (the sink loop and
// librdkafka's fetch buffers); at 256 partitions also with zstd, gzip and
// Parquet+zstd, which the upload workers encode.
func (b *bench) rssRows() []row {
	srv := b.startS3()
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	exe, err := os.Executable()
	b.must(err)
	const maxBuffer = 64 << 20
	const size = 1024
	const perPartition = 1300 // about 1.4 files of 1 MiB in json_lines with metadata
	var rows []row
	for _, n := range []int{1, 16, 256} {
		topics := make([]string, n)
		for i := range topics {
			topics[i] = fmt.Sprintf("rss%d.%03d", n, i)
		}
		b.logf("rss: %d partitions, %d records of %d B each", n, perPartition, size)
		b.must(fill(br.Addr(), topics, perPartition, size))
		child := func(noop bool, extra map[string]any) rssReport {
			arg, _ := json.Marshal(rssParams{Target: targetOf(srv), Broker: br.Addr(), Partitions: n, Records: n * perPartition, MaxFileSize: "1MiB", MaxBuffer: "64MiB", NoOp: noop, Extra: extra})
			cmd := exec.Command(exe, rssChildFlag, string(arg))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			runErr := cmd.Run()
			var rep rssReport
			if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
				b.must(fmt.Errorf("rss child: %v %v\n%s%s", runErr, err, stdout.String(), stderr.String()))
			}
			if rep.Err != "" {
				b.must(fmt.Errorf("rss child: %s", rep.Err))
			}
			return rep
		}
		noop := child(true, nil)
		base := float64(noop.PeakKiB) / 1024
		budget := float64(maxBuffer)/(1<<20) + base
		variants := []rssVariant{{"", nil}}
		if n == 256 {
			// The encodings of the upload workers hold more than a file
			// each: with compression and Parquet on too, within the bound.
			variants = append(variants,
				rssVariant{", compression = zstd", map[string]any{"compression": "zstd"}},
				rssVariant{", compression = gzip", map[string]any{"compression": "gzip"}},
				rssVariant{", Parquet+zstd", map[string]any{"output_format": "parquet", "parquet_compression": "zstd",
					"columns": []any{map[string]any{"name": "id", "type": "int64"}, map[string]any{"name": "pad", "type": "string"}}}})
		}
		for _, v := range variants {
			rep := child(false, v.extra)
			peak := float64(rep.PeakKiB) / 1024
			b.logf("rss: %d partitions%s: peak %.1f MiB (%.1f MiB before consuming, Go runtime %.1f MiB), no-op sink %.1f MiB (Go runtime %.1f MiB), budget %.0f MiB",
				n, v.label, peak, float64(rep.StartKiB)/1024, float64(rep.GoKiB)/1024, base, float64(noop.GoKiB)/1024, budget)
			rows = append(rows, row{Name: fmt.Sprintf("S3 sink peak RSS, %d open partitions%s", n, v.label), Value: peak, Unit: "MiB",
				BaseName: fmt.Sprintf("max_buffer_size (64 MiB) + no-op sink's peak (%.0f MiB)", base), BaseValue: budget, BaseUnit: "MiB", Ratio: peak / budget,
				Note: fmt.Sprintf("child process VmHWM; %.0f MiB RSS before the first record; %d x 1.4 MiB of 1 KiB records, 1 MiB files; the Go runtime held %.0f MiB at most (no-op sink: %.0f MiB), librdkafka and the binary the rest",
					float64(rep.StartKiB)/1024, n, float64(rep.GoKiB)/1024, float64(noop.GoKiB)/1024)})
		}
	}
	return rows
}
