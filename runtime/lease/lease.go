// Package lease decides which runtime of a fleet runs a source, through the
// broker's own consumer-group protocol: each source key is a consumer group,
// pico-connectors.source.KEY, subscribed to one one-partition topic
// (pico-connectors.leases). The member the group assigns partition 0 to
// holds the lease and runs the source; the others stand by.
//
// Each runtime joins with group.instance.id = its runtime id (static
// membership), so a runtime restarted within the session timeout gets its
// leases back at once, without a rebalance (Close keeps the membership); a
// runtime that dies loses them after the session timeout, when another
// member is assigned partition 0; a runtime that stops gracefully (Leave)
// hands them over at once. The assignor is cooperative-sticky, so a
// runtime that joins does not move a lease from its holder.
//
// A lease says who should run a source; it does not stop a stale holder on
// its own (a paused process still believes it holds it until it heartbeats
// again). The source loop's transactional producer does that: see
// sourceloop.Config.TransactionalID.
package lease

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/internal/defaults"
	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
	"github.com/picomq/pico-connectors/runtime/definition"
)

// DefaultTopic is the lease topic: one partition, no records.
const DefaultTopic = "pico-connectors.leases"

// DefaultSessionTimeout is how long the broker waits for a silent holder
// before it assigns the lease to another member.
const DefaultSessionTimeout = 10 * time.Second

// GroupPrefix starts the consumer group of each source key.
const GroupPrefix = "pico-connectors.source."

// Config configures one lease.
type Config struct {
	// Key is the source key; the group is GroupPrefix + Key.
	Key string
	// RuntimeID is this runtime's id: group.instance.id and client.id.
	RuntimeID string
	// BootstrapServers is the comma-separated broker list.
	BootstrapServers string
	// Properties are librdkafka settings applied to the lease's clients
	// (the runtime's [broker.properties]).
	Properties map[string]string
	// Topic is the lease topic, created when missing. Empty means
	// DefaultTopic.
	Topic string
	// SessionTimeout is session.timeout.ms. Zero means
	// DefaultSessionTimeout.
	SessionTimeout time.Duration
	// Logger receives the lease's logs; nil means slog.Default().
	Logger *slog.Logger
	// OnChange, when not nil, is called from the lease's goroutine with
	// the new view each time whether this runtime holds the lease, the
	// owner or the members change.
	OnChange func(View)
}

// View is what a lease knows of its group.
type View struct {
	// Held is true while this runtime holds the lease.
	Held bool
	// Owner is the runtime id of the holder, this one or another; empty
	// when none is known.
	Owner string
	// Members are the runtime ids in the group, sorted.
	Members []string
	// Changes counts the owner changes this runtime has seen.
	Changes int64
}

// Lease is one source key's membership in its group. Its goroutine polls
// the consumer (heartbeats, rebalances) until Close.
type Lease struct {
	cfg   Config
	log   *slog.Logger
	c     *kafka.Consumer
	admin *kafka.AdminClient

	mu       sync.Mutex
	view     View
	acquired chan struct{} // closed when Held turns true; replaced on loss
	lost     chan struct{} // closed when Held turns false; replaced on gain
	closed   bool
	fatal    error // the consumer cannot go on (see Wait)

	stop     chan struct{}
	done     chan struct{}
	stopLogs context.CancelFunc
	leave    bool // set before stop is closed: leave the group on the way out
}

// Start creates the lease topic when it is missing, joins the key's group
// and keeps polling in a goroutine until Close.
func Start(ctx context.Context, cfg Config) (*Lease, error) {
	if cfg.Key == "" || cfg.RuntimeID == "" {
		return nil, errors.New("lease: a source key and a runtime id are needed")
	}
	cfg.Topic = cmp.Or(cfg.Topic, DefaultTopic)
	cfg.SessionTimeout = defaults.Positive(cfg.SessionTimeout, DefaultSessionTimeout)
	cfg.Logger = cmp.Or(cfg.Logger, slog.Default())
	session := int(cfg.SessionTimeout.Milliseconds())
	cm, err := clientconf.ConfigMap(cfg.BootstrapServers, kafka.ConfigMap{
		"group.id":                      GroupPrefix + cfg.Key,
		"group.instance.id":             cfg.RuntimeID,
		"client.id":                     cfg.RuntimeID,
		"session.timeout.ms":            session,
		"heartbeat.interval.ms":         max(100, session/5),
		"partition.assignment.strategy": "cooperative-sticky",
		"enable.auto.commit":            false,
		"auto.offset.reset":             "latest",
		"allow.auto.create.topics":      false,
	}, definition.ReservedLease, cfg.Properties)
	if err != nil {
		return nil, fmt.Errorf("lease of %s: %w", cfg.Key, err)
	}
	c, err := kafka.NewConsumer(&cm)
	if err != nil {
		return nil, fmt.Errorf("lease of %s: consumer: %w", cfg.Key, err)
	}
	logCtx, stopLogs := context.WithCancel(context.Background())
	clientconf.ForwardLogs(logCtx, c.Logs(), cfg.Logger)
	l := &Lease{
		cfg: cfg, log: cfg.Logger, c: c,
		acquired: make(chan struct{}), lost: make(chan struct{}),
		stop: make(chan struct{}), done: make(chan struct{}), stopLogs: stopLogs,
	}
	close(l.lost)
	fail := func(err error) (*Lease, error) {
		if l.admin != nil {
			l.admin.Close()
		}
		c.Close()
		stopLogs()
		return nil, fmt.Errorf("lease of %s: %w", cfg.Key, err)
	}
	l.admin, err = kafka.NewAdminClientFromConsumer(c)
	if err != nil {
		return fail(fmt.Errorf("admin client: %w", err))
	}
	if err := EnsureTopic(ctx, l.admin, cfg.Topic, nil); err != nil {
		return fail(err)
	}
	if err := c.SubscribeTopics([]string{cfg.Topic}, l.rebalanced); err != nil {
		return fail(fmt.Errorf("subscribe to %s: %w", cfg.Topic, err))
	}
	go l.poll()
	return l, nil
}

// EnsureTopic creates a one-partition topic with configs unless it exists.
func EnsureTopic(ctx context.Context, admin *kafka.AdminClient, topic string, configs map[string]string) error {
	spec := kafka.TopicSpecification{Topic: topic, NumPartitions: 1, ReplicationFactor: 1, Config: configs}
	if err := clientconf.CreateTopic(ctx, admin, spec, 10*time.Second); err != nil {
		return fmt.Errorf("create topic %q: %w", topic, err)
	}
	return nil
}

// rebalanced follows the assignment; librdkafka applies it after the
// callback returns.
func (l *Lease) rebalanced(_ *kafka.Consumer, e kafka.Event) error {
	switch ev := e.(type) {
	case kafka.AssignedPartitions:
		if holds(ev.Partitions) {
			l.setHeld(true, l.cfg.RuntimeID)
		}
	case kafka.RevokedPartitions:
		if holds(ev.Partitions) {
			l.setHeld(false, "")
		}
	}
	return nil
}

func holds(tps []kafka.TopicPartition) bool {
	for _, tp := range tps {
		if tp.Partition == 0 {
			return true
		}
	}
	return false
}

func (l *Lease) setHeld(held bool, owner string) {
	l.mu.Lock()
	if l.view.Held == held {
		l.mu.Unlock()
		return
	}
	l.view.Held = held
	if held {
		close(l.acquired)
		l.lost = make(chan struct{})
		l.log.Info("source lease acquired", "runtime_id", l.cfg.RuntimeID)
	} else {
		close(l.lost)
		l.acquired = make(chan struct{})
		l.log.Info("source lease lost", "runtime_id", l.cfg.RuntimeID)
	}
	l.setOwnerLocked(owner)
	v := l.viewLocked()
	l.mu.Unlock()
	l.notify(v)
}

func (l *Lease) setOwnerLocked(owner string) {
	if owner != l.view.Owner {
		if owner != "" {
			l.view.Changes++
		}
		l.view.Owner = owner
	}
}

func (l *Lease) viewLocked() View {
	v := l.view
	v.Members = slices.Clone(v.Members)
	return v
}

func (l *Lease) notify(v View) {
	if l.cfg.OnChange != nil {
		l.cfg.OnChange(v)
	}
}

// poll serves the consumer (heartbeats, rebalances) and refreshes the
// owner and members from the group's description every few seconds.
func (l *Lease) poll() {
	defer close(l.done)
	describeEvery := min(2*time.Second, l.cfg.SessionTimeout/3)
	var next time.Time
	for {
		select {
		case <-l.stop:
			if l.leave {
				l.leaveGroup()
			}
			return
		default:
		}
		switch e := l.c.Poll(100).(type) {
		case kafka.Error:
			if e.IsFatal() {
				l.failed(e)
				return
			}
			l.log.Debug("lease consumer error", "err", e)
		case *kafka.Message:
			// The lease topic carries no records; nothing to do.
		}
		if now := time.Now(); now.After(next) {
			next = now.Add(describeEvery)
			l.describe()
		}
	}
}

// failed ends the lease after a fatal consumer error: most likely another
// runtime joined with the same id, which fences this one.
func (l *Lease) failed(e kafka.Error) {
	err := fmt.Errorf("lease of %s: %w", l.cfg.Key, e)
	if e.Code() == kafka.ErrFencedInstanceID || strings.Contains(e.Error(), "fenced") {
		err = fmt.Errorf("lease of %s: another runtime joined with the same runtime id %q; give each runtime its own id (id, PICOMQ_CONNECTORS_ID): %w", l.cfg.Key, l.cfg.RuntimeID, e)
	}
	l.log.Error("source lease ended", "err", err)
	l.mu.Lock()
	l.fatal = err
	l.mu.Unlock()
	l.setHeld(false, "")
}

// leaveGroup unsubscribes, which makes librdkafka send a LeaveGroup even
// for a static member (it skips it only when the consumer is closed), and
// polls until the lease is revoked and the request has had time to go out.
func (l *Lease) leaveGroup() {
	if err := l.c.Unsubscribe(); err != nil {
		l.log.Warn("leaving the lease group failed; another runtime takes the source over after the session timeout", "err", err)
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	var released time.Time
	for time.Now().Before(deadline) {
		l.c.Poll(50)
		if l.View().Held {
			continue
		}
		if released.IsZero() {
			released = time.Now()
		}
		if time.Since(released) > 200*time.Millisecond {
			return
		}
	}
}

// describe reads the group's members and the holder of partition 0.
func (l *Lease) describe() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := l.admin.DescribeConsumerGroups(ctx, []string{GroupPrefix + l.cfg.Key})
	if err != nil || len(res.ConsumerGroupDescriptions) == 0 {
		l.log.Debug("describe the lease group failed", "err", err)
		return
	}
	d := res.ConsumerGroupDescriptions[0]
	if d.Error.Code() != kafka.ErrNoError {
		l.log.Debug("describe the lease group failed", "err", d.Error)
		return
	}
	var members []string
	owner := ""
	for _, m := range d.Members {
		id := m.GroupInstanceID
		if id == "" {
			id = m.ClientID
		}
		members = append(members, id)
		if holds(m.Assignment.TopicPartitions) {
			owner = id
		}
	}
	slices.Sort(members)
	l.mu.Lock()
	if l.view.Held {
		// Our own assignment is the truth for us; the description may lag.
		owner = l.cfg.RuntimeID
	}
	if owner == l.view.Owner && slices.Equal(members, l.view.Members) {
		l.mu.Unlock()
		return
	}
	l.setOwnerLocked(owner)
	l.view.Members = members
	v := l.viewLocked()
	l.mu.Unlock()
	l.notify(v)
}

func (l *Lease) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.fatal
}

// View returns what the lease knows now.
func (l *Lease) View() View {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.viewLocked()
}

// Wait blocks until this runtime holds the lease, then returns a channel
// closed when it loses it (or Close is called). It returns ctx's error
// when ctx ends first, an error when the lease is closed, and the fatal
// error that ended the lease (such as another runtime joining with the
// same id), which joining again would not cure.
func (l *Lease) Wait(ctx context.Context) (lost <-chan struct{}, err error) {
	for {
		l.mu.Lock()
		acq, lst, held, closed, fatal := l.acquired, l.lost, l.view.Held, l.closed, l.fatal
		l.mu.Unlock()
		if fatal != nil {
			return nil, fatal
		}
		if closed {
			return nil, errors.New("lease closed")
		}
		if held {
			return lst, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.done:
			if err := l.err(); err != nil {
				return nil, err
			}
			return nil, errors.New("lease closed")
		case <-acq:
		}
	}
}

// Close stops the lease without leaving the group: the broker keeps this
// runtime's static membership until the session timeout, so a restart
// under the same id within it takes the lease back at once, and otherwise
// another runtime takes the source over after it.
func (l *Lease) Close() { l.close(false) }

// Leave leaves the group, then stops the lease: another runtime takes the
// source over at once (a graceful stop of the runtime).
func (l *Lease) Leave() { l.close(true) }

func (l *Lease) close(leave bool) {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return
	}
	l.closed = true
	l.mu.Unlock()
	l.leave = leave
	close(l.stop)
	<-l.done
	l.setHeld(false, "")
	l.admin.Close()
	if l.err() == nil {
		// confluent-kafka-go 2.11's Close hangs on a consumer in a fatal
		// state; that one is left to the process's end.
		_ = l.c.Close()
	}
	l.stopLogs()
}
