package supervisor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// TestDistributedOneOwnerThenTakeover: two runtimes in distributed mode
// with the same source: one runs it, the other stands by and shows the
// owner; when the owner stops (its lease leaves the group), the other
// takes the source over and goes on from the owner's checkpoint; a restart
// keeps the lease; the committed records are 0..N-1, each once.
func TestDistributedOneOwnerThenTakeover(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const session = 6 * time.Second
	newRuntime := func(id string) *Supervisor {
		cfg := writeConfig(t, fmt.Sprintf("mode = \"distributed\"\nid = %q\nshutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\n[state]\nstorage = \"broker\"\n[fleet]\nsession_timeout = %q\n",
			id, b.Addr(), session.String()), map[string]string{"gen.toml": sourceDef("gen", true)})
		sup, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("runtime", id)})
		if err != nil {
			t.Fatal(err)
		}
		if err := sup.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		return sup
	}
	a := newRuntime("rt-a")
	trA, _ := a.Tracker("source", "gen")
	sdktest.WaitFor(t, 30*time.Second, "rt-a running the source", func() bool { return trA.Counters.Produced.Load() >= 100 })
	bsup := newRuntime("rt-b")
	defer bsup.Stop(context.Background())
	trB, _ := bsup.Tracker("source", "gen")
	sdktest.Eventually(t, 30*time.Second, func() error {
		m := bsup.Membership()
		if e, _ := bsup.Get("source", "gen"); e.Status != status.Standby || e.Placement == nil || e.Placement.Owner != "rt-a" ||
			!slices.Equal(m.Members, []string{"rt-a", "rt-b"}) || m.Mode != "distributed" || m.RuntimeID != "rt-b" {
			return fmt.Errorf("rt-b: entry %+v placement %+v, membership %+v", e, e.Placement, m)
		}
		return nil
	})
	if st := trA.Status(); st != status.Running {
		t.Fatalf("rt-a status %s after rt-b joined, want Running (the lease stays with its holder)", st)
	}
	if err := a.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	sdktest.WaitFor(t, session+30*time.Second, "rt-b running the source", func() bool { return trB.Status() == status.Running })
	took := time.Since(stopped)
	start := trB.Counters.Produced.Load()
	sdktest.WaitFor(t, 30*time.Second, "rt-b producing", func() bool { return trB.Counters.Produced.Load() >= start+100 })
	if e, _ := bsup.Get("source", "gen"); e.Placement == nil || e.Placement.Owner != "rt-b" || e.Placement.Generation < 2 {
		t.Errorf("rt-b placement after takeover: %+v", e.Placement)
	}
	// A restart keeps the lease (same id, static membership): the source
	// runs again before a session timeout could have passed.
	restarted := time.Now()
	if err := bsup.Restart(context.Background(), "source", "gen"); err != nil {
		t.Fatal(err)
	}
	sdktest.WaitFor(t, 30*time.Second, "rt-b running the source after a restart", func() bool { return trB.Status() == status.Running })
	if took := time.Since(restarted); took >= session {
		t.Errorf("restart took %v, not shorter than the session timeout %v: the lease was not kept", took, session)
	}
	restartTook := time.Since(restarted)
	start = trB.Counters.Produced.Load()
	sdktest.WaitFor(t, 30*time.Second, "rt-b producing after the restart", func() bool { return trB.Counters.Produced.Load() >= start+100 })
	if err := bsup.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs := fleet.ReadCommitted(t, b.Addr(), "seq_gen")
	for i, v := range recs {
		var r struct{ Seq int }
		if err := json.Unmarshal(v, &r); err != nil || r.Seq != i {
			t.Fatalf("committed record %d is %s: a gap or a duplicate", i, v)
		}
	}
	cps := fleet.ReadCommitted(t, b.Addr(), "pico-connectors.state.gen")
	if last := string(cps[len(cps)-1]); last != fmt.Sprint(len(recs)) {
		t.Fatalf("last checkpoint %s, %d records committed", last, len(recs))
	}
	t.Logf("takeover after a graceful stop of the owner (it leaves the lease group): %v (session timeout %v); restart under the same id: %v; %d records, each once",
		took.Round(100*time.Millisecond), session, restartTook.Round(100*time.Millisecond), len(recs))
}

// flakyOpens counts the Open calls of sup_test_flaky_source, which fail
// twice (a replication slot the previous owner still holds, say).
var flakyOpens atomic.Int32

type flakySource struct{ seqSource }

func (s *flakySource) Open(ctx context.Context, state []byte) error {
	if flakyOpens.Add(1) <= 2 {
		return errors.New("replication slot is active for another process")
	}
	return s.seqSource.Open(ctx, state)
}

func init() {
	sdk.Register(sdk.Registration{
		Name: "sup_test_flaky_source", Path: "libpicomq_connector_sup_test_flaky_source", Kind: sdk.KindSource,
		Load:      func(map[string]any, string, sdk.LookupEnv) (sdk.Config, error) { return seqConfig{}, nil },
		NewSource: func(sdk.Config, sdk.Env) (sdk.Source, error) { return &flakySource{}, nil },
	})
}

// TestDistributedSourceRetriedWhileHeld: a source whose Open fails on the
// runtime that holds its lease shows Error, and is built and run again
// after a back-off until it runs.
func TestDistributedSourceRetriedWhileHeld(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	def := "type = \"source\"\nkey = \"flaky\"\npath = \"libpicomq_connector_sup_test_flaky_source\"\n[[topics]]\ntopic = \"seq_flaky\"\ncreate_topics = true\n"
	cfg := writeConfig(t, fmt.Sprintf("mode = \"distributed\"\nid = \"rt-a\"\n[broker]\nbootstrap_servers = %q\n[state]\nstorage = \"broker\"\n[fleet]\nsession_timeout = \"6s\"\n", b.Addr()),
		map[string]string{"flaky.toml": def})
	sup, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sup.Stop(context.Background())
	tr, _ := sup.Tracker("source", "flaky")
	sdktest.WaitFor(t, 60*time.Second, "the flaky source running after two failed opens", func() bool {
		return tr.Status() == status.Running && tr.Counters.Produced.Load() > 0
	})
	if n := flakyOpens.Load(); n != 3 {
		t.Fatalf("%d opens, want 3", n)
	}
	if e, _ := sup.Get("source", "flaky"); !strings.Contains(e.LastError, "replication slot is active") {
		t.Fatalf("last error %q", e.LastError)
	}
}

// TestStandaloneBrokerStore: state.storage = "broker" without a fleet: the
// checkpoints are in the broker, and a new runtime (no local files) goes on
// from the last one.
func TestStandaloneBrokerStore(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	run := func() {
		cfg := writeConfig(t, fmt.Sprintf("[broker]\nbootstrap_servers = %q\n[state]\nstorage = \"broker\"\ntopic = \"ckpt\"\n", b.Addr()),
			map[string]string{"gen.toml": sourceDef("gen", true)})
		sup, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		if err := sup.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		tr, _ := sup.Tracker("source", "gen")
		sdktest.WaitFor(t, 30*time.Second, "100 records", func() bool { return tr.Counters.Produced.Load() >= 100 })
		if err := sup.Stop(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	run()
	run()
	recs, err := b.ReadTopic(context.Background(), "seq_gen")
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		var v struct{ Seq int }
		if err := json.Unmarshal(r.Value, &v); err != nil || v.Seq != i {
			t.Fatalf("record %d = %s: the second runtime did not go on from the checkpoint", i, r.Value)
		}
	}
	cps := fleet.ReadCommitted(t, b.Addr(), "ckpt.gen")
	if len(cps) == 0 {
		t.Fatal("no checkpoint in the broker")
	}
	if last := string(cps[len(cps)-1]); last != fmt.Sprint(len(recs)) {
		t.Fatalf("last checkpoint %q, %d records", last, len(recs))
	}
}

// TestDistributedBrokerLater: a runtime started before its broker shows
// Error while it cannot join the source's lease group, and runs the source
// once the broker is up.
func TestDistributedBrokerLater(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out a lease join timeout")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cfg := writeConfig(t, fmt.Sprintf("mode = \"distributed\"\nid = \"rt-a\"\n[broker]\nbootstrap_servers = %q\n[state]\nstorage = \"broker\"\n", addr),
		map[string]string{"gen.toml": sourceDef("gen", true)})
	sup, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr, _ := sup.Tracker("source", "gen")
	sdktest.WaitFor(t, 60*time.Second, "Error while the broker is down", func() bool { return tr.Status() == status.Error })
	b, err := broker.Start(broker.Config{Address: addr, AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sdktest.WaitFor(t, 60*time.Second, "the source running once the broker is up", func() bool {
		return tr.Status() == status.Running && tr.Counters.Produced.Load() > 0
	})
	if err := sup.Stop(context.Background()); err != nil { // before the broker closes
		t.Fatal(err)
	}
}
