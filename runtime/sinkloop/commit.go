package sinkloop

import (
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/backoff"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// committer commits offsets off the poll loop: the loop adds offsets and
// goes on polling while a goroutine commits the latest ones, at most once
// per commitSpacing (a commit carries the highest offset added per
// partition, so a slow commit coalesces the next ones), and retries a
// failed one on its own. flush commits synchronously, for a revoke and the
// stop, after any commit in progress.
type committer struct {
	c   *kafka.Consumer
	log *slog.Logger
	tr  *status.Tracker

	run sync.Mutex // held while committing

	mu      sync.Mutex
	pending map[sdk.TopicPartition]int64
	last    map[sdk.TopicPartition]int64 // last offset committed (or the first consumed) per partition
	wake    chan struct{}
	done    chan struct{}
	stopped chan struct{}
}

// commitSpacing is the least time from one commit to the next; offsets
// added meanwhile go into the next one. CommitOffsets waits for the group
// coordinator inside a cgo call, and a goroutine in a cgo call keeps its
// P: with a commit after every batch, the poll goroutine lost its P to
// the committer 300 times a second for 0.3 ms each, a tenth of its time
// (go tool trace -pprof=sched of the no-op sink bench on 2 cores).
const commitSpacing = 100 * time.Millisecond

func newCommitter(c *kafka.Consumer, log *slog.Logger, tr *status.Tracker) *committer {
	k := &committer{c: c, log: log, tr: tr, pending: map[sdk.TopicPartition]int64{}, last: map[sdk.TopicPartition]int64{},
		wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	go k.serve()
	return k
}

// maxCommitRetry bounds the back-off between retries of a failed commit.
const maxCommitRetry = 5 * time.Second

// serve commits on every kick, at most once per commitSpacing. A failed
// commit is retried on its own, after the runtime's back-off from
// commitSpacing doubling up to maxCommitRetry: a sink whose topics went idle gets no
// more kicks, and its last offsets would stay uncommitted (redelivered
// after a restart) until the next record.
func (k *committer) serve() {
	defer close(k.stopped)
	wait := backoff.Exponential(commitSpacing, maxCommitRetry)
	var retry <-chan time.Time
	failures := 0
	for {
		select {
		case <-k.done:
			return
		case <-k.wake:
		case <-retry:
		}
		if k.flush() {
			retry, failures = nil, 0
		} else {
			failures++
			retry = time.After(wait(failures))
		}
		select {
		case <-k.done:
			return
		case <-time.After(commitSpacing):
		}
	}
}

// base records the first offset the loop consumed of a partition since it
// was assigned: commits at or below it are not made, and Committed counts
// from it.
func (k *committer) base(p sdk.TopicPartition, offset int64) {
	k.mu.Lock()
	if _, ok := k.last[p]; !ok {
		k.last[p] = offset
	}
	k.mu.Unlock()
}

// add asks for offset (the next record to read) to be committed for p.
func (k *committer) add(p sdk.TopicPartition, offset int64) {
	k.mu.Lock()
	if last, ok := k.last[p]; ok && offset > last && offset > k.pending[p] {
		k.pending[p] = offset
	}
	k.mu.Unlock()
}

// kick starts an asynchronous commit of what was added.
func (k *committer) kick() {
	select {
	case k.wake <- struct{}{}:
	default:
	}
}

// flush commits what was added, after any commit in progress, and reports
// whether every offset was committed. A failed commit keeps its offsets
// for the next one.
func (k *committer) flush() bool {
	k.run.Lock()
	defer k.run.Unlock()
	k.mu.Lock()
	if len(k.pending) == 0 {
		k.mu.Unlock()
		return true
	}
	take := k.pending
	k.pending = map[sdk.TopicPartition]int64{}
	k.mu.Unlock()
	parts := make([]kafka.TopicPartition, 0, len(take))
	for p, o := range take {
		topic := p.Topic
		parts = append(parts, kafka.TopicPartition{Topic: &topic, Partition: p.Partition, Offset: kafka.Offset(o)})
	}
	sort.Slice(parts, func(i, j int) bool {
		if *parts[i].Topic != *parts[j].Topic {
			return *parts[i].Topic < *parts[j].Topic
		}
		return parts[i].Partition < parts[j].Partition
	})
	res, err := k.c.CommitOffsets(parts)
	k.mu.Lock()
	defer k.mu.Unlock()
	if err != nil {
		// The records were consumed; the next commit covers them, and a
		// restart before that redelivers them.
		k.log.Warn("offset commit failed; the next commit retries it", "err", err)
		k.tr.RecordError(fmt.Errorf("commit offsets: %w", err))
		for p, o := range take {
			if _, still := k.last[p]; still && o > k.pending[p] {
				k.pending[p] = o
			}
		}
		return false
	}
	failed := map[sdk.TopicPartition]bool{}
	for _, r := range res {
		if r.Error != nil && r.Topic != nil {
			failed[sdk.TopicPartition{Topic: *r.Topic, Partition: r.Partition}] = true
			k.log.Warn("offset commit failed for a partition", "topic", *r.Topic, "partition", r.Partition, "err", r.Error)
		}
	}
	for p, o := range take {
		last, still := k.last[p]
		if !still {
			continue
		}
		if failed[p] {
			if o > k.pending[p] {
				k.pending[p] = o
			}
			continue
		}
		if o > last {
			k.tr.Counters.Committed.Add(o - last)
			k.last[p] = o
		}
	}
	return len(failed) == 0
}

// forget drops what is known of partitions the loop no longer owns; call
// it after flush.
func (k *committer) forget(parts []sdk.TopicPartition) {
	k.mu.Lock()
	for _, p := range parts {
		delete(k.pending, p)
		delete(k.last, p)
	}
	k.mu.Unlock()
}

// close stops the goroutine after a last flush.
func (k *committer) close() {
	close(k.done)
	<-k.stopped
	k.flush()
}
