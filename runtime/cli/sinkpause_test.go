package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// TestSinkPausedPastSession: rt-0 joins the S3 sink's group while rt-1
// holds open files (below max_messages_per_file), and is SIGSTOPped at its
// first rebalance event, between the two rebalances of the cooperative
// protocol, for twice the session timeout. rt-1 then waits in JoinGroup;
// the broker (kfake) expires a member waiting in JoinGroup past its session
// without answering it, so rt-0, woken, forms a generation alone and takes
// all four topics while rt-1 still fetches two of them (seen in about half
// the runs before the fix: both wrote files from offset 500, and the stop
// of one uploaded a cut the other wrote 100 records long). A rolling restart
// with the producer running follows; every offset must be in exactly one
// object.
func TestSinkPausedPastSession(t *testing.T) {
	if testing.Short() {
		t.Skip("two runtimes, a broker process and versitygw; skipped with -short")
	}
	const session = 6 * time.Second
	srv := s3test.Start(t)
	bin := runtimebin.Build(t)
	b := fleet.StartBroker(t, bin)
	var topics []string
	for i := range 4 {
		topics = append(topics, fmt.Sprintf("pause.%d", i))
	}
	// 2 records per topic every 100 ms: a 100-record file stays open 5 s.
	prod := fleet.StartProducer(t, b.Addr, topics, 2, 100*time.Millisecond)
	defer prod.Halt()
	def := fleet.S3SinkDef("pause", `pause\.[0-3]`, srv, 100, "", "")
	var rts []*fleet.Runtime
	for i := range 2 {
		rts = append(rts, fleet.New(t, bin, fleet.Options{Bootstrap: b.Addr, ID: fmt.Sprintf("rt-%d", i), Top: `mode = "distributed"`,
			Extra: fmt.Sprintf("[fleet]\nsession_timeout = %q\n[state]\nstorage = \"broker\"\n", session.String()), Defs: map[string]string{"s3.toml": def}}))
	}
	group := "pico-connectors-pause"
	placed := func() string {
		var out []string
		for _, r := range rts {
			e, err := r.Entry("sink", "pause")
			if err != nil {
				return err.Error()
			}
			out = append(out, fmt.Sprintf("%s %v", r.ID, e.Placement.Partitions))
		}
		return strings.Join(out, ", ")
	}
	rts[1].Start()
	sdktest.Eventually(t, 60*time.Second, func() error {
		if e, err := rts[1].Entry("sink", "pause"); err != nil || len(e.Placement.Partitions) != 4 {
			return fmt.Errorf("placement %s", placed())
		}
		return nil
	})
	fleet.WaitCommitted(t, b.Addr, group, minus(prod.Acked(), 150), 60*time.Second)
	time.Sleep(2500 * time.Millisecond) // files half full
	// rt-0 joins and is stopped at its first rebalance event, between the
	// two rebalances of the cooperative protocol (the first takes topics
	// from rt-1, the second hands them to rt-0).
	rts[0].Start()
	for deadline := time.Now().Add(60 * time.Second); ; {
		if e, err := rts[0].Entry("sink", "pause"); err == nil && e.Placement.Generation > 0 {
			rts[0].Pause()
			t.Logf("rt-0 stopped at generation %d holding %v", e.Placement.Generation, e.Placement.Partitions)
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("rt-0 saw no rebalance in 60 s: %s", placed())
		}
	}
	time.Sleep(2 * session)
	rts[0].Resume()
	time.Sleep(2 * session)
	t.Logf("after SIGSTOP and SIGCONT of %s: %s", rts[0].ID, placed())
	// A rolling restart while the producer writes: a graceful stop
	// uploads its open files, cut where it stopped.
	for _, r := range rts {
		if err := r.Term(60 * time.Second); err != nil {
			t.Error(err)
		}
		r.Start()
		time.Sleep(2500 * time.Millisecond)
	}
	acked := prod.Halt()
	fleet.WaitCommitted(t, b.Addr, group, minus(acked, 100), 60*time.Second)
	for _, r := range rts {
		if err := r.Term(60 * time.Second); err != nil {
			t.Error(err)
		}
	}
	if dir := os.Getenv("PICO_FLEET_LOGS"); dir != "" {
		for _, r := range rts {
			_ = os.WriteFile(filepath.Join(dir, r.ID+".log"), []byte(r.Output()), 0o644)
		}
	}
	if a := fleet.AuditS3(t, srv, "pause", acked); !a.OK() {
		for _, r := range rts {
			t.Logf("%s:\n%s", r.ID, r.Tail())
		}
		t.Fatalf("bucket: %s", a)
	} else {
		t.Logf("bucket: %s", a)
	}
}
