// Package broker runs an embedded Kafka-protocol broker (franz-go's kfake)
// inside the process, so pico-connectors needs nothing installed to start
// and the tests run against a real wire protocol.
//
// The embedded broker keeps its data in memory unless DataDir is set. Each
// topic it creates has one partition, as on PicoMQ.
//
// With a Password, clients must authenticate (SASL/SCRAM-SHA-256): User is
// a superuser, and every other principal may only produce and consume the
// topics in Topics and TopicPrefixes (see acl.go).
package broker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/picomq/pico-connectors/third_party/kfake"
)

// DefaultAddress is where the embedded broker listens unless told otherwise.
const DefaultAddress = "127.0.0.1:9092"

// User is the SASL user of the runtime's own clients when Config.Password
// is set. It bypasses the ACLs.
const User = "pico-connectors"

// Config configures an embedded broker.
type Config struct {
	// Address is host:port to listen on. Empty means DefaultAddress; port
	// 0 picks a free port (see Broker.Addr). An unspecified host (0.0.0.0,
	// :: or none) listens on every interface.
	Address string
	// AutoCreateTopics creates a topic the first time a client produces to
	// or asks for it, with one partition.
	AutoCreateTopics bool
	// DataDir, when set, persists topics, records and committed offsets
	// there so they survive a restart. Its files are 0600, its folders
	// 0700 (Start tightens those of an older data dir).
	DataDir string
	// SeedTopics are created at start, with one partition each.
	SeedTopics []string
	// Password, when set, makes every client authenticate with
	// SASL/SCRAM-SHA-256; the runtime's own clients log in as User with
	// it (see ClientProperties). Empty: no authentication, for tests.
	Password string
	// Topics and TopicPrefixes are what principals other than User may
	// produce and consume (with Password set): these topics, and those
	// whose name starts with one of the prefixes. Nothing else: no topic
	// deletes, no group offsets, no ACL or user changes.
	Topics        []string
	TopicPrefixes []string
	// Logger receives the broker's errors and warnings, such as a
	// persisted partition that could not be loaded. Nil discards them.
	Logger *slog.Logger
}

// Broker is a running embedded broker.
type Broker struct {
	cluster  *kfake.Cluster
	addr     string
	password string
	once     sync.Once
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
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.Ports(port),
		kfake.DefaultNumPartitions(1),
		// kfake always asks for 127.0.0.1:port; listen on the host the
		// operator named instead. Clients are told the listener's address,
		// or on 0.0.0.0 the address they connected through.
		kfake.ListenFn(func(network, _ string) (net.Listener, error) {
			return net.Listen(network, net.JoinHostPort(host, strconv.Itoa(port)))
		}),
	}
	if cfg.Logger != nil {
		opts = append(opts, kfake.WithLogger(slogLogger{cfg.Logger}))
	}
	if cfg.AutoCreateTopics {
		opts = append(opts, kfake.AllowAutoTopicCreation())
	}
	if cfg.DataDir != "" {
		if err := tightenModes(cfg.DataDir); err != nil {
			return nil, fmt.Errorf("embedded broker data dir %q: %w", cfg.DataDir, err)
		}
		opts = append(opts, kfake.DataDir(cfg.DataDir), kfake.SyncWrites())
	}
	if len(cfg.SeedTopics) > 0 {
		opts = append(opts, kfake.SeedTopics(1, cfg.SeedTopics...))
	}
	if cfg.Password != "" {
		opts = append(opts, kfake.EnableSASL(), kfake.EnableACLs(), kfake.Superuser("SCRAM-SHA-256", User, cfg.Password))
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
	b := &Broker{cluster: c, addr: dialable(addrs[0]), password: cfg.Password}
	if cfg.Password != "" {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := b.setACLs(ctx, cfg.Topics, cfg.TopicPrefixes); err != nil {
			c.Close()
			return nil, fmt.Errorf("embedded broker on %s: set its ACLs: %w", addr, err)
		}
	}
	return b, nil
}

// dialable turns a listener address on an unspecified host (0.0.0.0 or
// ::, which clients cannot dial: librdkafka failed to resolve ":::9092")
// into 127.0.0.1 with the same port. Go reports a listener on 0.0.0.0 as
// [::], dual stack, which 127.0.0.1 reaches.
func dialable(addr string) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", port)
	}
	return addr
}

// tightenModes makes dir and everything in it readable by its owner only
// (folders 0700, files 0600), as kfake creates them; data dirs written by
// older versions were 0755 and 0644. A missing dir is left to kfake.
func tightenModes(dir string) error {
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		mode := os.FileMode(0o600)
		if d.IsDir() {
			mode = 0o700
		} else if !d.Type().IsRegular() {
			return nil
		}
		info, err := d.Info()
		if err != nil || info.Mode().Perm() == mode {
			return err
		}
		return os.Chmod(path, mode)
	})
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// Addr is the host:port clients connect to, with the real port when the
// configured one was 0, and 127.0.0.1 when the broker listens on every
// interface. It is a valid bootstrap.servers value.
func (b *Broker) Addr() string { return b.addr }

// ClientProperties are the librdkafka settings a client of the runtime
// needs besides bootstrap.servers: the SASL login as User, or none when the
// broker has no Password. They hold the password: never print them.
func (b *Broker) ClientProperties() map[string]string {
	if b.password == "" {
		return nil
	}
	return map[string]string{
		"security.protocol": "SASL_PLAINTEXT",
		"sasl.mechanisms":   "SCRAM-SHA-256",
		"sasl.username":     User,
		"sasl.password":     b.password,
	}
}

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

// slogLogger forwards kfake's errors and warnings to a slog.Logger; its
// per-request info and debug lines are dropped.
type slogLogger struct{ l *slog.Logger }

func (s slogLogger) Logf(level kfake.LogLevel, format string, args ...any) {
	var lvl slog.Level
	switch level {
	case kfake.LogLevelError:
		lvl = slog.LevelError
	case kfake.LogLevelWarn:
		lvl = slog.LevelWarn
	default:
		return
	}
	s.l.Log(context.Background(), lvl, "embedded broker: "+fmt.Sprintf(format, args...))
}
