// Package clientconf builds librdkafka (confluent-kafka-go) client settings
// the same way for every loop, and forwards librdkafka's logs to slog.
package clientconf

import (
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

// ConfigMap returns bootstrap.servers plus defaults, then each layer of
// string properties in order (later layers win). Properties the loops
// must control themselves are in reserved and rejected with an error
// naming the key.
func ConfigMap(bootstrap string, defaults kafka.ConfigMap, reserved []string, layers ...map[string]string) (kafka.ConfigMap, error) {
	if strings.TrimSpace(bootstrap) == "" {
		return nil, fmt.Errorf("no bootstrap servers: set broker.bootstrap_servers or use the embedded broker")
	}
	m := kafka.ConfigMap{
		"bootstrap.servers": bootstrap,
		// The telemetry push logs a warning against brokers without it.
		"enable.metrics.push":    false,
		"go.logs.channel.enable": true,
	}
	for k, v := range defaults {
		m[k] = v
	}
	for _, layer := range layers {
		for k, v := range layer {
			for _, r := range reserved {
				if k == r {
					return nil, fmt.Errorf("property %q is set by the runtime and cannot be overridden", k)
				}
			}
			m[k] = v
		}
	}
	return m, nil
}

// ForwardLogs copies librdkafka's log events to logger until ctx ends or
// the channel closes. librdkafka's syslog levels map to slog levels:
// error and warning to Warn, notice to Info, the rest to Debug.
func ForwardLogs(ctx context.Context, ch chan kafka.LogEvent, logger *slog.Logger) {
	if ch == nil {
		return
	}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-ch:
				if !ok {
					return
				}
				lvl := slog.LevelDebug
				// The loops report the failures that matter themselves, so
				// librdkafka's errors (lost connections it retries) are warnings.
				switch {
				case e.Level <= 4:
					lvl = slog.LevelWarn
				case e.Level == 5:
					lvl = slog.LevelInfo
				}
				logger.Log(ctx, lvl, "librdkafka: "+e.Message, "facility", e.Tag, "client", e.Name)
			}
		}
	}()
}

// ProducerAdmin is a producer whose logs go to a logger and whose events
// are drained, with an admin client on its connection: what the broker
// state store and pico-connectors check talk to the broker with.
type ProducerAdmin struct {
	Producer *kafka.Producer
	Admin    *kafka.AdminClient
	// LogContext ends at Close: further clients of the same owner forward
	// their logs (ForwardLogs) until then.
	LogContext context.Context
	stopLogs   context.CancelFunc
}

// NewProducerAdmin starts a ProducerAdmin from cm; what is wrong names
// what failed (the producer or the admin client).
func NewProducerAdmin(cm *kafka.ConfigMap, logger *slog.Logger) (*ProducerAdmin, error) {
	p, err := kafka.NewProducer(cm)
	if err != nil {
		return nil, fmt.Errorf("producer: %w", err)
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	ForwardLogs(logCtx, p.Logs(), logger)
	go func() {
		for range p.Events() {
			// Client-level errors: the callers report what fails themselves.
		}
	}()
	a, err := kafka.NewAdminClientFromProducer(p)
	if err != nil {
		p.Close()
		stopLogs()
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return &ProducerAdmin{Producer: p, Admin: a, LogContext: logCtx, stopLogs: stopLogs}, nil
}

// Close closes the admin client, then the producer after up to flush of
// its outstanding deliveries, and ends LogContext.
func (c *ProducerAdmin) Close(flush time.Duration) {
	c.Admin.Close()
	if flush > 0 {
		c.Producer.Flush(int(flush / time.Millisecond))
	}
	c.Producer.Close()
	c.stopLogs()
}

// CreateTopic creates one topic, waiting at most timeout; a topic that
// exists already is not an error. More options (such as
// kafka.SetAdminValidateOnly) go after the operation timeout. The error is
// the request's or the broker's answer for the topic, unprefixed.
func CreateTopic(ctx context.Context, admin *kafka.AdminClient, spec kafka.TopicSpecification, timeout time.Duration, opts ...kafka.CreateTopicsAdminOption) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := admin.CreateTopics(ctx, []kafka.TopicSpecification{spec}, append([]kafka.CreateTopicsAdminOption{kafka.SetAdminOperationTimeout(timeout)}, opts...)...)
	if err != nil {
		return err
	}
	for _, r := range res {
		if c := r.Error.Code(); c != kafka.ErrNoError && c != kafka.ErrTopicAlreadyExists {
			return r.Error
		}
	}
	return nil
}

// Millis reads a setting of m in milliseconds (such as session.timeout.ms),
// whether it is held as a number or a string; ok is false when it is
// missing, not a whole number or not above zero.
func Millis(m kafka.ConfigMap, key string) (d time.Duration, ok bool) {
	v, found := m[key]
	if !found {
		return 0, false
	}
	ms, err := strconv.Atoi(fmt.Sprint(v))
	if err != nil || ms <= 0 {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}
