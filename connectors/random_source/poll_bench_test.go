package randomsource

import (
	"context"
	"testing"

	"github.com/picomq/pico-connectors/runtime/plugin"
)

// BenchmarkPoll measures generating one batch of 1000 records of 256 bytes.
func BenchmarkPoll(b *testing.B) {
	s := newSource(options{RecordsPerBatch: 1000, PayloadSize: 256, KeyShape: keySequence, PayloadShape: payloadJSON, Seed: 1})
	for b.Loop() {
		s.Poll(context.Background())
		s.OnBatchResult(context.Background(), plugin.Ack)
	}
}
