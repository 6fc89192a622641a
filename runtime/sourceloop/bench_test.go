package sourceloop

import (
	"context"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/state"
)

// BenchmarkTransactions compares a source's throughput with a transaction
// per batch (distributed mode) and without (standalone), both against the
// broker store, in batches of 1000 records: compare the records/s of the
// two sub-benchmarks of one run.
func BenchmarkTransactions(b *testing.B) {
	for _, txn := range []bool{false, true} {
		name := "plain"
		if txn {
			name = "transactional"
		}
		b.Run(name, func(b *testing.B) {
			br := startBroker(b, broker.Config{AutoCreateTopics: true})
			st, err := state.NewBrokerStore(state.BrokerConfig{BootstrapServers: br.Addr(), Logger: testLogger(b)})
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			n := max(b.N, 1) * 1000
			src := &seqSource{batch: 1000, limit: n}
			cfg := Config{Topics: []definition.Topics{literal("bench")}, Source: src, Store: st, BootstrapServers: br.Addr()}
			if txn {
				cfg.TransactionalID = "bench"
			}
			b.ResetTimer()
			t0 := time.Now()
			cfg.Key, cfg.Logger = "seq", testLogger(b)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() { done <- Run(ctx, cfg) }()
			for {
				if c, _, _, _ := src.snapshot(); c >= n {
					break
				}
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			b.ReportMetric(float64(n)/time.Since(t0).Seconds(), "records/s")
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
