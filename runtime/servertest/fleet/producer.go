package fleet

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Producer writes small JSON records to topics in a loop and counts, per
// topic, the records the broker acknowledged: the offsets below Acked are
// the ones a sink owes.
type Producer struct {
	cl    *kgo.Client
	stop  chan struct{}
	wg    sync.WaitGroup
	acked map[string]*atomic.Int64
}

// NewProducer writes chunk records to each topic every interval until
// Halt.
func NewProducer(addr string, topics []string, chunk int, every time.Duration) (*Producer, error) {
	cl, err := NewClient(addr, kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return nil, err
	}
	p := &Producer{cl: cl, stop: make(chan struct{}), acked: map[string]*atomic.Int64{}}
	for _, topic := range topics {
		n := &atomic.Int64{}
		p.acked[topic] = n
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pad := strings.Repeat("p", 40)
			for {
				select {
				case <-p.stop:
					return
				case <-time.After(every):
				}
				recs := make([]*kgo.Record, chunk)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"n":%d,"pad":%q}`, n.Load()+int64(i), pad)}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res := cl.ProduceSync(ctx, recs...)
				cancel()
				// Count up to the highest acknowledged offset + 1: the
				// offsets of a topic written by this producer alone.
				for _, r := range res {
					if r.Err == nil && r.Record.Offset+1 > n.Load() {
						n.Store(r.Record.Offset + 1)
					}
				}
			}
		}()
	}
	return p, nil
}

// StartProducer is NewProducer for a test: an error fails t.
func StartProducer(t testing.TB, addr string, topics []string, chunk int, every time.Duration) *Producer {
	t.Helper()
	p, err := NewProducer(addr, topics, chunk, every)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Acked returns, per topic, the number of offsets acknowledged so far.
func (p *Producer) Acked() map[string]int64 {
	out := map[string]int64{}
	for t, n := range p.acked {
		out[t] = n.Load()
	}
	return out
}

// Halt stops writing and returns Acked.
func (p *Producer) Halt() map[string]int64 {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
	p.cl.Close()
	return p.Acked()
}
