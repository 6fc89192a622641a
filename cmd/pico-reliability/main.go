// Command pico-reliability runs scripted failure scenarios against real
// servers (the pico-connectors binary built once into a temp folder,
// PostgreSQL 15, versitygw, a Kafka-protocol broker) and prints, for each,
// what was injected and what was verified. It exits 1 when any check fails.
//
// Usage:
//
//	pico-reliability [--quick] [--only NAME,...] [--seed N]
//
// --quick (CI, about 1-2 minutes) kills 3 times per scenario and soaks for
// 30 s; the full suite (about 4-5 minutes) kills 10 times and soaks for 3
// minutes. --seed repeats the random kill points of an earlier run.
//
// Scenarios and what they prove:
//
//	bad-input      100 malformed definitions, runtime configs and env overrides
//	               through `pico-connectors validate`: exit 1, a message naming
//	               the key or variable, no panic, no secret printed, values
//	               cut to a readable length, and no connection to the broker,
//	               S3 or Postgres. Then bad inputs to running runtimes (such
//	               as checkpoints injected into a state topic): refused or
//	               skipped, counted the same way.
//	kill-random    SIGKILL at random points while the random source produces
//	               (file state store): every checkpointed sequence is on the
//	               topic (read back with franz-go), duplicates only in the batch
//	               in flight after a checkpoint; SIGTERM exits cleanly.
//	kill-embedded  SIGKILL of the runtime and its persistent embedded broker
//	               (broker.data_dir) at random points: after every restart the
//	               topic holds every checkpointed sequence.
//	kill-cdc       the same for the Postgres source in CDC and polling mode
//	kill-polling   while a writer inserts rows: every committed row arrives,
//	               duplicates at most one in-flight batch per kill; in polling
//	               mode every delivered row is also marked by processed_column
//	               (marks owed at a kill travel in the checkpoint).
//	kill-s3        the S3 sink under SIGTERM and SIGKILL at random points while a
//	               producer writes. delivery = "exactly_once": a commit is never
//	               ahead of the bucket, and every offset ends in exactly one
//	               object (0 lost, 0 twice). delivery = "buffered": SIGTERM
//	               loses nothing committed, SIGKILL only records buffered after
//	               the last uploaded object (fewer than one file), measured.
//	s3-faults      through runtime/servertest/faultproxy: 503 bursts, 429 and
//	               connection resets are retried into one object; latency is
//	               absorbed. exactly_once: a file failing every attempt, or a
//	               persistent 403, is kept (status Error with the S3 error, no
//	               .lost marker) and lands once the store answers; every offset
//	               in exactly one object. buffered: the file is dropped into a
//	               .lost marker naming its offsets and the batch redelivered; a
//	               sustained outage recovers by itself; every offset uploaded
//	               or named by a marker.
//	s3-group       two runtimes with one S3 sink key (one consumer group) on 8
//	               topics: one SIGKILLed mid-stream, the other takes over, the
//	               first rejoins; every offset in exactly one object.
//	fleet          three distributed runtimes (broker state store) sharing a
//	               Postgres CDC source, a random source and an S3 sink over 8
//	               topics: source owners SIGKILLed in turn, one SIGSTOPped for
//	               twice the session timeout, a rolling restart; every acked
//	               record in exactly one object, sequences and rows once read
//	               committed, checkpoints never backwards.
//	broker-outage  an external kfake process killed and restarted on the same
//	               address and data: batches nack with back-off, status stays
//	               Running below 30 Nacks, delivery resumes by itself, nothing
//	               checkpointed is lost.
//	pg-restart     PostgreSQL stopped for 3 s under CDC: poll errors recorded,
//	               status never Error, every committed row arrives.
//	http-state     the HTTP state store answering 500s, then flapping: status
//	               Error on a failed save, no checkpoint moves, Running again
//	               after the next good batch, nothing checkpointed lost.
//	soak           random source -> broker -> S3 sink for 3 minutes (30 s with
//	               --quick): RSS and goroutine count flat, records flowing.
//	soak-pg        Postgres CDC (default reader) and polling in one runtime
//	               for 3 minutes (45 s with --quick) while writers insert
//	               1 KiB rows continuously: RSS within 1.5x of the warm-up,
//	               the Go heap live after each collection under 64 MB for the
//	               whole run, goroutines flat, rows flowing, every row once.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/internal/cleanup"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// suite is what every scenario shares.
type suite struct {
	quick bool
	rng   *rand.Rand
	bin   string // the pico-connectors binary
	start time.Time
	fails int
	cur   string

	cleanups cleanup.Stack // run at the end, last first
}

type scenario struct {
	name string
	run  func(*suite)
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == brokerCmd {
		os.Exit(brokerMain(os.Args[2:]))
	}
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("pico-reliability", flag.ContinueOnError)
	quick := fs.Bool("quick", false, "fewer kills and a short soak (CI)")
	only := fs.String("only", "", "comma-separated scenario names to run (default all)")
	seed := fs.Uint64("seed", uint64(time.Now().UnixNano()), "seed of the random kill points")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(io.Discard, nil)))
	s := &suite{quick: *quick, rng: rand.New(rand.NewPCG(*seed, 7)), start: time.Now()}
	defer s.cleanups.Run()
	defer runtimebin.Remove()
	mode := "full"
	if s.quick {
		mode = "quick"
	}
	fmt.Printf("pico-reliability (%s, seed %d)\n", mode, *seed)
	all := []scenario{
		{"bad-input", (*suite).badInput},
		{"kill-random", (*suite).killRandom},
		{"kill-embedded", (*suite).killEmbedded},
		{"kill-cdc", func(s *suite) { s.killPostgres("cdc") }},
		{"kill-polling", func(s *suite) { s.killPostgres("polling") }},
		{"kill-s3", (*suite).killS3},
		{"s3-faults", (*suite).s3Faults},
		{"s3-group", (*suite).s3Group},
		{"fleet", (*suite).fleetScenario},
		{"broker-outage", (*suite).brokerOutage},
		{"pg-restart", (*suite).pgRestart},
		{"http-state", (*suite).httpState},
		{"soak", (*suite).soak},
		{"soak-pg", (*suite).soakPG},
	}
	want := map[string]bool{}
	for _, n := range strings.Split(*only, ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	fmt.Println("building cmd/pico-connectors")
	var err error
	if s.bin, err = runtimebin.Compile(); err != nil {
		fmt.Println("FAIL build:", err)
		return 1
	}
	var results []string
	for _, sc := range all {
		if len(want) > 0 && !want[sc.name] {
			continue
		}
		s.cur = sc.name
		before := s.fails
		t0 := time.Now()
		fmt.Printf("\n=== %s\n", sc.name)
		if err := catch(func() { sc.run(s) }); err != nil {
			s.fails++
			fmt.Printf("  FAIL %v\n", err)
		}
		verdict := "PASS"
		if s.fails > before {
			verdict = "FAIL"
		}
		line := fmt.Sprintf("%-14s %s  (%s)", sc.name, verdict, time.Since(t0).Round(100*time.Millisecond))
		fmt.Printf("--- %s\n", line)
		results = append(results, line)
	}
	fmt.Printf("\nsummary (%s in total)\n", time.Since(s.start).Round(time.Second))
	for _, r := range results {
		fmt.Println("  " + r)
	}
	if s.fails > 0 {
		fmt.Printf("%d check(s) failed\n", s.fails)
		return 1
	}
	return 0
}

// inject prints what a scenario does to the system.
func (s *suite) inject(format string, args ...any) {
	fmt.Printf("  [%5.1fs] inject: %s\n", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// note prints an observation.
func (s *suite) note(format string, args ...any) {
	fmt.Printf("  [%5.1fs]   %s\n", time.Since(s.start).Seconds(), fmt.Sprintf(format, args...))
}

// check prints a verified property, or a failure that the suite counts.
func (s *suite) check(ok bool, format string, args ...any) bool {
	msg := fmt.Sprintf(format, args...)
	if ok {
		fmt.Printf("  [%5.1fs] verify: ok   %s\n", time.Since(s.start).Seconds(), msg)
	} else {
		s.fails++
		fmt.Printf("  [%5.1fs] verify: FAIL %s\n", time.Since(s.start).Seconds(), msg)
	}
	return ok
}

// stop is what must and mustf panic with to stop the scenario running;
// catch turns it into the scenario's error.
type stop struct{ msg string }

// must stops the scenario on a set-up error.
func must(err error) {
	if err != nil {
		panic(stop{err.Error()})
	}
}

// mustGet returns v, or stops the scenario on err.
func mustGet[T any](v T, err error) T {
	must(err)
	return v
}

func mustf(format string, args ...any) {
	panic(stop{fmt.Sprintf(format, args...)})
}

// catch runs f and returns the error that stopped it through must or
// mustf; any other panic goes on.
func catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			st, ok := r.(stop)
			if !ok {
				panic(r)
			}
			err = errors.New(st.msg)
		}
	}()
	f()
	return nil
}

// tempDir returns a new temporary folder, removed when the suite ends.
func (s *suite) tempDir() string {
	d, err := os.MkdirTemp("", "pico-reliability-")
	must(err)
	s.cleanups.Add(func() { os.RemoveAll(d) })
	return d
}

// pick returns full or quick.
func (s *suite) pick(full, quick int) int {
	if s.quick {
		return quick
	}
	return full
}
