package randomsource

import (
	"context"
	"testing"

	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// BenchmarkPoll measures generating one batch of 1000 records of 256 bytes.
func BenchmarkPoll(b *testing.B) {
	cfg := randomsourceconfig.Default()
	cfg.RecordsPerBatch = 1000
	s := newSource(cfg)
	for b.Loop() {
		s.Poll(context.Background())
		s.OnBatchResult(context.Background(), sdk.Ack)
	}
}
