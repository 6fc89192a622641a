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

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/state"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// ownerSource writes batches of ten {"seq":n} records with an owner
// header, and the checkpoint "OWNER:NEXT"; Open starts from a checkpoint.
// While paused, Poll blocks (as in a process stopped with SIGSTOP).
type ownerSource struct {
	owner string

	mu        sync.Mutex
	next      int // first sequence number of the next batch
	candidate int
	paused    chan struct{} // non-nil: Poll blocks until it is closed
	blocked   chan struct{} // closed when Poll blocks on paused
}

func (s *ownerSource) Open(_ context.Context, blob []byte) error {
	if blob == nil {
		return nil
	}
	_, n, _ := strings.Cut(string(blob), ":")
	next, err := strconv.Atoi(n)
	if err != nil {
		return fmt.Errorf("checkpoint %q: %w", blob, err)
	}
	s.mu.Lock()
	s.next = next
	s.mu.Unlock()
	return nil
}

func (s *ownerSource) pause() {
	s.mu.Lock()
	s.paused, s.blocked = make(chan struct{}), make(chan struct{})
	s.mu.Unlock()
}

func (s *ownerSource) Poll(ctx context.Context) (sdk.Batch, error) {
	s.mu.Lock()
	paused, blocked := s.paused, s.blocked
	s.mu.Unlock()
	if paused != nil {
		close(blocked)
		select {
		case <-paused:
		case <-ctx.Done():
			return sdk.Batch{}, nil
		}
		s.mu.Lock()
		s.paused = nil
		s.mu.Unlock()
	}
	time.Sleep(5 * time.Millisecond)
	s.mu.Lock()
	defer s.mu.Unlock()
	var b sdk.Batch
	for n := s.next; n < s.next+10; n++ {
		b.Messages = append(b.Messages, sdk.Message{Payload: fmt.Appendf(nil, `{"seq":%d}`, n),
			Headers: []sdk.Header{{Key: "owner", Value: []byte(s.owner)}}})
	}
	s.candidate = s.next + 10
	b.State = fmt.Appendf(nil, "%s:%d", s.owner, s.candidate)
	return b, nil
}

func (s *ownerSource) OnBatchResult(_ context.Context, r sdk.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == sdk.Ack {
		s.next = s.candidate
	}
	return nil
}

func (s *ownerSource) Close(context.Context) error { return nil }

// readCommitted returns every committed record of topic (read_committed,
// up to the last stable offset).
func readCommitted(t *testing.T, addr, topic string) []*kafka.Message {
	t.Helper()
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": addr, "group.id": "fence-test", "isolation.level": "read_committed",
		"enable.partition.eof": true, "enable.auto.commit": false, "go.logs.channel.enable": true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		t.Fatal(err)
	}
	var out []*kafka.Message
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			out = append(out, e)
		case kafka.PartitionEOF:
			return out
		}
	}
	t.Fatalf("no end of %s in 60s", topic)
	return nil
}

func header(m *kafka.Message, key string) string {
	for _, h := range m.Headers {
		if h.Key == key {
			return string(h.Value)
		}
	}
	return ""
}

// TestTransactionsFenceTheStaleOwner: owner a runs, then pauses; b starts
// with the same transactional id, which fences a's producer, loads a's last
// committed checkpoint and goes on from it. When a wakes up its next batch
// fails with ErrFenced: the committed records are 0..N-1 exactly once, in
// order, none of a's after b's first, and no checkpoint of a's after b's
// first.
func TestTransactionsFenceTheStaleOwner(t *testing.T) {
	b := startBroker(t, broker.Config{AutoCreateTopics: true})
	topics := []definition.Topics{literal("seq")}
	newStore := func() *state.BrokerStore {
		st, err := state.NewBrokerStore(state.BrokerConfig{BootstrapServers: b.Addr(), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	const txnID = "pico-connectors.source.seq"
	srcA := &ownerSource{owner: "a"}
	a := start(t, Config{Topics: topics, Source: srcA, Store: newStore(), BootstrapServers: b.Addr(), TransactionalID: txnID})
	testwait.For(t, time.Minute, "a's first five batches", func() bool { return a.tr.Counters.Acked.Load() >= 5 })
	srcA.pause()
	<-srcA.blocked
	ackedA := a.tr.Counters.Acked.Load()

	srcB := &ownerSource{owner: "b"}
	bRun := start(t, Config{Topics: topics, Source: srcB, Store: newStore(), BootstrapServers: b.Addr(), TransactionalID: txnID})
	testwait.For(t, time.Minute, "b's first five batches", func() bool { return bRun.tr.Counters.Acked.Load() >= 5 })
	close(srcA.paused)
	var errA error
	select {
	case errA = <-a.done:
		close(a.done)
	case <-time.After(60 * time.Second):
		t.Fatal("the stale owner did not stop")
	}
	if !errors.Is(errA, ErrFenced) {
		t.Fatalf("stale owner's Run = %v, want ErrFenced", errA)
	}
	if got := a.tr.Counters.Acked.Load(); got != ackedA {
		t.Fatalf("the stale owner acknowledged %d batches after it was fenced", got-ackedA)
	}
	if st := a.tr.Status(); st == status.Error {
		t.Fatalf("fenced owner's status %s: a fence is not an error of the source", st)
	}
	if err := bRun.stop(t); err != nil {
		t.Fatal(err)
	}

	recs := readCommitted(t, b.Addr(), "seq")
	seenB := false
	for i, m := range recs {
		var want = fmt.Sprintf(`{"seq":%d}`, i)
		if string(m.Value) != want {
			t.Fatalf("committed record %d is %s, want %s (a gap or a duplicate)", i, m.Value, want)
		}
		switch header(m, "owner") {
		case "b":
			seenB = true
		case "a":
			if seenB {
				t.Fatalf("record %d (%s) committed by the stale owner after the new owner's first", i, m.Value)
			}
		}
	}
	if !seenB || len(recs) < 100 {
		t.Fatalf("%d committed records, b's seen %v", len(recs), seenB)
	}
	cps := readCommitted(t, b.Addr(), "pico-connectors.state.seq")
	seenB = false
	for _, m := range cps {
		owner, _, _ := strings.Cut(string(m.Value), ":")
		if owner == "b" {
			seenB = true
		} else if seenB {
			t.Fatalf("checkpoint %s saved by the stale owner after the new owner's first", m.Value)
		}
	}
	if last := string(cps[len(cps)-1].Value); last != fmt.Sprintf("b:%d", len(recs)) {
		t.Fatalf("last checkpoint %s, want b:%d", last, len(recs))
	}
	t.Logf("%d records and %d checkpoints committed, each once; a stopped with: %v", len(recs), len(cps), errA)
}

// TestTransactionalNeedsBrokerStore: a file or http store cannot take part
// in the batch's transaction, so Run refuses it.
func TestTransactionalNeedsBrokerStore(t *testing.T) {
	err := Run(context.Background(), Config{Key: "seq", Topics: []definition.Topics{literal("seq")}, Source: &ownerSource{},
		Store: &memStore{}, BootstrapServers: "127.0.0.1:1", TransactionalID: "x", Logger: testLogger(t)})
	if err == nil || !strings.Contains(err.Error(), `state.storage = "broker"`) {
		t.Fatalf("Run = %v", err)
	}
}

// TestTransactionsFenceAStaleCommit: owner a is stopped in the middle of
// a commit (its EndTxn held by the broker, as if the process were paused
// between producing a batch and committing it); b takes over, which aborts
// a's open transaction. When a's commit reaches the broker it is refused:
// the batch a produced is never visible to a read_committed consumer and
// its checkpoint never loads.
func TestTransactionsFenceAStaleCommit(t *testing.T) {
	b := startBroker(t, broker.Config{AutoCreateTopics: true})
	var (
		mu      sync.Mutex
		armed   bool
		held    = make(chan struct{})
		release = make(chan struct{})
	)
	b.Cluster().ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		b.Cluster().KeepControl()
		mu.Lock()
		hold := armed && req.(*kmsg.EndTxnRequest).Commit
		armed = armed && !hold
		mu.Unlock()
		if hold {
			close(held)
			b.Cluster().SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	topics := []definition.Topics{literal("seq")}
	newStore := func() *state.BrokerStore {
		st, err := state.NewBrokerStore(state.BrokerConfig{BootstrapServers: b.Addr(), Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(st.Close)
		return st
	}
	const txnID = "pico-connectors.source.seq"
	srcA := &ownerSource{owner: "a"}
	a := start(t, Config{Topics: topics, Source: srcA, Store: newStore(), BootstrapServers: b.Addr(), TransactionalID: txnID, DeliveryTimeout: 20 * time.Second})
	testwait.For(t, time.Minute, "a's first three batches", func() bool { return a.tr.Counters.Acked.Load() >= 3 })
	mu.Lock()
	armed = true
	mu.Unlock()
	<-held
	ackedA := a.tr.Counters.Acked.Load()

	srcB := &ownerSource{owner: "b"}
	bRun := start(t, Config{Topics: topics, Source: srcB, Store: newStore(), BootstrapServers: b.Addr(), TransactionalID: txnID})
	testwait.For(t, time.Minute, "b's first three batches", func() bool { return bRun.tr.Counters.Acked.Load() >= 3 })
	close(release)
	select {
	case err := <-a.done:
		close(a.done)
		if !errors.Is(err, ErrFenced) {
			t.Fatalf("stale owner's Run = %v, want ErrFenced", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the stale owner did not stop")
	}
	if got := a.tr.Counters.Acked.Load(); got != ackedA {
		t.Fatalf("the stale owner acknowledged the held batch")
	}
	if err := bRun.stop(t); err != nil {
		t.Fatal(err)
	}
	recs := readCommitted(t, b.Addr(), "seq")
	for i, m := range recs {
		if want := fmt.Sprintf(`{"seq":%d}`, i); string(m.Value) != want {
			t.Fatalf("committed record %d is %s, want %s", i, m.Value, want)
		}
	}
	firstB := -1
	for i, m := range recs {
		if header(m, "owner") == "b" {
			firstB = i
			break
		}
	}
	if firstB != int(ackedA)*10 {
		t.Fatalf("b started at record %d, want %d (right after a's last committed batch)", firstB, ackedA*10)
	}
	cps := readCommitted(t, b.Addr(), "pico-connectors.state.seq")
	for _, m := range cps {
		if string(m.Value) == fmt.Sprintf("a:%d", (ackedA+1)*10) {
			t.Fatalf("the held batch's checkpoint %s is committed", m.Value)
		}
	}
}
