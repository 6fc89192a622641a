// Package broker runs an embedded Kafka-protocol broker (franz-go's kfake)
// inside the process, so pico-connectors needs nothing installed to start
// and the tests run against a real wire protocol.
//
// The embedded broker keeps its data in memory unless DataDir is set. Each
// topic it creates has one partition, as on PicoMQ.
package broker

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"

	"github.com/picomq/pico-connectors/third_party/kfake"
)

// DefaultAddress is where the embedded broker listens unless told otherwise.
const DefaultAddress = "127.0.0.1:9092"

// Config configures an embedded broker.
type Config struct {
	// Address is host:port to listen on. Empty means DefaultAddress; port
	// 0 picks a free port (see Broker.Addr).
	Address string
	// AutoCreateTopics creates a topic the first time a client produces to
	// or asks for it, with one partition.
	AutoCreateTopics bool
	// DataDir, when set, persists topics, records and committed offsets
	// there so they survive a restart.
	DataDir string
	// SeedTopics are created at start, with one partition each.
	SeedTopics []string
}

// Broker is a running embedded broker.
type Broker struct {
	cluster *kfake.Cluster
	addr    string
	once    sync.Once
}

// Start listens on cfg.Address and serves the Kafka protocol until Close.
func Start(cfg Config) (*Broker, error) {
	addr := cfg.Address
	if addr == "" {
		addr = DefaultAddress
	}
	host, portText, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("embedded broker address %q: want host:port, such as %s: %v", addr, DefaultAddress, err)
	}
	port, err := strconv.Atoi(portText)
	if err != nil || port < 0 || port > 65535 {
		return nil, fmt.Errorf("embedded broker address %q: port must be a number from 0 to 65535", addr)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DefaultNumPartitions(1),
		// kfake always asks for 127.0.0.1:port; listen on the host the
		// operator named instead. Clients are told the listener's address.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
	}
	if cfg.AutoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if cfg.DataDir != "" {
		opts = append(opts, kfake.DataDir(cfg.DataDir), kfake.SyncWrites())
	}
	if len(cfg.SeedTopics) > 0 {
		opts = append(opts, kfake.SeedTopics(1, cfg.SeedTopics...))
	}
	c, err := kfake.NewCluster(opts...)
	if err != nil {
		return nil, fmt.Errorf("embedded broker on %s: %w", addr, err)
	}
	addrs := c.ListenAddrs()
	if len(addrs) == 0 {
		c.Close()
		return nil, errors.New("embedded broker: no listener")
	}
	return &Broker{cluster: c, addr: addrs[0]}, nil
}

// Addr is the host:port clients connect to, with the real port when the
// configured one was 0. It is a valid bootstrap.servers value.
func (b *Broker) Addr() string { return b.addr }

// CreateTopic creates a topic with one partition. It fails if the topic
// already exists.
func (b *Broker) CreateTopic(topic string) error {
	return b.cluster.CreateTopic(topic, 1, nil)
}

// HighWatermark returns the next offset of partition 0 of topic, or -1 when
// the topic does not exist.
func (b *Broker) HighWatermark(topic string) int64 {
	p := b.cluster.PartitionInfo(topic, 0)
	if p == nil {
		return -1
	}
	return p.HighWatermark
}

// Cluster exposes the underlying kfake cluster for tests that need its
// controls (fault injection, request hooks).
func (b *Broker) Cluster() *kfake.Cluster { return b.cluster }

// Close stops the broker and closes every client connection. It is safe to
// call more than once.
func (b *Broker) Close() error {
	b.once.Do(b.cluster.Close)
	return nil
}
