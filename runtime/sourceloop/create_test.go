package sourceloop

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
)

// TestTopicCreationFailureNacks: the broker refuses CreateTopics (a policy
// violation) for a while; batches are nacked and nothing is saved, then the
// broker accepts and the source catches up.
func TestTopicCreationFailureNacks(t *testing.T) {
	b := startBroker(t, broker.Config{})
	var refuse atomic.Bool
	refuse.Store(true)
	var refused atomic.Int64
	b.Cluster().ControlKey(int16(kmsg.CreateTopics), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		if !refuse.Load() {
			return nil, nil, false
		}
		refused.Add(1)
		r := req.(*kmsg.CreateTopicsRequest)
		resp := r.ResponseKind().(*kmsg.CreateTopicsResponse)
		for _, tp := range r.Topics {
			rt := kmsg.NewCreateTopicsResponseTopic()
			rt.Topic = tp.Topic
			rt.ErrorCode = kerr.PolicyViolation.Code
			msg := "topic creation is disabled"
			rt.ErrorMessage = &msg
			resp.Topics = append(resp.Topics, rt)
		}
		return resp, nil, true
	})
	src := &seqSource{batch: 5, limit: 20}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{Topics: []definition.Topics{literal("made")}, Source: src, Store: store, BootstrapServers: b.Addr(), Tracker: tr,
		RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 10 * time.Millisecond})
	testwait.For(t, time.Minute, "three nacks", func() bool { _, _, _, n := src.snapshot(); return n >= 3 })
	snap := tr.Snapshot()
	if !strings.Contains(snap.LastError, `create topic "made"`) || snap.Counters.Acked != 0 || store.get("seq") != "" {
		t.Fatalf("while refusing: %+v, state %q", snap, store.get("seq"))
	}
	refuse.Store(false)
	testwait.For(t, time.Minute, "state 20", func() bool { return store.get("seq") == "20" })
	if err := r.stop(t); err != nil && !errors.Is(err, ErrTooManyNacks) {
		t.Fatal(err)
	}
	if got := seqs(t, readTopic(t, b, "made")); len(got) != 20 || got[0] != 0 || got[19] != 19 {
		t.Fatalf("topic = %v", got)
	}
}
