package sinkloop

import (
	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/sdk"
)

// offsetLedger is the loop's account of what it may commit, per partition it
// owns: how far it consumed, the records a DeferredSink never saw
// (skipped: dead-lettered before Consume) and those it rejected with no
// dead_letter_topic to go to (held). It chooses the offset to commit; the
// committer (commit.go) commits it off the poll loop.
type offsetLedger struct {
	commits  *committer
	deferred sdk.DeferredSink               // nil for a plain sink
	consumed map[sdk.TopicPartition]int64   // next offset after the last consumed record
	based    map[sdk.TopicPartition]bool    // partitions whose first offset the committer knows
	skips    map[sdk.TopicPartition][]int64 // a DeferredSink's records dead-lettered before it saw them, in order
	holds    map[sdk.TopicPartition]int64   // a DeferredSink's lowest rejected offset with no dead_letter_topic: commits stay below it
}

func newOffsetLedger(commits *committer, deferred sdk.DeferredSink) *offsetLedger {
	return &offsetLedger{
		commits:  commits,
		deferred: deferred,
		consumed: map[sdk.TopicPartition]int64{},
		based:    map[sdk.TopicPartition]bool{},
		skips:    map[sdk.TopicPartition][]int64{},
		holds:    map[sdk.TopicPartition]int64{},
	}
}

// base tells the committer, once per assignment of p, the offset of the
// first record consumed of it.
func (o *offsetLedger) base(p sdk.TopicPartition, offset int64) {
	if !o.based[p] {
		o.based[p] = true
		o.commits.base(p, offset)
	}
}

// consume accounts for a batch the sink took, of the partitions in owned:
// how far each was consumed, and a DeferredSink's records that went to a
// dead-letter topic before it saw them. A plain sink's consumed offsets
// are added to the commits; a DeferredSink's wait for durable (the caller
// kicks or flushes the commits).
func (o *offsetLedger) consume(batch []sdk.Record, sent []deadLetter, owned map[sdk.TopicPartition]bool) {
	ends := lastOffsets(batch)
	for p, next := range ends {
		if owned[p] && next > o.consumed[p] {
			o.consumed[p] = next
		}
	}
	if o.deferred != nil {
		for _, d := range sent {
			if d.stage != deadletter.StageConsume {
				// The sink never saw it: its Durable may stop there.
				p := sdk.TopicPartition{Topic: d.rec.Topic, Partition: d.rec.Partition}
				o.skips[p] = append(o.skips[p], d.rec.Offset)
			}
		}
		return
	}
	for p := range ends {
		if owned[p] {
			o.commits.add(p, o.consumed[p])
		}
	}
}

// durable adds, per partition, min(Durable, next consumed) to the commits
// (the caller kicks or flushes them).
func (o *offsetLedger) durable() {
	d := o.deferred.Durable()
	for p, next := range o.consumed {
		off, ok := d[p]
		if !ok {
			continue
		}
		// Step over records dead-lettered before the sink saw them.
		skips := o.skips[p]
		for len(skips) > 0 && skips[0] <= off {
			if skips[0] == off {
				off++
			}
			skips = skips[1:]
		}
		if len(skips) == 0 {
			delete(o.skips, p)
		} else {
			o.skips[p] = skips
		}
		if h, ok := o.holds[p]; ok {
			off = min(off, h)
		}
		// Commit only an offset the sink reported, once it is consumed: a
		// Durable past what was consumed (the sink skipping a file it found
		// in its destination) waits until consumption reaches it, as an
		// offset in the middle of such a file would make the next owner
		// resume inside it and write its rest a second time.
		if off > next {
			continue
		}
		o.commits.add(p, off)
	}
}

// hold keeps a DeferredSink's commits below the rejected records that have
// no dead-letter topic, until the partition is given up (its next owner,
// or the next start, reads them again). It reports whether it held any.
func (o *offsetLedger) hold(recs []sdk.Record) bool {
	if o.deferred == nil || len(recs) == 0 {
		return false
	}
	for _, r := range recs {
		p := sdk.TopicPartition{Topic: r.Topic, Partition: r.Partition}
		if h, ok := o.holds[p]; !ok || r.Offset < h {
			o.holds[p] = r.Offset
		}
	}
	return true
}

// holding reports whether commits stay below a rejected record somewhere.
func (o *offsetLedger) holding() bool {
	return len(o.holds) > 0
}

// forget drops what is known of partitions the loop no longer owns; call
// it after the commits are flushed.
func (o *offsetLedger) forget(parts []sdk.TopicPartition) {
	o.commits.forget(parts)
	for _, p := range parts {
		delete(o.consumed, p)
		delete(o.based, p)
		delete(o.skips, p)
		delete(o.holds, p)
	}
}

// lastOffsets returns, per partition, the offset after the batch's last
// record of it. Records come in runs of one partition: one map write per run.
func lastOffsets(batch []sdk.Record) map[sdk.TopicPartition]int64 {
	out := map[sdk.TopicPartition]int64{}
	for i := 0; i < len(batch); {
		j := i + 1
		for j < len(batch) && batch[j].Partition == batch[i].Partition && batch[j].Topic == batch[i].Topic {
			j++
		}
		p := sdk.TopicPartition{Topic: batch[i].Topic, Partition: batch[i].Partition}
		if next := batch[j-1].Offset + 1; next > out[p] {
			out[p] = next
		}
		i = j
	}
	return out
}
