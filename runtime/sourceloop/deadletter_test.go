package sourceloop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/runtime/transform"
	"github.com/picomq/pico-connectors/sdk"
)

// badPayload returns, for record n, a payload that fails decode (n%10 ==
// 3), the transform (5), or routing (7); the others are good.
func badPayload(n int) []byte {
	switch n % 10 {
	case 3:
		return []byte(`not json ` + strconv.Itoa(n))
	case 5:
		return []byte(`[` + strconv.Itoa(n) + `]`)
	case 7:
		return []byte(fmt.Sprintf(`{"seq":%d}`, n))
	}
	return []byte(fmt.Sprintf(`{"seq":%d,"tenant":"t"}`, n))
}

// TestDeadLettersForDecodeTransformRoute: records that fail decode, a
// transform or routing go to dead_letter_topic with their key, payload,
// own headers and the dead-letter headers; the batches are acknowledged,
// every good record arrives once and the state reaches the end.
func TestDeadLettersForDecodeTransformRoute(t *testing.T) {
	b := startBroker(t, broker.Config{})
	const limit = 100
	src := &seqSource{batch: 10, limit: limit, payload: badPayload}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{
		Topics: []definition.Topics{{Topic: definition.Route{Strategy: "field", Path: "tenant", Template: "dl.{value}"},
			Schema: "json", CreateTopics: true, LingerTime: "1ms", DeadLetterTopic: "dl.dead"}},
		Transforms: []sdk.Transform{transform.DeleteFields([]string{"x"})},
		Source:     src, Store: store, BootstrapServers: b.Addr(), Tracker: tr, RetryDelay: time.Millisecond,
	})
	testwait.For(t, time.Minute, "state 100", func() bool { return store.get("seq") == strconv.Itoa(limit) })
	r.stop(t)
	var good []int
	for n := 0; n < limit; n++ {
		if d := n % 10; d != 3 && d != 5 && d != 7 {
			good = append(good, n)
		}
	}
	if got := seqs(t, readTopic(t, b, "dl.t")); fmt.Sprint(got) != fmt.Sprint(good) {
		t.Fatalf("dl.t = %v, want %v", got, good)
	}
	dead := readTopic(t, b, "dl.dead")
	if len(dead) != 30 {
		t.Fatalf("%d dead letters, want 30", len(dead))
	}
	for i, rec := range dead {
		n := 10*(i/3) + []int{3, 5, 7}[i%3]
		stage, msg := map[int][2]string{
			3: {string(deadletter.StageDecode), "schema json"},
			5: {string(deadletter.StageTransform), "transform 0"},
			7: {string(deadletter.StageRoute), `field "tenant" is missing`},
		}[n%10][0], map[int]string{3: "schema json", 5: "transform 0", 7: `"tenant"`}[n%10]
		h := rec.Headers
		if string(rec.Key) != strconv.Itoa(n) || string(rec.Value) != string(badPayload(n)) || h["h"] != "v"+strconv.Itoa(n%3) {
			t.Errorf("dead letter %d: key %q value %q headers %v; want record %d as polled", i, rec.Key, rec.Value, h, n)
		}
		if h[deadletter.HeaderStage] != stage || !strings.Contains(h[deadletter.HeaderError], msg) || h[deadletter.HeaderConnector] != "seq" {
			t.Errorf("dead letter %d (record %d): headers %v; want stage %s, error with %q", i, n, h, stage, msg)
		}
		if _, ok := h[deadletter.HeaderOffset]; ok {
			t.Errorf("dead letter %d: a source record has no offset yet: %v", i, h)
		}
	}
	snap := tr.Snapshot()
	if snap.Counters.DeadLetters != 30 || snap.Counters.Nacked != 0 || snap.Counters.Acked != 10 {
		t.Fatalf("counters = %+v", snap.Counters)
	}
}

// TestDeadLetterProduceFailureNacks: a dead-letter topic that does not
// exist (and may not be created) fails the batch, so nothing is dropped
// silently; once it exists the batch goes through.
func TestDeadLetterProduceFailureNacks(t *testing.T) {
	b := startBroker(t, broker.Config{SeedTopics: []string{"main"}})
	src := &seqSource{batch: 10, limit: 20, payload: badPayload}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	top := literal("main")
	top.CreateTopics = false
	top.DeadLetterTopic = "main.dead"
	r := start(t, Config{Topics: []definition.Topics{top}, Source: src, Store: store, BootstrapServers: b.Addr(), Tracker: tr,
		RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond})
	testwait.For(t, time.Minute, "two nacks", func() bool { _, _, _, n := src.snapshot(); return n >= 2 })
	if !strings.Contains(tr.Snapshot().LastError, `"main.dead" does not exist`) || store.get("seq") != "" {
		t.Fatalf("last error %q, state %q", tr.Snapshot().LastError, store.get("seq"))
	}
	if err := b.CreateTopic("main.dead"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "state 20", func() bool { return store.get("seq") == "20" })
	r.stop(t)
	if n := len(readTopic(t, b, "main.dead")); n != 2 {
		t.Fatalf("%d dead letters, want the 2 records that are not JSON", n)
	}
}

// TestPollFailuresSetErrorThenRunning: MaxPollFailures Poll errors in a row
// set status Error with the last error; a successful poll sets Running.
func TestPollFailuresSetErrorThenRunning(t *testing.T) {
	b := startBroker(t, broker.Config{})
	var mu sync.Mutex
	failing := true
	src := &seqSource{batch: 5, limit: 10, pollErr: func(int) error {
		mu.Lock()
		defer mu.Unlock()
		if failing {
			return errors.New("upstream unavailable")
		}
		return nil
	}}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: store, BootstrapServers: b.Addr(),
		Tracker: tr, RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Millisecond, MaxPollFailures: 3})
	testwait.For(t, time.Minute, "status Error", func() bool { return tr.Status() == status.Error })
	_, polls, _, _ := src.snapshot()
	if snap := tr.Snapshot(); polls < 3 || !strings.Contains(snap.LastError, "polls in a row failed") || !strings.Contains(snap.LastError, "upstream unavailable") {
		t.Fatalf("after %d polls: %+v", polls, snap)
	}
	mu.Lock()
	failing = false
	mu.Unlock()
	testwait.For(t, time.Minute, "state 10", func() bool { return store.get("seq") == "10" })
	testwait.For(t, time.Minute, "status Running", func() bool { return tr.Status() == status.Running })
	r.stop(t)
}

// TestWeakeningPropertiesRefused: acks, idempotence and in-flight settings
// that would void the delivery promise are refused before anything runs.
func TestWeakeningPropertiesRefused(t *testing.T) {
	top := literal("x")
	top.Properties = map[string]string{"enable.idempotence": "false", "max.in.flight.requests.per.connection": "10"}
	err := CheckTopics([]definition.Topics{top}, "")
	if err == nil || !strings.Contains(err.Error(), `topics[0].properties."enable.idempotence"`) || !strings.Contains(err.Error(), `topics[0].properties."max.in.flight.requests.per.connection"`) {
		t.Fatalf("CheckTopics = %v", err)
	}
	src := &seqSource{}
	tr := status.New("source", "x", nil)
	err = Run(context.Background(), Config{Key: "x", Topics: []definition.Topics{literal("x")}, Source: src, Store: &memStore{}, Tracker: tr,
		BootstrapServers: "127.0.0.1:1", Properties: map[string]string{"acks": "1"}})
	if err == nil || !strings.Contains(err.Error(), `broker.properties."acks"`) || tr.Status() != status.Error {
		t.Fatalf("Run = %v, status %s", err, tr.Status())
	}
}

// permanentErr is a Poll error that says polling again will not help.
type permanentErr struct{}

func (permanentErr) Error() string   { return "table public.gone does not exist" }
func (permanentErr) Permanent() bool { return true }

// TestPermanentPollErrorSetsErrorAtOnce: a Poll error that reports itself
// permanent sets status Error on the first failure, without waiting for
// MaxPollFailures.
func TestPermanentPollErrorSetsErrorAtOnce(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 5, limit: 10, pollErr: func(int) error { return fmt.Errorf("poll: %w", permanentErr{}) }}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: &memStore{}, BootstrapServers: b.Addr(),
		Tracker: tr, RetryDelay: time.Hour, MaxRetryDelay: time.Hour, MaxPollFailures: 50})
	testwait.For(t, time.Minute, "status Error", func() bool { return tr.Status() == status.Error })
	if _, polls, _, _ := src.snapshot(); polls != 1 || !strings.Contains(tr.Snapshot().LastError, "public.gone") {
		t.Fatalf("after %d polls: %+v", polls, tr.Snapshot())
	}
	r.stop(t)
}
