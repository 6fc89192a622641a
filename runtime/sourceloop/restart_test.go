package sourceloop

import (
	"strconv"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
)

// TestIdempotentProducerSurvivesAFreshBroker: the broker is replaced by
// one that has never seen the producer (an in-memory broker restarted): the
// idempotent producers recover, and the source's records flow again.
func TestIdempotentProducerSurvivesAFreshBroker(t *testing.T) {
	b := startBroker(t, broker.Config{})
	addr := b.Addr()
	src := &seqSource{batch: 10, limit: 1000000}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{Topics: []definition.Topics{literal("fresh")}, Source: src, Store: store, BootstrapServers: addr, Tracker: tr,
		RetryDelay: 5 * time.Millisecond, MaxRetryDelay: 50 * time.Millisecond, DeliveryTimeout: 2 * time.Second})
	testwait.For(t, time.Minute, "100 acknowledged", func() bool { c, _, _, _ := src.snapshot(); return c >= 100 })
	b.Close()
	b2 := startBroker(t, broker.Config{Address: addr})
	before, _ := strconv.Atoi(store.get("seq"))
	testwait.For(t, time.Minute, "records on the fresh broker", func() bool { return b2.HighWatermark("fresh") >= 200 })
	after, _ := strconv.Atoi(store.get("seq"))
	if after <= before {
		t.Fatalf("checkpoint %d -> %d", before, after)
	}
	r.stop(t)
	t.Logf("last error: %s", tr.Snapshot().LastError)
}
