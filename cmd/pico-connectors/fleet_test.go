package main

// Fleet tests (issue 15): the real binary, a broker in its own process
// (a runtime with a persistent embedded broker and no connectors), real
// versitygw. What is measured goes to the test log; the assertions are
// about records and bounds derived from the configured session timeout.

import (
	"fmt"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// fleetTopics are the 8 topics the S3 sink reads.
func fleetTopics() []string {
	var out []string
	for i := range 8 {
		out = append(out, fmt.Sprintf("fleet.%d", i))
	}
	return out
}

// TestSinkResumesAfterSIGKILL: a runtime restarted right after three quick
// SIGKILLs consumes again well before the session timeout of its dead
// selves (30 s here; the bound is half of it): static membership (group.instance.id = runtime.id)
// gives the restarted process its old place in the group. Without it the
// group waits for the three dead members' sessions to time out first.
func TestSinkResumesAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the binary, a broker process and versitygw; skipped with -short")
	}
	const session = 30 * time.Second
	srv := s3test.Start(t)
	bin := runtimebin.Build(t)
	b := fleet.StartBroker(t, bin)
	topics := fleetTopics()
	prod := fleet.StartProducer(t, b.Addr, topics, 10, 20*time.Millisecond)
	defer prod.Halt()
	def := fleet.S3SinkDef("resume", `fleet\..*`, srv, 100, fmt.Sprintf(`"session.timeout.ms" = "%d"`, session.Milliseconds()), "")
	r := fleet.New(t, bin, fleet.Options{Bootstrap: b.Addr, ID: "rt-resume", Defs: map[string]string{"s3.toml": def}})
	consumed := func(limit time.Duration) (time.Duration, bool) {
		t0 := time.Now()
		for time.Since(t0) < limit {
			if e, err := r.Entry("sink", "resume"); err == nil && e.Counters.Consumed > 0 {
				return time.Since(t0), true
			}
			if !r.Alive() {
				t.Fatalf("runtime exited:\n%s", r.Tail())
			}
			time.Sleep(20 * time.Millisecond)
		}
		return limit, false
	}
	r.Start()
	if _, ok := consumed(60 * time.Second); !ok {
		t.Fatalf("the sink consumed nothing in 60 s:\n%s", r.Tail())
	}
	for i := range 3 {
		time.Sleep(time.Duration(300+200*i) * time.Millisecond)
		r.Kill()
		r.Start()
	}
	// The last dead self's session ends about session after the last
	// kill; a dynamic member waits for that (28.6 s measured with
	// group.instance.id = ""), a static one does not.
	d, ok := consumed(session / 2)
	if !ok {
		t.Fatalf("after three SIGKILLs the restarted runtime consumed nothing within half of session.timeout.ms (%s): it waits for its dead selves' sessions\n%s", session/2, r.Tail())
	}
	t.Logf("after three quick SIGKILLs the restarted runtime consumed again %s after its API answered (session.timeout.ms %s)", d.Round(time.Millisecond), session)
	acked := prod.Halt()
	fleet.WaitCommitted(t, b.Addr, "pico-connectors-resume", minus(acked, 100), 60*time.Second)
	if err := r.Term(60 * time.Second); err != nil {
		t.Fatal(err)
	}
	if a := fleet.AuditS3(t, srv, "resume", acked); !a.OK() {
		t.Fatalf("bucket: %s", a)
	} else {
		t.Logf("bucket: %s", a)
	}
}

// minus returns m with n taken from each value (at least 0).
func minus(m map[string]int64, n int64) map[string]int64 {
	out := map[string]int64{}
	for k, v := range m {
		out[k] = max(0, v-n)
	}
	return out
}
