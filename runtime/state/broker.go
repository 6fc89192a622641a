package state

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/lease"
)

// InBroker is a Store whose checkpoints are records in the broker, so a
// transactional producer can write one in the same transaction as the
// records it covers: the source loop does that in distributed mode, and
// then records and state commit together or not at all.
type InBroker interface {
	Store
	// Checkpoint returns the record that saves blob under key. Once
	// committed, it is what Load returns next. Load(key) must have been
	// called once before (it creates the topic).
	Checkpoint(key string, blob []byte) *kafka.Message
}

// BrokerConfig configures a BrokerStore.
type BrokerConfig struct {
	// BootstrapServers is the comma-separated broker list.
	BootstrapServers string
	// Properties are librdkafka settings applied to the store's clients
	// (the runtime's [broker.properties]).
	Properties map[string]string
	// TopicPrefix names the topics: source KEY's checkpoints are in
	// TopicPrefix + "." + KEY. Empty means "pico-connectors.state".
	TopicPrefix string
	// Logger receives the clients' logs; nil means slog.Default().
	Logger *slog.Logger
}

// BrokerStore keeps each source's checkpoints in its own compacted,
// one-partition topic, PREFIX.KEY, one record per save with the key as the
// record key. Load reads the topic's last committed record from the tail
// (read_committed), so it costs the same whatever the topic's length and
// whether or not the broker compacts. Save produces with acks=all and
// idempotence, and returns once the broker has the record.
type BrokerStore struct {
	cfg      BrokerConfig
	producer *kafka.Producer
	admin    *kafka.AdminClient
	stopLogs context.CancelFunc

	mu    sync.Mutex
	ready map[string]bool // topics known to exist
}

var _ InBroker = (*BrokerStore)(nil)

// NewBrokerStore connects the store's producer; topics are created when a
// source first loads.
func NewBrokerStore(cfg BrokerConfig) (*BrokerStore, error) {
	if cfg.TopicPrefix == "" {
		cfg.TopicPrefix = "pico-connectors.state"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	cm, err := clientconf.ConfigMap(cfg.BootstrapServers, kafka.ConfigMap{
		"client.id":                 "pico-connectors-state",
		"acks":                      "all",
		"enable.idempotence":        true,
		"linger.ms":                 0,
		"allow.auto.create.topics":  false,
		"go.delivery.report.fields": "none",
	}, definition.ReservedStateStore, cfg.Properties)
	if err != nil {
		return nil, fmt.Errorf("broker state store: %w", err)
	}
	p, err := kafka.NewProducer(&cm)
	if err != nil {
		return nil, fmt.Errorf("broker state store: producer: %w", err)
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	clientconf.ForwardLogs(logCtx, p.Logs(), cfg.Logger)
	go func() {
		for range p.Events() {
			// Client-level errors: the loops report failed saves themselves.
		}
	}()
	a, err := kafka.NewAdminClientFromProducer(p)
	if err != nil {
		p.Close()
		stopLogs()
		return nil, fmt.Errorf("broker state store: admin client: %w", err)
	}
	return &BrokerStore{cfg: cfg, producer: p, admin: a, stopLogs: stopLogs, ready: map[string]bool{}}, nil
}

// Topic is the topic that holds key's checkpoints.
func (s *BrokerStore) Topic(key string) string { return s.cfg.TopicPrefix + "." + key }

func (s *BrokerStore) ensure(ctx context.Context, key string) error {
	topic := s.Topic(key)
	s.mu.Lock()
	ok := s.ready[topic]
	s.mu.Unlock()
	if ok {
		return nil
	}
	if err := lease.EnsureTopic(ctx, s.admin, topic, map[string]string{"cleanup.policy": "compact"}); err != nil {
		return fmt.Errorf("broker state store: %w", err)
	}
	s.mu.Lock()
	s.ready[topic] = true
	s.mu.Unlock()
	return nil
}

// Checkpoint returns the record that saves blob under key.
func (s *BrokerStore) Checkpoint(key string, blob []byte) *kafka.Message {
	topic := s.Topic(key)
	return &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0},
		Key:            []byte(key),
		Value:          blob,
	}
}

// Save produces blob as key's newest checkpoint and waits for the broker's
// acknowledgement.
func (s *BrokerStore) Save(ctx context.Context, key string, blob []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.ensure(ctx, key); err != nil {
		return err
	}
	reports := make(chan kafka.Event, 1)
	if err := s.producer.Produce(s.Checkpoint(key, blob), reports); err != nil {
		return fmt.Errorf("broker state store: save %s: %w", key, err)
	}
	select {
	case e := <-reports:
		if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
			return fmt.Errorf("broker state store: save %s to %s: %w", key, s.Topic(key), m.TopicPartition.Error)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("broker state store: save %s: %w (the record may still be written)", key, ctx.Err())
	}
}

// Load returns key's last committed checkpoint, or nil when the topic has
// none. It reads backwards from the end in growing steps until a step
// holds a committed record (aborted transactions and their markers leave
// gaps), so it reads only the tail.
func (s *BrokerStore) Load(ctx context.Context, key string) ([]byte, error) {
	if err := checkKey(key); err != nil {
		return nil, err
	}
	if err := s.ensure(ctx, key); err != nil {
		return nil, err
	}
	topic := s.Topic(key)
	cm, err := clientconf.ConfigMap(s.cfg.BootstrapServers, kafka.ConfigMap{
		"client.id":            "pico-connectors-state",
		"group.id":             "pico-connectors.state-reader",
		"enable.auto.commit":   false,
		"isolation.level":      "read_committed",
		"enable.partition.eof": true,
	}, definition.ReservedStateStore, s.cfg.Properties)
	if err != nil {
		return nil, fmt.Errorf("broker state store: %w", err)
	}
	c, err := kafka.NewConsumer(&cm)
	if err != nil {
		return nil, fmt.Errorf("broker state store: consumer: %w", err)
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	defer stopLogs()
	clientconf.ForwardLogs(logCtx, c.Logs(), s.cfg.Logger)
	defer c.Close()
	timeout := 10 * time.Second
	if dl, ok := ctx.Deadline(); ok {
		timeout = time.Until(dl)
	}
	low, high, err := c.QueryWatermarkOffsets(topic, 0, int(max(timeout, time.Millisecond).Milliseconds()))
	if err != nil {
		return nil, fmt.Errorf("broker state store: load %s: end of %s: %w", key, topic, err)
	}
	for step := int64(8); ; step *= 8 {
		from := max(low, high-step)
		blob, found, err := readLast(ctx, c, topic, from)
		if err != nil {
			return nil, fmt.Errorf("broker state store: load %s from %s: %w", key, topic, err)
		}
		if found || from == low {
			return blob, nil
		}
	}
}

// readLast reads topic from offset from to its end (the last stable
// offset) and returns the last record's value.
func readLast(ctx context.Context, c *kafka.Consumer, topic string, from int64) (blob []byte, found bool, err error) {
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.Offset(from)}}); err != nil {
		return nil, false, err
	}
	defer func() { _ = c.Unassign() }()
	for {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			blob, found = e.Value, true
		case kafka.PartitionEOF:
			return blob, found, nil
		case kafka.Error:
			if e.IsFatal() || e.Code() == kafka.ErrUnknownTopicOrPart {
				return nil, false, e
			}
		}
	}
}

// Close closes the store's clients.
func (s *BrokerStore) Close() {
	s.admin.Close()
	s.producer.Flush(5000)
	s.producer.Close()
	s.stopLogs()
}
