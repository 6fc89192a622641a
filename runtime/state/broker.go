package state

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
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
	// Logger receives the clients' logs and the records Load skips; nil
	// means slog.Default().
	Logger *slog.Logger
	// SigningKey, when set, signs every checkpoint with an HMAC-SHA256 in
	// its SignatureHeader, and Load skips a record whose signature is
	// missing or does not match (the runtime's state.signing_key).
	SigningKey []byte
}

// SignatureHeader is the record header that carries a checkpoint's
// HMAC-SHA256 when the store has a signing key. The MAC covers the topic,
// the key and the blob, so a checkpoint cannot be moved to another source.
const SignatureHeader = "pico-checkpoint-hmac"

// BrokerStore keeps each source's checkpoints in its own compacted,
// one-partition topic, PREFIX.KEY, one record per save with the key as the
// record key. Load reads the topic's last committed checkpoint from the
// tail (read_committed), so it costs the same whatever the topic's length
// and whether or not the broker compacts. It takes only a record under the
// source's own key and, with a signing key, only one whose signature
// matches; it logs and skips any other, so a record that another client
// produced into the topic never chooses where a source resumes. Save
// writes each checkpoint in a transaction of its own, with a transactional
// producer per source (WriterID): a second writer of the same source (a
// stale runtime still running after its replacement started) is fenced by
// the newer one, and its saves fail instead of overwriting the owner's.
type BrokerStore struct {
	cfg     BrokerConfig
	clients *clientconf.ProducerAdmin // the admin client and its producer
	admin   *kafka.AdminClient
	logCtx  context.Context // ends at Close: the clients' log forwarding

	mu      sync.Mutex
	ready   map[string]bool            // topics known to exist
	writers map[string]*kafka.Producer // by source key, transactional
}

// WriterID is the transactional.id with which a BrokerStore writes source
// key's checkpoints (outside distributed mode, where the source loop's own
// producer writes them in its batches' transactions).
func WriterID(key string) string { return "pico-connectors.state-writer." + key }

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
	cm, err := producerConfig(cfg, "")
	if err != nil {
		return nil, fmt.Errorf("broker state store: %w", err)
	}
	c, err := clientconf.NewProducerAdmin(&cm, cfg.Logger)
	if err != nil {
		return nil, fmt.Errorf("broker state store: %w", err)
	}
	return &BrokerStore{cfg: cfg, clients: c, admin: c.Admin, logCtx: c.LogContext, ready: map[string]bool{}, writers: map[string]*kafka.Producer{}}, nil
}

// producerConfig is the configuration of the store's producers: the one
// its admin client comes from (transactionalID empty) and each source's
// checkpoint writer.
func producerConfig(cfg BrokerConfig, transactionalID string) (kafka.ConfigMap, error) {
	own := kafka.ConfigMap{
		"client.id":                 "pico-connectors-state",
		"acks":                      "all",
		"enable.idempotence":        true,
		"linger.ms":                 0,
		"allow.auto.create.topics":  false,
		"go.delivery.report.fields": "none",
	}
	if transactionalID != "" {
		own["transactional.id"] = transactionalID
	}
	return clientconf.ConfigMap(cfg.BootstrapServers, own, definition.ReservedStateStore, cfg.Properties)
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

// Checkpoint returns the record that saves blob under key, signed when
// the store has a signing key.
func (s *BrokerStore) Checkpoint(key string, blob []byte) *kafka.Message {
	topic := s.Topic(key)
	m := &kafka.Message{
		TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: 0},
		Key:            []byte(key),
		Value:          blob,
	}
	if s.cfg.SigningKey != nil {
		m.Headers = []kafka.Header{{Key: SignatureHeader, Value: s.sign(topic, key, blob)}}
	}
	return m
}

// sign returns the HMAC-SHA256 of a checkpoint of key in topic.
func (s *BrokerStore) sign(topic, key string, blob []byte) []byte {
	mac := hmac.New(sha256.New, s.cfg.SigningKey)
	mac.Write([]byte("pico-connectors checkpoint v1\x00" + topic + "\x00" + key + "\x00"))
	mac.Write(blob)
	return mac.Sum(nil)
}

// reject returns why m is not a checkpoint of key that Load may apply, or
// "" when it is one.
func (s *BrokerStore) reject(m *kafka.Message, topic, key string) string {
	if string(m.Key) != key {
		return fmt.Sprintf("its record key %.40q is not the source's key %q", m.Key, key)
	}
	if s.cfg.SigningKey == nil {
		return ""
	}
	var sig []byte
	found := false
	for _, h := range m.Headers {
		if h.Key == SignatureHeader {
			sig, found = h.Value, true
		}
	}
	switch {
	case !found:
		return "it has no " + SignatureHeader + " header (it was written without state.signing_key, or not by this runtime)"
	case !hmac.Equal(sig, s.sign(topic, key, m.Value)):
		return "its " + SignatureHeader + " does not match (it was signed with another state.signing_key, or not by this runtime)"
	}
	return ""
}

// Save writes blob as key's newest checkpoint in a transaction and returns
// once it is committed. A fenced writer (another store wrote key's
// checkpoints since: two runtimes run the source) fails the save; the
// next Save starts a new writer, which fences the other in turn.
func (s *BrokerStore) Save(ctx context.Context, key string, blob []byte) error {
	if err := checkKey(key); err != nil {
		return err
	}
	if err := s.ensure(ctx, key); err != nil {
		return err
	}
	w, err := s.writer(ctx, key)
	if err != nil {
		return fmt.Errorf("broker state store: save %s: %w", key, err)
	}
	if err := s.saveIn(ctx, w, key, blob); err != nil {
		// A fence fails the produce first ("purged in queue"); the
		// producer's fatal error says why.
		if ferr := w.GetFatalError(); ferr != nil {
			s.dropWriter(key, w)
			var ke kafka.Error
			if errors.As(ferr, &ke) && (ke.Code() == kafka.ErrFenced || ke.Code() == kafka.ErrProducerFenced) {
				return fmt.Errorf("broker state store: save %s: another writer of %s's checkpoints fenced this one (is the source running in two runtimes?): %w", key, key, ferr)
			}
			return fmt.Errorf("broker state store: save %s: %w", key, ferr)
		}
		actx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = w.AbortTransaction(actx)
		cancel()
		return fmt.Errorf("broker state store: save %s to %s: %w", key, s.Topic(key), err)
	}
	return nil
}

// saveIn produces blob in a transaction of w and commits it.
func (s *BrokerStore) saveIn(ctx context.Context, w *kafka.Producer, key string, blob []byte) error {
	if err := w.BeginTransaction(); err != nil {
		return err
	}
	reports := make(chan kafka.Event, 1)
	if err := w.Produce(s.Checkpoint(key, blob), reports); err != nil {
		return err
	}
	select {
	case e := <-reports:
		if m, ok := e.(*kafka.Message); ok && m.TopicPartition.Error != nil {
			return m.TopicPartition.Error
		}
	case <-ctx.Done():
		return fmt.Errorf("%w (the record may still be written)", ctx.Err())
	}
	return w.CommitTransaction(ctx)
}

// writer returns key's transactional producer, starting it (and so
// fencing any other writer of key) on first use.
func (s *BrokerStore) writer(ctx context.Context, key string) (*kafka.Producer, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.writers[key]; w != nil {
		return w, nil
	}
	cm, err := producerConfig(s.cfg, WriterID(key))
	if err != nil {
		return nil, err
	}
	w, err := kafka.NewProducer(&cm)
	if err != nil {
		return nil, fmt.Errorf("transactional producer: %w", err)
	}
	clientconf.ForwardLogs(s.logCtx, w.Logs(), s.cfg.Logger)
	go func() {
		for range w.Events() {
		}
	}()
	if err := w.InitTransactions(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("init transactions as %s: %w", WriterID(key), err)
	}
	s.writers[key] = w
	return w, nil
}

// dropWriter closes w, key's writer, so that the next Save starts anew.
func (s *BrokerStore) dropWriter(key string, w *kafka.Producer) {
	s.mu.Lock()
	if s.writers[key] == w {
		delete(s.writers, key)
	}
	s.mu.Unlock()
	w.Close()
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
	var skipped skips
	defer skipped.log(s.cfg.Logger, key, topic)
	for step := int64(8); ; step *= 8 {
		from := max(low, high-step)
		blob, found, err := s.readLast(ctx, c, topic, key, from, &skipped)
		if err != nil {
			return nil, fmt.Errorf("broker state store: load %s from %s: %w", key, topic, err)
		}
		if found || from == low {
			return blob, nil
		}
	}
}

// skips counts the records Load passed over, for one log line.
type skips struct {
	n      int
	offset kafka.Offset // of the last one
	why    string       // of the last one
	seen   map[kafka.Offset]bool
}

func (k *skips) add(offset kafka.Offset, why string) {
	if k.seen[offset] {
		return // read again by a wider step
	}
	if k.seen == nil {
		k.seen = map[kafka.Offset]bool{}
	}
	k.seen[offset] = true
	k.n++
	k.offset, k.why = offset, why
}

func (k *skips) log(l *slog.Logger, key, topic string) {
	if k.n > 0 {
		l.Error("broker state store: skipped records that are not this source's checkpoints; find out who writes to the topic (the runtime alone should)",
			"source", key, "topic", topic, "skipped", k.n, "last_offset", int64(k.offset), "reason", k.why)
	}
}

// readLast reads topic from offset from to its end (the last stable
// offset) and returns the last record's value that is a checkpoint of key,
// adding the others to skipped.
func (s *BrokerStore) readLast(ctx context.Context, c *kafka.Consumer, topic, key string, from int64, skipped *skips) (blob []byte, found bool, err error) {
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
			if why := s.reject(e, topic, key); why != "" {
				skipped.add(e.TopicPartition.Offset, why)
				continue
			}
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
	s.mu.Lock()
	for key, w := range s.writers {
		w.Close()
		delete(s.writers, key)
	}
	s.mu.Unlock()
	s.clients.Close(5 * time.Second)
}
