package sourceloop

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// seqSource returns JSON records {"seq":n,"tenant":...} in batches, keeps a
// committed and a candidate cursor, and stops producing at limit.
type seqSource struct {
	mu        sync.Mutex
	committed int
	candidate int
	batch     int
	limit     int
	polls     int
	acks      int
	nacks     int
	results   []sdk.Result
	// payload overrides the record of sequence number n.
	payload func(n int) []byte
	// pollErr, when it returns an error for poll number i, fails that poll.
	pollErr func(i int) error
	// empty, when true for poll number i, returns an empty batch carrying
	// state (a misbehaving source).
	empty func(i int) bool
	// topic, when it returns a name for sequence number n, sets that
	// record's Message.Topic.
	topic  func(n int) string
	closed bool
}

func (s *seqSource) Poll(ctx context.Context) (sdk.Batch, error) {
	s.mu.Lock()
	s.polls++
	i := s.polls
	s.mu.Unlock()
	if s.pollErr != nil {
		if err := s.pollErr(i); err != nil {
			return sdk.Batch{}, err
		}
	}
	if s.empty != nil && s.empty(i) {
		s.mu.Lock()
		s.candidate = s.committed
		s.mu.Unlock()
		return sdk.Batch{State: []byte("999999")}, nil
	}
	s.mu.Lock()
	start := s.committed
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
		p := []byte(fmt.Sprintf(`{"seq":%d,"tenant":"t%d"}`, n, n%2))
		if s.payload != nil {
			p = s.payload(n)
		}
		b.Messages = append(b.Messages, sdk.Message{Key: []byte(strconv.Itoa(n)), Payload: p,
			Headers: []sdk.Header{{Key: "h", Value: []byte("v" + strconv.Itoa(n%3))}}})
		if s.topic != nil {
			b.Messages[len(b.Messages)-1].Topic = s.topic(n)
		}
	}
	b.State = []byte(strconv.Itoa(end))
	s.mu.Lock()
	s.candidate = end
	s.mu.Unlock()
	return b, nil
}

func (s *seqSource) Open(context.Context, []byte) error { return nil }

func (s *seqSource) OnBatchResult(_ context.Context, r sdk.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, r)
	if r == sdk.Ack {
		s.acks++
		s.committed = s.candidate
	} else {
		s.nacks++
		s.candidate = s.committed // drop the candidate
	}
	return nil
}

func (s *seqSource) Close(context.Context) error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	return nil
}

func (s *seqSource) snapshot() (committed, polls, acks, nacks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed, s.polls, s.acks, s.nacks
}

// memStore is a state store in memory whose saves fail while failing is
// set.
type memStore struct {
	mu      sync.Mutex
	blobs   map[string][]byte
	saves   int
	failing bool
	fails   int
}

func (m *memStore) Load(_ context.Context, key string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.blobs[key], nil
}

func (m *memStore) Save(_ context.Context, key string, blob []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failing {
		m.fails++
		return errors.New("state endpoint returned 500 Internal Server Error")
	}
	if m.blobs == nil {
		m.blobs = map[string][]byte{}
	}
	m.blobs[key] = append([]byte(nil), blob...)
	m.saves++
	return nil
}

func (m *memStore) get(key string) string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return string(m.blobs[key])
}

func (m *memStore) setFailing(f bool) {
	m.mu.Lock()
	m.failing = f
	m.mu.Unlock()
}

func startBroker(t testing.TB, cfg broker.Config) *broker.Broker {
	t.Helper()
	if cfg.Address == "" {
		cfg.Address = "127.0.0.1:0"
	}
	b, err := broker.Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func testLogger(t testing.TB) *slog.Logger {
	if testing.Verbose() {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

type running struct {
	cancel context.CancelFunc
	done   chan error
	tr     *status.Tracker
}

func start(t *testing.T, cfg Config) *running {
	t.Helper()
	if cfg.Key == "" {
		cfg.Key = "seq"
	}
	if cfg.Tracker == nil {
		cfg.Tracker = status.New("source", cfg.Key, nil)
	}
	if cfg.Logger == nil {
		cfg.Logger = testLogger(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), tr: cfg.Tracker}
	go func() { r.done <- Run(ctx, cfg) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *running) stop(t *testing.T) error {
	t.Helper()
	r.cancel()
	select {
	case err, ok := <-r.done:
		if ok {
			close(r.done)
		}
		return err
	case <-time.After(60 * time.Second):
		t.Fatal("source loop did not stop")
	}
	return nil
}

func seqs(t *testing.T, recs []broker.Record) []int {
	t.Helper()
	out := make([]int, 0, len(recs))
	for _, r := range recs {
		var v struct{ Seq int }
		if err := json.Unmarshal(r.Value, &v); err != nil {
			t.Fatalf("record at offset %d: %v: %s", r.Offset, err, r.Value)
		}
		out = append(out, v.Seq)
	}
	return out
}

func readTopic(t *testing.T, b *broker.Broker, topic string) []broker.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs, err := b.ReadTopic(ctx, topic)
	if err != nil {
		t.Fatal(err)
	}
	return recs
}

func literal(topic string) definition.Topics {
	return definition.Topics{Topic: definition.Route{Literal: topic}, Schema: "json", CreateTopics: true, LingerTime: "1ms"}
}

func TestEveryRecordArrivesInOrder(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 100, limit: 2000}
	store := &memStore{}
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: store, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "state 2000", func() bool { return store.get("seq") == "2000" })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	got := seqs(t, readTopic(t, b, "seq"))
	if len(got) != 2000 {
		t.Fatalf("topic has %d records, want 2000", len(got))
	}
	for i, n := range got {
		if n != i {
			t.Fatalf("record %d has seq %d", i, n)
		}
	}
	snap := r.tr.Snapshot()
	if snap.Status != status.Stopped || snap.Counters.Produced != 2000 || snap.Counters.Acked != 20 || snap.Counters.Nacked != 0 || snap.Counters.StateSaves != 20 {
		t.Fatalf("snapshot = %+v", snap)
	}
	if !src.closed {
		t.Fatal("source not closed")
	}
}

// TestSmallBatchIsNotLingered: a batch of fewer records than batch_length
// is sent at once, not after linger_time (20 s here), since nothing more
// is produced before it is resolved; two blocks, one of them full.
func TestSmallBatchIsNotLingered(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 10, limit: 100}
	store := &memStore{}
	small, full := literal("small"), literal("full")
	small.LingerTime, full.LingerTime, full.BatchLength = "20s", "20s", 10
	r := start(t, Config{Topics: []definition.Topics{small, full}, Source: src, Store: store, BootstrapServers: b.Addr()})
	testwait.For(t, 15*time.Second, "state 100 (ten batches) before one linger_time", func() bool { return store.get("seq") == "100" })
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	for _, topic := range []string{"small", "full"} {
		if got := seqs(t, readTopic(t, b, topic)); len(got) != 100 {
			t.Fatalf("%s has %d records, want 100", topic, len(got))
		}
	}
}

func TestFieldRoutingFanOutKeysHeaders(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 10, limit: 20}
	store := &memStore{}
	blocks := []definition.Topics{
		{Topic: definition.Route{Strategy: "field", Path: "tenant", Template: "orders.{value}"}, Schema: "json", CreateTopics: true, BatchLength: 5, LingerTime: "1ms"},
		{Topic: definition.Route{Strategy: "header", Path: "h", Template: "by-header.{value}"}, Schema: "raw", CreateTopics: true},
		literal("all"),
	}
	r := start(t, Config{Topics: blocks, Source: src, Store: store, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "state 20", func() bool { return store.get("seq") == "20" })
	r.stop(t)
	for topic, want := range map[string][]int{
		"orders.t0":    {0, 2, 4, 6, 8, 10, 12, 14, 16, 18},
		"orders.t1":    {1, 3, 5, 7, 9, 11, 13, 15, 17, 19},
		"by-header.v0": {0, 3, 6, 9, 12, 15, 18},
		"all":          nil,
	} {
		recs := readTopic(t, b, topic)
		got := seqs(t, recs)
		if want == nil {
			if len(got) != 20 {
				t.Errorf("%s: %d records, want 20", topic, len(got))
			}
			continue
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: seqs %v, want %v", topic, got, want)
		}
		for _, rec := range recs {
			if rec.Headers["h"] == "" || string(rec.Key) == "" {
				t.Errorf("%s: key or header lost: %+v", topic, rec)
			}
		}
	}
}

// TestMessageTopicOverride: a message with Topic goes to that topic once,
// as is (not JSON, against a json block), whatever the blocks' routes and
// however many blocks fan out; the others go through every block.
func TestMessageTopicOverride(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 10, limit: 20, topic: func(n int) string {
		if n%5 == 0 {
			return "tx.meta"
		}
		return ""
	}}
	src.payload = func(n int) []byte {
		if n%5 == 0 {
			return []byte("BEGIN " + strconv.Itoa(n))
		}
		return []byte(fmt.Sprintf(`{"seq":%d,"tenant":"t%d"}`, n, n%2))
	}
	store := &memStore{}
	blocks := []definition.Topics{
		{Topic: definition.Route{Literal: "main"}, Schema: "json", CreateTopics: true},
		{Topic: definition.Route{Literal: "copy"}, Schema: "json", CreateTopics: true},
	}
	r := start(t, Config{Topics: blocks, Source: src, Store: store, BootstrapServers: b.Addr()})
	testwait.For(t, time.Minute, "state 20", func() bool { return store.get("seq") == "20" })
	r.stop(t)
	var meta []string
	for _, rec := range readTopic(t, b, "tx.meta") {
		meta = append(meta, string(rec.Value))
	}
	if fmt.Sprint(meta) != "[BEGIN 0 BEGIN 5 BEGIN 10 BEGIN 15]" {
		t.Errorf("tx.meta: %q", meta)
	}
	for _, topic := range []string{"main", "copy"} {
		if got := seqs(t, readTopic(t, b, topic)); len(got) != 16 {
			t.Errorf("%s: seqs %v, want the 16 without a Topic", topic, got)
		}
	}
}

func TestUnroutableNacksAndThirtyNacksStop(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 10, limit: 100, payload: func(n int) []byte {
		if n == 5 {
			return []byte(`{"seq":5}`) // no tenant
		}
		return []byte(fmt.Sprintf(`{"seq":%d,"tenant":"x"}`, n))
	}}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{
		Topics: []definition.Topics{{Topic: definition.Route{Strategy: "field", Path: "tenant", Template: "t.{value}"}, CreateTopics: true}},
		Source: src, Store: store, BootstrapServers: b.Addr(), Tracker: tr,
		RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond,
	})
	var err error
	select {
	case err = <-r.done:
		close(r.done)
	case <-time.After(60 * time.Second):
		t.Fatal("poll task did not stop after thirty nacks")
	}
	if !errors.Is(err, ErrTooManyNacks) || !strings.Contains(err.Error(), `field "tenant" is missing`) {
		t.Fatalf("Run error = %v", err)
	}
	_, polls, acks, nacks := src.snapshot()
	if polls != 30 || nacks != 30 || acks != 0 {
		t.Fatalf("polls %d, acks %d, nacks %d; want 30 polls, all nacked", polls, acks, nacks)
	}
	time.Sleep(50 * time.Millisecond)
	if _, polls2, _, _ := src.snapshot(); polls2 != 30 {
		t.Fatalf("poll task still polling: %d polls", polls2)
	}
	snap := tr.Snapshot()
	if snap.Status != status.Error || snap.Counters.ConsecNacks != 30 || snap.Counters.Nacked != 30 || !strings.Contains(snap.LastError, "too many consecutive nacks") {
		t.Fatalf("snapshot = %+v", snap)
	}
	if store.get("seq") != "" || store.saves != 0 {
		t.Fatal("state saved for an unroutable batch")
	}
	if hw := b.HighWatermark("t.x"); hw > 0 {
		t.Fatalf("%d records reached the topic", hw)
	}
}

func TestFallbackTopic(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 10, limit: 10, payload: func(n int) []byte {
		if n%2 == 0 {
			return []byte(fmt.Sprintf(`{"seq":%d}`, n))
		}
		return []byte(fmt.Sprintf(`{"seq":%d,"tenant":"x"}`, n))
	}}
	store := &memStore{}
	r := start(t, Config{
		Topics: []definition.Topics{{Topic: definition.Route{Strategy: "field", Path: "tenant", Template: "t.{value}", Fallback: "dead"}, CreateTopics: true}},
		Source: src, Store: store, BootstrapServers: b.Addr(),
	})
	testwait.For(t, time.Minute, "state 10", func() bool { return store.get("seq") == "10" })
	r.stop(t)
	if got := fmt.Sprint(seqs(t, readTopic(t, b, "dead"))); got != "[0 2 4 6 8]" {
		t.Fatalf("fallback topic: %s", got)
	}
	if got := fmt.Sprint(seqs(t, readTopic(t, b, "t.x"))); got != "[1 3 5 7 9]" {
		t.Fatalf("routed topic: %s", got)
	}
}

func TestStateSaveFailureSetsErrorThenClears(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 10, limit: 50}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	store.setFailing(true)
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: store, BootstrapServers: b.Addr(),
		Tracker: tr, RetryDelay: 20 * time.Millisecond, MaxRetryDelay: 20 * time.Millisecond})
	testwait.For(t, time.Minute, "two failed saves", func() bool {
		store.mu.Lock()
		defer store.mu.Unlock()
		return store.fails >= 2
	})
	snap := tr.Snapshot()
	if snap.Status != status.Error || !strings.Contains(snap.LastError, "state save failed") || snap.Counters.StateFails < 2 || snap.Counters.Acked != 0 {
		t.Fatalf("while failing: %+v", snap)
	}
	if c, _, acks, _ := src.snapshot(); c != 0 || acks != 0 {
		t.Fatalf("source committed %d (acks %d) while the store failed", c, acks)
	}
	// The batch reached the topic (maybe several times) but is not saved.
	if hw := b.HighWatermark("seq"); hw < 20 {
		t.Fatalf("high watermark %d; the produce succeeded twice", hw)
	}
	store.setFailing(false)
	// The status clears after the save returns: wait for both.
	testwait.For(t, time.Minute, "state 50 and status Running", func() bool { return store.get("seq") == "50" && tr.Status() == status.Running })
	snap = tr.Snapshot()
	if snap.Status != status.Running || snap.Counters.ConsecNacks != 0 || snap.Counters.Acked == 0 {
		t.Fatalf("after recovery the Error must clear: %+v", snap)
	}
	r.stop(t)
	// Duplicates only of the batch that failed to save; no gaps.
	got := seqs(t, readTopic(t, b, "seq"))
	assertNoGaps(t, got, 50)
}

// assertNoGaps checks every seq below limit appears, and that apart from
// re-sent runs, the sequence never goes backwards within a run.
func assertNoGaps(t *testing.T, got []int, limit int) {
	t.Helper()
	seen := map[int]bool{}
	for _, n := range got {
		seen[n] = true
	}
	for n := 0; n < limit; n++ {
		if !seen[n] {
			t.Fatalf("seq %d missing from %v", n, got)
		}
	}
	// After removing duplicates, first occurrences are in order.
	next := 0
	for _, n := range got {
		if n == next {
			next++
		} else if n > next {
			t.Fatalf("seq %d arrived before %d: %v", n, next, got)
		}
	}
}

func TestPollErrorPollsAgain(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 5, limit: 10, pollErr: func(i int) error {
		if i <= 3 {
			return errors.New("upstream unavailable")
		}
		return nil
	}}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: store, BootstrapServers: b.Addr(),
		Tracker: tr, RetryDelay: time.Millisecond})
	testwait.For(t, time.Minute, "state 10", func() bool { return store.get("seq") == "10" })
	r.stop(t)
	snap := tr.Snapshot()
	if !strings.Contains(snap.LastError, "upstream unavailable") || snap.Counters.Nacked != 0 || snap.Status != status.Stopped {
		t.Fatalf("snapshot = %+v", snap)
	}
}

func TestEmptyBatchAfterNackPersistsNothing(t *testing.T) {
	b := startBroker(t, broker.Config{})
	// Poll 1: unroutable batch (Nack). Poll 2: empty batch carrying state.
	// Then records flow and the state advances only with them.
	src := &seqSource{batch: 5, limit: 5, empty: func(i int) bool { return i == 2 }}
	first := true
	src.payload = func(n int) []byte {
		if first && n == 4 {
			first = false
			return []byte(`not json`)
		}
		return []byte(fmt.Sprintf(`{"seq":%d}`, n))
	}
	store := &memStore{}
	var mu sync.Mutex
	var saved []string
	spy := &spyStore{Store: store, onSave: func(b []byte) { mu.Lock(); saved = append(saved, string(b)); mu.Unlock() }}
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: spy, BootstrapServers: b.Addr(), RetryDelay: time.Millisecond})
	testwait.For(t, time.Minute, "state 5", func() bool { return store.get("seq") == "5" })
	r.stop(t)
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(saved) != "[5]" {
		t.Fatalf("saves = %v; the empty batch must persist nothing", saved)
	}
	if fmt.Sprint(src.results[:3]) != "[nack ack ack]" {
		t.Fatalf("results = %v", src.results)
	}
	// The bad batch produced nothing: the first record on the topic is 0 of the good batch.
	if got := seqs(t, readTopic(t, b, "seq")); fmt.Sprint(got) != "[0 1 2 3 4]" {
		t.Fatalf("topic = %v", got)
	}
}

type spyStore struct {
	Store  *memStore
	onSave func([]byte)
}

func (s *spyStore) Load(ctx context.Context, key string) ([]byte, error) {
	return s.Store.Load(ctx, key)
}
func (s *spyStore) Save(ctx context.Context, key string, blob []byte) error {
	s.onSave(blob)
	return s.Store.Save(ctx, key, blob)
}

func TestMissingTopicWithoutCreateNacks(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 5, limit: 5}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	top := literal("nowhere")
	top.CreateTopics = false
	r := start(t, Config{Topics: []definition.Topics{top}, Source: src, Store: store, BootstrapServers: b.Addr(), Tracker: tr,
		RetryDelay: time.Millisecond, MaxConsecutiveNacks: 3})
	err := <-r.done
	close(r.done)
	if !errors.Is(err, ErrTooManyNacks) || !strings.Contains(err.Error(), `topic "nowhere" does not exist and topics[0].create_topics is off`) {
		t.Fatalf("err = %v", err)
	}
	if store.get("seq") != "" {
		t.Fatal("state saved")
	}
}

func TestBrokerDownNacksAndRecovers(t *testing.T) {
	if testing.Short() {
		t.Skip("broker restart takes a few seconds")
	}
	dir := t.TempDir()
	b := startBroker(t, broker.Config{DataDir: dir})
	addr := b.Addr()
	src := &seqSource{batch: 20, limit: 100000}
	store := &memStore{}
	tr := status.New("source", "seq", nil)
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: store, BootstrapServers: addr, Tracker: tr,
		RetryDelay: 50 * time.Millisecond, MaxRetryDelay: 200 * time.Millisecond, DeliveryTimeout: time.Second,
		Properties: map[string]string{"reconnect.backoff.max.ms": "200"}})
	testwait.For(t, time.Minute, "some acked batches", func() bool { c, _, _, _ := src.snapshot(); return c >= 200 })
	b.Close()
	testwait.For(t, time.Minute, "a nack", func() bool { _, _, _, n := src.snapshot(); return n >= 1 })
	committedAtDown, _, _, _ := src.snapshot()
	stored := store.get("seq")
	if stored != strconv.Itoa(committedAtDown) {
		t.Fatalf("stored state %q, source committed %d", stored, committedAtDown)
	}
	snap := tr.Snapshot()
	if snap.Counters.ConsecNacks < 1 || snap.LastError == "" || snap.Status != status.Running {
		t.Fatalf("while down: %+v", snap)
	}
	time.Sleep(300 * time.Millisecond)
	if store.get("seq") != stored {
		t.Fatal("state advanced while the broker was down")
	}
	b2, err := broker.Start(broker.Config{Address: addr, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b2.Close() })
	target := committedAtDown + 200
	testwait.For(t, time.Minute, "progress after the broker came back", func() bool { c, _, _, _ := src.snapshot(); return c >= target })
	r.stop(t)
	final := store.get("seq")
	n, _ := strconv.Atoi(final)
	if snap := tr.Snapshot(); snap.Counters.ConsecNacks != 0 {
		t.Fatalf("after recovery: %+v", snap)
	}
	got := seqs(t, readTopic(t, b2, "seq"))
	assertNoGaps(t, got, n)
	t.Logf("broker down: committed %d at failure, %d after; %d records on the topic for %d sequence numbers", committedAtDown, n, len(got), n)
}

func TestBadDefinition(t *testing.T) {
	err := CheckTopics([]definition.Topics{
		{Topic: definition.Route{Literal: "ok"}, Partitions: 3},
		{Topic: definition.Route{Strategy: "bogus"}, ReplicationFactor: 2, LingerTime: "soon", Schema: "xml"},
		{Topic: definition.Route{Literal: "ok"}, Properties: map[string]string{"bootstrap.servers": "x"}},
	}, "")
	for _, want := range []string{
		"topics[0].partitions = 3: PicoMQ topics have one partition",
		`topics[1].topic.strategy: "bogus" is not allowed`,
		"topics[1].replication_factor = 2",
		`topics[1].linger_time "soon"`,
		`topics[1].schema: schema "xml"`,
		`topics[2].properties."bootstrap.servers"`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v lacks %q", err, want)
		}
	}
	if err := CheckTopics(nil, ""); err == nil {
		t.Error("no blocks accepted")
	}
	src := &seqSource{}
	tr := status.New("source", "x", nil)
	if err := Run(context.Background(), Config{Key: "x", Source: src, Store: &memStore{}, Tracker: tr}); err == nil || tr.Status() != status.Error || !src.closed {
		t.Fatalf("Run with no topics: %v, status %s, closed %v", err, tr.Status(), src.closed)
	}
}

// TestCreateTopicsOffNeverCreates: against a broker that creates topics on
// demand, a block with create_topics = false still never creates its topic:
// the batches nack and the topic stays absent until someone creates it.
func TestCreateTopicsOffNeverCreates(t *testing.T) {
	b := startBroker(t, broker.Config{AutoCreateTopics: true})
	src := &seqSource{batch: 5, limit: 10}
	store := &memStore{}
	top := literal("auto")
	top.CreateTopics = false
	tr := status.New("source", "seq", nil)
	r := start(t, Config{Topics: []definition.Topics{top}, Source: src, Store: store, BootstrapServers: b.Addr(), Tracker: tr,
		RetryDelay: time.Millisecond, MaxRetryDelay: 5 * time.Millisecond})
	testwait.For(t, time.Minute, "three nacks", func() bool { _, _, _, n := src.snapshot(); return n >= 3 })
	if hw := b.HighWatermark("auto"); hw != -1 {
		t.Fatalf("topic auto exists (high watermark %d); create_topics = false must not create it", hw)
	}
	if !strings.Contains(tr.Snapshot().LastError, `topic "auto" does not exist and topics[0].create_topics is off`) || store.get("seq") != "" {
		t.Fatalf("last error %q, state %q", tr.Snapshot().LastError, store.get("seq"))
	}
	if err := b.CreateTopic("auto"); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, time.Minute, "state 10", func() bool { return store.get("seq") == "10" })
	r.stop(t)
	if got := seqs(t, readTopic(t, b, "auto")); len(got) != 10 {
		t.Fatalf("topic = %v", got)
	}
}

func TestStopWithBrokerDownPurgesAndNacks(t *testing.T) {
	b := startBroker(t, broker.Config{})
	src := &seqSource{batch: 10, limit: 1000000}
	store := &memStore{}
	r := start(t, Config{Topics: []definition.Topics{literal("seq")}, Source: src, Store: store, BootstrapServers: b.Addr(),
		DeliveryTimeout: 10 * time.Minute, StopTimeout: 100 * time.Millisecond})
	testwait.For(t, time.Minute, "acked batches", func() bool { c, _, _, _ := src.snapshot(); return c >= 50 })
	b.Close()
	// Within moments a batch is in flight that cannot be delivered.
	time.Sleep(300 * time.Millisecond)
	committed, _, _, _ := src.snapshot()
	// With a ten-minute delivery timeout, only the purge lets Run return
	// within the helper's deadline.
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if store.get("seq") != strconv.Itoa(committed) {
		t.Fatalf("stored %s, committed %d", store.get("seq"), committed)
	}
	src.mu.Lock()
	last := src.results[len(src.results)-1]
	src.mu.Unlock()
	if last != sdk.Nack {
		t.Fatalf("last result %v, want nack", last)
	}
}
