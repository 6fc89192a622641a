// Command pico-bench measures pico-connectors against baselines measured in
// the same run and prints one table: each row a figure, its baseline and
// the ratio between them.
//
// Usage:
//
//	pico-bench [--markdown FILE] [--png FILE] [--only s3,s3formats,layout,multipart,iceberg,pg,random,config,rss,sinkloop,fleet]
//	           [--cpuprofile FILE] [--blockprofile FILE] [--mutexprofile FILE] [--trace FILE]
//
// The profile flags write pprof profiles (and a runtime/trace execution
// trace) of this process, where the connectors under test run, for `go
// tool pprof` and `go tool trace`.
//
// It needs versitygw (make tools) for the S3 rows and the PostgreSQL 15
// server binaries for the Postgres rows; a missing one is reported with the
// command that installs it, and its rows are left out. Progress goes to
// stderr, the table to stdout.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"runtime/trace"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/internal/cleanup"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"

	// Links the connectors into the registry the benchmarks build them from.
	_ "github.com/picomq/pico-connectors/generated/registry"
)

// row is one line of the table.
type row struct {
	Name      string  // what was measured
	Value     float64 // the measured figure
	Unit      string
	BaseName  string  // the baseline
	BaseValue float64 // measured in the same run
	BaseUnit  string
	// Ratio is Value/BaseValue; for RSS rows it is the peak over the
	// budget, so lower is better there.
	Ratio float64
	Note  string
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == rssChildFlag {
		os.Exit(rssChild(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pico-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	mdPath := fs.String("markdown", "", "also write the table as Markdown to `FILE`")
	pngPath := fs.String("png", "", "also write a bar chart of the ratios to `FILE`")
	only := fs.String("only", "s3,pg,random,config,rss,sinkloop,fleet", "comma-separated groups to run (s3 includes s3formats, the compression and Parquet rows, layout, the path_template row, multipart, the 64 MiB files rows, and iceberg, the Iceberg table row)")
	cpuPath := fs.String("cpuprofile", "", "write a CPU profile of the run to `FILE`")
	blockPath := fs.String("blockprofile", "", "write a goroutine blocking profile of the run to `FILE`")
	mutexPath := fs.String("mutexprofile", "", "write a mutex contention profile of the run to `FILE`")
	tracePath := fs.String("trace", "", "write an execution trace of the run to `FILE`")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	stopProfiles, err := startProfiles(*cpuPath, *blockPath, *mutexPath, *tracePath)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer func() {
		if err := stopProfiles(); err != nil {
			fmt.Fprintln(stderr, err)
		}
	}()
	groups := map[string]bool{}
	for _, g := range strings.Split(*only, ",") {
		groups[strings.TrimSpace(g)] = true
	}
	groups["s3formats"] = groups["s3formats"] || groups["s3"]
	groups["layout"] = groups["layout"] || groups["s3"]
	groups["multipart"] = groups["multipart"] || groups["s3"]
	groups["iceberg"] = groups["iceberg"] || groups["s3"]
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))

	b := &bench{start: time.Now(), progress: stderr, load: loadAverage()}
	defer b.cleanups.Run()
	// The groups that run the runtime as a process share one build of it.
	defer runtimebin.Remove()
	b.logf("load average at start: %s (ratios are honest only on an idle machine: a loaded one slows the baseline too)", b.load)
	var rows []row
	var failures []string
	step := func(name string, f func() []row) {
		if !groups[name] {
			return
		}
		b.logf("== %s", name)
		got, err := catch(f)
		if err != nil {
			failures = append(failures, fmt.Sprintf("%s: %v", name, err))
			b.logf("%s failed: %v", name, err)
			return
		}
		rows = append(rows, got...)
	}
	step("config", b.configRows)
	step("random", b.randomRows)
	step("s3", b.s3Rows)
	step("s3formats", b.s3FormatRows)  // compression and Parquet; s3 runs it too
	step("layout", b.layoutRows)       // path_template by a field; s3 runs it too
	step("multipart", b.multipartRows) // 64 MiB files in parts; s3 runs it too
	step("iceberg", b.icebergRows)     // an Iceberg table's Parquet files; s3 runs it too
	step("sinkloop", b.sinkLoopRows)
	step("rss", b.rssRows)
	step("pg", b.pgRows)
	step("fleet", b.fleetRows)
	b.logf("done in %s", time.Since(b.start).Round(time.Second))

	table := formatTable(rows)
	fmt.Fprint(stdout, table)
	fmt.Fprintf(stdout, "\nload average at start: %s\n", b.load)
	if *mdPath != "" {
		if err := os.WriteFile(*mdPath, []byte(formatMarkdown(rows, time.Since(b.start), b.load)), 0o644); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		b.logf("wrote %s", *mdPath)
	}
	if *pngPath != "" {
		if err := writeChart(*pngPath, rows); err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		b.logf("wrote %s", *pngPath)
	}
	if len(failures) > 0 {
		fmt.Fprintln(stderr, "\nrows missing because a part could not run:")
		for _, f := range failures {
			fmt.Fprintln(stderr, "  "+f)
		}
		return 1
	}
	return 0
}

// bench holds what the groups share.
type bench struct {
	start    time.Time
	progress io.Writer
	load     string // /proc/loadavg's 1, 5 and 15 minute figures when the run began

	cleanups cleanup.Stack // run at the end, last first
}

// loadAverage returns the 1, 5 and 15 minute load averages, or "unknown".
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}

func (b *bench) logf(format string, args ...any) {
	fmt.Fprintf(b.progress, "[%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, args...))
}

// stop is what must panics with to end the group running; catch turns it
// into the group's error.
type stop struct{ err error }

// must ends the group running on an error.
func (b *bench) must(err error) {
	if err != nil {
		panic(stop{err})
	}
}

// catch runs the group f and returns its rows, or the error that ended it
// through must; any other panic goes on.
func catch(f func() []row) (rows []row, err error) {
	defer func() {
		if r := recover(); r != nil {
			st, ok := r.(stop)
			if !ok {
				panic(r)
			}
			rows, err = nil, st.err
		}
	}()
	return f(), nil
}

// tempDir returns a new folder in parent (the system's temporary folder
// when ""), removed when the bench ends.
func (b *bench) tempDir(parent string) string {
	d, err := os.MkdirTemp(parent, "pico-bench-")
	b.must(err)
	b.cleanups.Add(func() { os.RemoveAll(d) })
	return d
}

// ctx returns a context bounded by d.
func bounded(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}

// startProfiles starts the profiles asked for and returns the function that
// stops them and writes them out.
func startProfiles(cpuPath, blockPath, mutexPath, tracePath string) (func() error, error) {
	var stops []func() error
	stop := func() error {
		var first error
		for _, f := range stops {
			if err := f(); err != nil && first == nil {
				first = err
			}
		}
		return first
	}
	if cpuPath != "" {
		f, err := os.Create(cpuPath)
		if err != nil {
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("--cpuprofile: %w", err)
		}
		stops = append(stops, func() error { pprof.StopCPUProfile(); return f.Close() })
	}
	if tracePath != "" {
		f, err := os.Create(tracePath)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("--trace: %w", err), stop())
		}
		if err := trace.Start(f); err != nil {
			f.Close()
			return nil, errors.Join(fmt.Errorf("--trace: %w", err), stop())
		}
		stops = append(stops, func() error { trace.Stop(); return f.Close() })
	}
	if blockPath != "" {
		runtime.SetBlockProfileRate(int(time.Microsecond))
		stops = append(stops, func() error { return writeProfile("block", blockPath) })
	}
	if mutexPath != "" {
		runtime.SetMutexProfileFraction(5)
		stops = append(stops, func() error { return writeProfile("mutex", mutexPath) })
	}
	return stop, nil
}

// writeProfile writes the named pprof profile to path.
func writeProfile(name, path string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("%s profile: %w", name, err)
	}
	if err := pprof.Lookup(name).WriteTo(f, 0); err != nil {
		f.Close()
		return fmt.Errorf("%s profile: %w", name, err)
	}
	return f.Close()
}
