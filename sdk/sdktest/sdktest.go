package sdktest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/internal/testwait"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// Broker starts an embedded broker on a free 127.0.0.1 port with
// auto-created topics, creates topics, and closes it when the test ends.
func Broker(t testing.TB, topics ...string) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true, SeedTopics: topics})
	if err != nil {
		t.Fatalf("start embedded broker: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Produce writes msgs to topic and waits until the broker has them all.
func Produce(t testing.TB, b *broker.Broker, topic string, msgs ...sdk.Message) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatalf("produce client: %v", err)
	}
	defer cl.Close()
	recs := make([]*kgo.Record, len(msgs))
	for i, m := range msgs {
		r := &kgo.Record{Topic: topic, Key: m.Key, Value: m.Payload, Timestamp: m.Timestamp}
		for _, h := range m.Headers {
			r.Headers = append(r.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
		}
		recs[i] = r
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce %d records to %s: %v", len(msgs), topic, err)
	}
}

// ProduceRecords writes the payloads, keys and headers of recs to topic;
// sdktest.Records makes suitable records.
func ProduceRecords(t testing.TB, b *broker.Broker, topic string, recs []sdk.Record) {
	t.Helper()
	msgs := make([]sdk.Message, len(recs))
	for i, r := range recs {
		msgs[i] = sdk.Message{Key: r.Key, Payload: r.Payload, Headers: r.Headers, Timestamp: r.Timestamp}
	}
	Produce(t, b, topic, msgs...)
}

// WaitTopic waits up to 60 seconds until topic holds at least n records
// and returns all of them.
func WaitTopic(t testing.TB, b *broker.Broker, topic string, n int) []broker.Record {
	t.Helper()
	var got []broker.Record
	Eventually(t, 60*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if b.HighWatermark(topic) < int64(n) {
			return fmt.Errorf("topic %s holds %d records, want at least %d", topic, max(b.HighWatermark(topic), 0), n)
		}
		recs, err := b.ReadTopic(ctx, topic)
		if err != nil {
			return err
		}
		got = recs
		return nil
	})
	return got
}

// Eventually calls check every 20 milliseconds until it returns nil, and
// fails the test with its last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	testwait.Eventually(t, timeout, check)
}

// WaitFor is Eventually for a condition that has no error of its own: it
// fails the test with "waiting for what" when cond is not true after
// timeout.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	testwait.For(t, timeout, what, cond)
}

// SinkTopics returns one sink [[topics]] block per topic name, consuming
// JSON records in small batches with a short poll interval.
func SinkTopics(topics ...string) []definition.Topics {
	out := make([]definition.Topics, len(topics))
	for i, name := range topics {
		out[i] = definition.Topics{Topic: definition.Route{Literal: name}, Schema: "json", BatchLength: 100, PollInterval: "50ms"}
	}
	return out
}

// SourceTopics returns one source [[topics]] block producing JSON records
// to the literal topic name, creating it when missing.
func SourceTopics(topic string) []definition.Topics {
	return []definition.Topics{{Topic: definition.Route{Literal: topic}, Schema: "json", BatchLength: 100, LingerTime: "5ms", CreateTopics: true}}
}

// Run is a loop started by RunSink or RunSource.
type Run struct {
	// Key is the connector key the loop runs under ("test").
	Key string
	// Tracker has the loop's status and counters.
	Tracker *status.Tracker
	// Store is the source's state store (nil for sinks).
	Store *MemStore

	cancel context.CancelFunc
	done   chan struct{}
	err    error
	once   sync.Once
}

// Stop cancels the loop, waits for it to return (a sink is closed, which
// flushes) and returns its error. Later calls return the same error.
func (r *Run) Stop() error {
	r.once.Do(func() {
		r.cancel()
		<-r.done
	})
	return r.err
}

// WaitCommitted waits until the sink loop has committed the offsets of n
// records (Tracker's Committed counter), for at most a minute, and fails t
// if it has not or the loop stopped first.
func (r *Run) WaitCommitted(t testing.TB, n int64) {
	t.Helper()
	Eventually(t, time.Minute, func() error {
		if err := r.Err(); err != nil {
			return fmt.Errorf("the loop stopped: %w", err)
		}
		if got := r.Tracker.Snapshot().Counters.Committed; got < n {
			return fmt.Errorf("the loop has committed %d of %d records", got, n)
		}
		return nil
	})
}

// Done is closed when the loop has returned on its own or after Stop.
func (r *Run) Done() <-chan struct{} { return r.done }

// Err is the loop's error once Done is closed.
func (r *Run) Err() error {
	select {
	case <-r.done:
		return r.err
	default:
		return nil
	}
}

func start(t testing.TB, kind string, run func(ctx context.Context, tr *status.Tracker) error) *Run {
	ctx, cancel := context.WithCancel(context.Background())
	r := &Run{Key: "test", Tracker: status.New(kind, "test", nil), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(r.done)
		r.err = run(ctx, r.Tracker)
	}()
	t.Cleanup(func() {
		if err := r.Stop(); err != nil && !errors.Is(err, context.Canceled) {
			t.Logf("%s loop: %v", kind, err)
		}
	})
	return r
}

// RunSink runs sink through the runtime's sink loop (runtime/sinkloop)
// against b until Stop is called or the test ends. The loop uses a short
// retry delay so redelivery after a failed Consume shows quickly.
func RunSink(t testing.TB, b *broker.Broker, sink sdk.Sink, topics []definition.Topics) *Run {
	t.Helper()
	logger := Env(t).Logger
	return start(t, "sink", func(ctx context.Context, tr *status.Tracker) error {
		return sinkloop.Run(ctx, sinkloop.Config{
			Key: "test", Topics: topics, Sink: sink, BootstrapServers: b.Addr(),
			Logger: logger, Tracker: tr, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second,
			Properties: map[string]string{"auto.offset.reset": "earliest"},
		})
	})
}

// RunSource runs src through the runtime's source loop (runtime/sourceloop)
// against b until Stop is called or the test ends: the loop opens src with
// the state store holds under Run.Key and saves new state there. store may
// be nil for a new, empty one.
func RunSource(t testing.TB, b *broker.Broker, src sdk.Source, topics []definition.Topics, store *MemStore) *Run {
	t.Helper()
	if store == nil {
		store = NewMemStore()
	}
	logger := Env(t).Logger
	r := start(t, "source", func(ctx context.Context, tr *status.Tracker) error {
		return sourceloop.Run(ctx, sourceloop.Config{
			Key: "test", Topics: topics, Source: src, State: store.Get("test"), Store: store, BootstrapServers: b.Addr(),
			Logger: logger, Tracker: tr, RetryDelay: 50 * time.Millisecond, MaxRetryDelay: time.Second,
		})
	})
	r.Store = store
	return r
}

// MemStore is a state.Store in memory. It counts saves, and can be made to
// fail.
type MemStore struct {
	mu    sync.Mutex
	blobs map[string][]byte
	saves int
	fail  error
}

// NewMemStore returns an empty MemStore.
func NewMemStore() *MemStore { return &MemStore{blobs: map[string][]byte{}} }

// Load returns the blob saved under key, or nil.
func (s *MemStore) Load(_ context.Context, key string) ([]byte, error) {
	return s.Get(key), nil
}

// Save stores a copy of blob under key, or returns the error set by Fail.
func (s *MemStore) Save(_ context.Context, key string, blob []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.blobs[key] = append([]byte(nil), blob...)
	s.saves++
	return nil
}

// Get returns a copy of the blob saved under key, or nil.
func (s *MemStore) Get(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.blobs[key]
	if !ok {
		return nil
	}
	return append([]byte(nil), b...)
}

// Saves returns how many saves succeeded.
func (s *MemStore) Saves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saves
}

// Fail makes every later Save return err; nil makes saves succeed again.
func (s *MemStore) Fail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}
