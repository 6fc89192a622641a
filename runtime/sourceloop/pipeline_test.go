package sourceloop

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

// pipeSource is a Pipelined source: Poll continues after the last
// candidate, Ack promotes the oldest outstanding one, Nack drops them all.
type pipeSource struct {
	mu          sync.Mutex
	committed   int
	next        int
	outstanding []int
	batch       int
	limit       int
	depth       int
	maxOut      int // most batches outstanding at once
	acks, nacks int
	// order is broken when an Ack arrives with no outstanding candidate.
	broken string
	// badOnce: the first time record n is polled its payload is not JSON.
	badOnce map[int]bool
}

func (s *pipeSource) PollAhead() int { return s.depth }

func (s *pipeSource) Poll(ctx context.Context) (sdk.Batch, error) {
	s.mu.Lock()
	start := s.next
	s.mu.Unlock()
	if start >= s.limit {
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Millisecond):
		}
		return sdk.Batch{}, nil
	}
	end := min(start+s.batch, s.limit)
	var b sdk.Batch
	for n := start; n < end; n++ {
		p := []byte(fmt.Sprintf(`{"seq":%d}`, n))
		s.mu.Lock()
		if s.badOnce[n] {
			delete(s.badOnce, n)
			p = []byte("not json")
		}
		s.mu.Unlock()
		b.Messages = append(b.Messages, sdk.Message{Key: []byte(strconv.Itoa(n)), Payload: p})
	}
	b.State = []byte(strconv.Itoa(end))
	s.mu.Lock()
	s.next = end
	s.outstanding = append(s.outstanding, end)
	s.maxOut = max(s.maxOut, len(s.outstanding))
	s.mu.Unlock()
	return b, nil
}

// Open continues after a checkpoint, the next sequence number.
func (s *pipeSource) Open(_ context.Context, blob []byte) error {
	if blob == nil {
		return nil
	}
	n, err := strconv.Atoi(string(blob))
	if err != nil {
		return fmt.Errorf("checkpoint %q: %w", blob, err)
	}
	s.committed, s.next = n, n
	return nil
}

func (s *pipeSource) OnBatchResult(_ context.Context, r sdk.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == sdk.Nack {
		s.nacks++
		s.outstanding = nil
		s.next = s.committed
		return nil
	}
	if len(s.outstanding) == 0 {
		if s.next == s.committed {
			return nil // the Ack of an empty batch
		}
		s.broken = "ack with no outstanding candidate"
		return nil
	}
	s.acks++
	s.committed = s.outstanding[0]
	s.outstanding = s.outstanding[1:]
	return nil
}

func (s *pipeSource) Close(context.Context) error { return nil }

// flakyStore fails the saves whose number (from 1) fail returns true for,
// and records every state it saved and how often each state failed.
type flakyStore struct {
	memStore
	n      int
	fail   func(n int) bool
	saved  []int
	failed map[int]int
}

func (f *flakyStore) Save(ctx context.Context, key string, blob []byte) error {
	v, _ := strconv.Atoi(string(blob))
	f.memStore.mu.Lock()
	f.n++
	n := f.n
	f.memStore.mu.Unlock()
	if f.fail(n) {
		f.memStore.mu.Lock()
		if f.failed == nil {
			f.failed = map[int]int{}
		}
		f.failed[v]++
		f.memStore.mu.Unlock()
		return errors.New("state endpoint returned 503")
	}
	f.memStore.mu.Lock()
	f.saved = append(f.saved, v)
	f.memStore.mu.Unlock()
	return f.memStore.Save(ctx, key, blob)
}

// TestPipelinedSourceSavesInOrder: with several batches in flight and
// state saves failing now and then, the states are saved in order, each
// one batch after the last (never ahead of a failed batch), and every
// record reaches the topic, once more for each failed save of its batch
// and never for the batches polled after it (they are not produced
// before the batch before them is saved).
func TestPipelinedSourceSavesInOrder(t *testing.T) {
	b := startBroker(t, broker.Config{})
	const limit, batch = 3000, 50
	src := &pipeSource{batch: batch, limit: limit, depth: 4}
	store := &flakyStore{fail: func(n int) bool { return n == 5 || n == 17 || n == 18 }}
	r := start(t, Config{Topics: []definition.Topics{literal("pipe")}, Source: src, Store: store, BootstrapServers: b.Addr(),
		RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Millisecond})
	testwait.For(t, time.Minute, "state 3000", func() bool { return store.get("seq") == strconv.Itoa(limit) })
	r.stop(t)
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.broken != "" || src.maxOut < 2 || src.nacks != 3 {
		t.Fatalf("source: broken %q, at most %d batches in flight, %d nacks (want 3)", src.broken, src.maxOut, src.nacks)
	}
	for i, v := range store.saved {
		if v != (i+1)*batch {
			t.Fatalf("save %d stored %d, want %d: saves %v", i, v, (i+1)*batch, store.saved)
		}
	}
	seen := map[int]int{}
	for _, n := range seqs(t, readTopic(t, b, "pipe")) {
		seen[n]++
	}
	for n := 0; n < limit; n++ {
		if want := 1 + store.failed[(n/batch+1)*batch]; seen[n] != want {
			t.Fatalf("record %d is on the topic %d times, want %d (failed saves: %v)", n, seen[n], want, store.failed)
		}
	}
}

// TestPipelinedSourceBadRecordNacksInOrder: a batch that fails before it is
// sent (a record that is not JSON, no dead-letter topic) is nacked after the
// batches before it are saved, and the source reads it again.
func TestPipelinedSourceBadRecordNacksInOrder(t *testing.T) {
	b := startBroker(t, broker.Config{})
	const limit, batch = 1000, 20
	src := &pipeSource{batch: batch, limit: limit, depth: 3, badOnce: map[int]bool{430: true}}
	store := &flakyStore{fail: func(int) bool { return false }}
	r := start(t, Config{Topics: []definition.Topics{literal("pipe")}, Source: src, Store: store, BootstrapServers: b.Addr(),
		RetryDelay: time.Millisecond, MaxRetryDelay: 2 * time.Millisecond})
	testwait.For(t, time.Minute, "state 1000", func() bool { return store.get("seq") == strconv.Itoa(limit) })
	r.stop(t)
	src.mu.Lock()
	defer src.mu.Unlock()
	if src.broken != "" || src.nacks != 1 {
		t.Fatalf("source: broken %q, %d nacks (want 1)", src.broken, src.nacks)
	}
	for i, v := range store.saved {
		if v != (i+1)*batch {
			t.Fatalf("save %d stored %d, want %d", i, v, (i+1)*batch)
		}
	}
	got := seqs(t, readTopic(t, b, "pipe"))
	seen := map[int]int{}
	for _, n := range got {
		seen[n]++
	}
	for n := 0; n < limit; n++ {
		if seen[n] == 0 {
			t.Fatalf("record %d is not on the topic", n)
		}
		if n < 420 && seen[n] != 1 {
			t.Fatalf("record %d, before the failed batch, is on the topic %d times", n, seen[n])
		}
	}
}
