package sdktest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

func TestProduceAndWaitTopic(t *testing.T) {
	b := sdktest.Broker(t, "in")
	recs := sdktest.Records("in", 0, 5)
	sdktest.ProduceRecords(t, b, "in", recs)
	got := sdktest.WaitTopic(t, b, "in", 5)
	if len(got) != 5 {
		t.Fatalf("read %d records, want 5", len(got))
	}
	for i, r := range got {
		if string(r.Value) != string(recs[i].Payload) || string(r.Key) != string(recs[i].Key) || r.Headers["n"] != string(recs[i].Headers[0].Value) {
			t.Errorf("record %d = %+v, want payload %s", i, r, recs[i].Payload)
		}
	}
}

func TestMemStore(t *testing.T) {
	s := sdktest.NewMemStore()
	ctx := context.Background()
	if b, err := s.Load(ctx, "k"); b != nil || err != nil {
		t.Fatalf("Load of an empty store = %q, %v", b, err)
	}
	blob := []byte("v1")
	if err := s.Save(ctx, "k", blob); err != nil {
		t.Fatal(err)
	}
	blob[0] = 'x'
	if got := s.Get("k"); string(got) != "v1" || s.Saves() != 1 {
		t.Fatalf("Get = %q after %d saves; want a copy of v1", got, s.Saves())
	}
	boom := errors.New("boom")
	s.Fail(boom)
	if err := s.Save(ctx, "k", []byte("v2")); !errors.Is(err, boom) || string(s.Get("k")) != "v1" {
		t.Fatalf("a failing Save returned %v and left %q", err, s.Get("k"))
	}
}

// seq is a small stage-and-apply source: batches of 5 sequence numbers up
// to limit, the next number as its state.
type seq struct {
	mu                   sync.Mutex
	committed, candidate int
	limit                int
}

func (s *seq) Poll(ctx context.Context) (sdk.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.committed >= s.limit {
		select {
		case <-ctx.Done():
		case <-time.After(10 * time.Millisecond):
		}
		return sdk.Batch{}, nil
	}
	var b sdk.Batch
	n := s.committed
	for ; n < min(s.committed+5, s.limit); n++ {
		b.Messages = append(b.Messages, sdk.Message{Payload: []byte(`{"n":` + strconv.Itoa(n) + `}`)})
	}
	s.candidate = n
	b.State = []byte(strconv.Itoa(n))
	return b, nil
}

func (s *seq) Open(context.Context, []byte) error { return nil }

func (s *seq) OnBatchResult(_ context.Context, r sdk.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == sdk.Ack {
		s.committed = max(s.committed, s.candidate)
	}
	return nil
}

func (s *seq) Close(context.Context) error { return nil }

func TestRunSource(t *testing.T) {
	if testing.Short() {
		t.Skip("runs librdkafka producers; skipped with -short")
	}
	b := sdktest.Broker(t)
	run := sdktest.RunSource(t, b, &seq{limit: 12}, sdktest.SourceTopics("out"), nil)
	recs := sdktest.WaitTopic(t, b, "out", 12)
	sdktest.Eventually(t, 30*time.Second, func() error {
		if got := string(run.Store.Get(run.Key)); got != "12" {
			return fmt.Errorf("committed state %q, want 12", got)
		}
		return nil
	})
	if err := run.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	for i, r := range recs[:12] {
		var v struct{ N int }
		if err := json.Unmarshal(r.Value, &v); err != nil || v.N != i {
			t.Fatalf("record %d = %s", i, r.Value)
		}
	}
	if got := run.Tracker.Snapshot().Counters.Produced; got < 12 {
		t.Errorf("tracker counts %d records produced, want at least 12", got)
	}
}

// memSink keeps every payload it is handed.
type memSink struct {
	mu       sync.Mutex
	payloads [][]byte
	closed   bool
}

func (s *memSink) Open(context.Context) error { return nil }

func (s *memSink) Consume(_ context.Context, batch []sdk.Record) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range batch {
		s.payloads = append(s.payloads, r.Payload)
	}
	return nil
}

func (s *memSink) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *memSink) written(*testing.T) [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]byte(nil), s.payloads...)
}

func TestRunSink(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a librdkafka consumer; skipped with -short")
	}
	b := sdktest.Broker(t, "in")
	sent := sdktest.Records("in", 0, 20)
	sdktest.ProduceRecords(t, b, "in", sent)
	sink := &memSink{}
	run := sdktest.RunSink(t, b, sink, sdktest.SinkTopics("in"))
	sdktest.Eventually(t, 60*time.Second, func() error {
		if n := len(sink.written(t)); n < len(sent) {
			return fmt.Errorf("the sink has %d of %d records", n, len(sent))
		}
		return nil
	})
	if err := run.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if !sink.closed {
		t.Error("the sink was not closed on Stop")
	}
	sdktest.CheckWritten(t, sent, sink.written(t))
}
