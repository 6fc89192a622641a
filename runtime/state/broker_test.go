package state

import (
	"context"
	"fmt"
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
