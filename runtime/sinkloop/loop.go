package sinkloop

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// loop is one sink's consumer loop: its state, read and changed only on
// the goroutine that polls (a flight's Consume runs in its own and hands
// back an outcome). Its methods stand in files by concern, each file using
// only those below it:
//
//	sinkloop.go   Run: open, run, stop
//	consumer.go   the consumer's configuration and subscription
//	poll.go       the poll loop: events, pause and resume, the commit timer
//	stranded.go   partitions given up during a long rebalance, and taken back
//	rebalance.go  assign, revoke, giving partitions up, the placement
//	batch.go      a batch's way to Consume and back: redelivery, dead letters
//	prepare.go    schema checks and transforms before Consume
//	loop.go       this state
//	offsets.go    what may be committed: consumed, skipped and held offsets
//	commit.go     the committer, which commits off the poll loop
//	deadletter.go the dead-letter producer
//	check.go      the [[topics]] blocks compiled
//	config.go     Config
type loop struct {
	cfg      Config
	log      *slog.Logger
	tr       *status.Tracker
	plan     plan
	c        *kafka.Consumer
	deferred sdk.DeferredSink // nil for a plain sink
	ledger   *offsetLedger    // what may be committed (set by subscribe)
	dlq      *dlqProducer
	topics   sync.Map // topic -> topicInfo

	// Batches: polled, in Consume, awaiting redelivery.
	pending      []sdk.Record // polled, not yet handed over
	spare        []sdk.Record // a consumed batch's array, for the next pending
	pendingSince time.Time
	inflight     *flight
	results      chan outcome
	retry        []sdk.Record // a failed batch awaiting redelivery
	retryTaken   bool         // the sink took it; only its dead letters failed
	retryDead    []deadLetter // those dead letters
	retryAt      time.Time
	failures     int
	lastTP       sdk.TopicPartition // the partition of the last polled record
	lastOK       bool               // lastTP is set and assigned
	lastSchema   sdk.Schema         // the schema of lastTP's topic
	nextCommit   time.Time
	nextHealth   time.Time     // a sdk.Health sink's next reading, every CommitInterval
	pauseAfter   time.Duration // how long a Consume may run before the loop pauses and polls

	// Pausing, stopping, and what stopped the loop.
	paused   bool
	stopping bool
	stopAt   time.Time // when the stop began
	closing  bool
	fatal    error // the consumer cannot go on (fenced by a member with the same InstanceID)
	panicked error // the sink or a transform panicked: the loop stops and the supervisor starts it again

	// The consumer group (rebalance.go).
	cooperative bool
	assigned    map[sdk.TopicPartition]bool
	generation  int64  // rebalance events seen (Placement.Generation)
	instance    string // the group.instance.id in effect, "" for a dynamic member

	// Stranded partitions (stranded.go).
	// unsteadySince: when the statistics first showed a rebalance in
	// progress; zero while the group is steady.
	unsteadySince time.Time
	strandAfter   time.Duration
	stranded      map[sdk.TopicPartition]bool // given up during a long rebalance, still assigned

	consumeH, transformH sdk.Histogram
	ackedC, nackedC      sdk.Counter
}

// flight is a batch handed to Consume.
type flight struct {
	batch   []sdk.Record
	ctx     context.Context
	cancel  context.CancelFunc
	revoked bool      // cancelled by a revoke
	start   time.Time // when Consume was called
	// taken: the sink took the batch before; only dead are produced.
	taken bool
	dead  []deadLetter
}

// outcome is what a flight came back with.
type outcome struct {
	err    error
	dead   int          // records sent to dead-letter topics
	unsent []deadLetter // dead letters of a taken batch that could not be produced
	sent   []deadLetter // dead letters produced
	held   []sdk.Record // rejected records with no dead_letter_topic to go to
	panic  bool         // err is a panic in the sink or a transform
}
