package state

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/broker"
)

func startBroker(t *testing.T) *broker.Broker {
	t.Helper()
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

func newBrokerStore(t *testing.T, addr string) *BrokerStore {
	t.Helper()
	s, err := NewBrokerStore(BrokerConfig{BootstrapServers: addr})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// TestBrokerStoreRoundTrip: nothing before the first save, the latest save
// wins, keys do not mix, and a new store (a restarted runtime) loads the
// same, also after many saves (the tail read steps back over none of them).
func TestBrokerStoreRoundTrip(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newBrokerStore(t, b.Addr())
	if got, err := s.Load(ctx, "src"); err != nil || got != nil {
		t.Fatalf("empty: %q, %v", got, err)
	}
	for i := range 100 {
		if err := s.Save(ctx, "src", fmt.Appendf(nil, "blob-%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(ctx, "other", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, "src"); err != nil || string(got) != "blob-99" {
		t.Fatalf("latest: %q, %v", got, err)
	}
	again := newBrokerStore(t, b.Addr())
	if got, err := again.Load(ctx, "src"); err != nil || string(got) != "blob-99" {
		t.Fatalf("new store: %q, %v", got, err)
	}
	if got, err := again.Load(ctx, "other"); err != nil || string(got) != "x" {
		t.Fatalf("other key: %q, %v", got, err)
	}
	if err := again.Save(ctx, "Bad-Key", nil); err == nil {
		t.Fatal("bad key accepted")
	}
}

// TestBrokerStoreSkipsAborted: checkpoints of aborted transactions are not
// loaded, even when 40 of them (80 offsets with their markers) follow the last committed one.
func TestBrokerStoreSkipsAborted(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s := newBrokerStore(t, b.Addr())
	if _, err := s.Load(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": b.Addr(), "transactional.id": "t", "go.logs.channel.enable": true, "go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	txn := func(blob string, commit bool) {
		t.Helper()
		if err := p.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		if err := p.Produce(s.Checkpoint("src", []byte(blob)), nil); err != nil {
			t.Fatal(err)
		}
		if commit {
			err = p.CommitTransaction(ctx)
		} else {
			p.Flush(5000)
			err = p.AbortTransaction(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	txn("committed", true)
	for range 40 {
		txn("aborted", false)
	}
	if got, err := newBrokerStore(t, b.Addr()).Load(ctx, "src"); err != nil || string(got) != "committed" {
		t.Fatalf("%q, %v", got, err)
	}
}

// inject produces records into key's checkpoint topic as another client
// would, without the store: each is a record key, a value and, when sig
// is not nil, a signature header.
func inject(t *testing.T, addr, topic string, records ...kafka.Message) {
	t.Helper()
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": addr, "go.logs.channel.enable": true, "go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	for _, m := range records {
		m.TopicPartition = kafka.TopicPartition{Topic: &topic, Partition: 0}
		if err := p.Produce(&m, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := p.Flush(10_000); n != 0 {
		t.Fatalf("%d records not delivered", n)
	}
}

// logBuffer is a logger whose text output the test reads.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newStoreWith(t *testing.T, cfg BrokerConfig) (*BrokerStore, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	cfg.Logger = slog.New(slog.NewTextHandler(logs, nil))
	s, err := NewBrokerStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s, logs
}

// TestBrokerStoreIgnoresInjected: a record another client produces into a
// source's checkpoint topic under any other key never becomes the
// checkpoint Load returns (it did: {"next_seq":900000000} under any key
// made the random source resume there). Load logs that it skipped it.
func TestBrokerStoreIgnoresInjected(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	s, logs := newStoreWith(t, BrokerConfig{BootstrapServers: b.Addr()})
	if err := s.Save(ctx, "src", []byte(`{"next_seq":28}`)); err != nil {
		t.Fatal(err)
	}
	inject(t, b.Addr(), s.Topic("src"),
		kafka.Message{Key: []byte("attacker"), Value: []byte(`{"next_seq":900000000}`)},
		kafka.Message{Value: []byte(`{"next_seq":900000001}`)})
	if got, err := s.Load(ctx, "src"); err != nil || string(got) != `{"next_seq":28}` {
		t.Fatalf("Load = %s, %v; want the saved checkpoint", got, err)
	}
	if l := logs.String(); !strings.Contains(l, "skipped=2") || !strings.Contains(l, `is not the source's key \"src\"`) {
		t.Fatalf("log: %s", l)
	}
}

// TestBrokerStoreSigned: with a signing key every checkpoint, saved or
// written in a transaction, carries an HMAC that Load checks; a record
// under the source's key that is unsigned, signed with another key or
// signed for another source is logged and skipped.
func TestBrokerStoreSigned(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	key := []byte("0123456789abcdef0123456789abcdef")
	s, logs := newStoreWith(t, BrokerConfig{BootstrapServers: b.Addr(), SigningKey: key})
	if err := s.Save(ctx, "src", []byte("saved")); err != nil {
		t.Fatal(err)
	}
	other, _ := newStoreWith(t, BrokerConfig{BootstrapServers: b.Addr(), SigningKey: []byte("another key, another runtime....")})
	forged := other.Checkpoint("src", []byte("other key"))
	moved := s.Checkpoint("dst", []byte("for another source"))
	inject(t, b.Addr(), s.Topic("src"),
		kafka.Message{Key: []byte("src"), Value: []byte("unsigned")},
		kafka.Message{Key: forged.Key, Value: forged.Value, Headers: forged.Headers},
		kafka.Message{Key: []byte("src"), Value: moved.Value, Headers: moved.Headers},
		kafka.Message{Key: []byte("src"), Value: []byte("short"), Headers: []kafka.Header{{Key: SignatureHeader, Value: []byte("x")}}})
	if got, err := s.Load(ctx, "src"); err != nil || string(got) != "saved" {
		t.Fatalf("Load = %q, %v; want the signed checkpoint", got, err)
	}
	l := logs.String()
	if !strings.Contains(l, "skipped=4") || !strings.Contains(l, "does not match") {
		t.Fatalf("log: %s", l)
	}
	// A checkpoint written in a transaction (distributed mode) is signed.
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": b.Addr(), "transactional.id": "t", "go.logs.channel.enable": true, "go.delivery.reports": false})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if err := p.InitTransactions(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.BeginTransaction(); err != nil {
		t.Fatal(err)
	}
	if err := p.Produce(s.Checkpoint("src", []byte("in a transaction")), nil); err != nil {
		t.Fatal(err)
	}
	if err := p.CommitTransaction(ctx); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Load(ctx, "src"); err != nil || string(got) != "in a transaction" {
		t.Fatalf("Load = %q, %v", got, err)
	}
	// A store without the key loads it (it checks keys only); one with
	// the other key loads the one record that key signed.
	if got, err := newBrokerStore(t, b.Addr()).Load(ctx, "src"); err != nil || string(got) != "in a transaction" {
		t.Fatalf("unsigned store: %q, %v", got, err)
	}
	if got, err := other.Load(ctx, "src"); err != nil || string(got) != "other key" {
		t.Fatalf("store with the other key: %q, %v", got, err)
	}
}

// TestBrokerStoreFencesAStaleWriter: checkpoints come only from their
// owner. A second store writing the same source's checkpoints (a runtime
// started while the old one still runs) fences the first: the first's
// next save fails and says why, and Load returns the owner's checkpoint,
// not the stale writer's. Saves of another source are not disturbed.
func TestBrokerStoreFencesAStaleWriter(t *testing.T) {
	b := startBroker(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	old := newBrokerStore(t, b.Addr())
	if _, err := old.Load(ctx, "src"); err != nil {
		t.Fatal(err)
	}
	if err := old.Save(ctx, "src", []byte("old-1")); err != nil {
		t.Fatal(err)
	}
	owner := newBrokerStore(t, b.Addr())
	if err := owner.Save(ctx, "src", []byte("owner-1")); err != nil {
		t.Fatal(err)
	}
	err := old.Save(ctx, "src", []byte("old-2"))
	if err == nil || !strings.Contains(err.Error(), "fenced") {
		t.Fatalf("the stale writer's save after the owner's: %v, want a fenced error", err)
	}
	if got, err := owner.Load(ctx, "src"); err != nil || string(got) != "owner-1" {
		t.Fatalf("Load = %q, %v; want the owner's owner-1", got, err)
	}
	if err := old.Save(ctx, "other", []byte("x")); err != nil {
		t.Fatalf("another source's save: %v", err)
	}
}
