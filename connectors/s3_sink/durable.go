package s3sink

import (
	"context"
	"fmt"

	"github.com/picomq/pico-connectors/sdk"
)

// Durable offsets, and the release of partitions on a rebalance.

// Durable returns, for each partition, the first offset not yet in the
// bucket: the first record of its oldest file not uploaded, or of its open
// file, or the next offset when everything is uploaded. In buffered
// delivery every accepted record counts; with table_format = "iceberg" only
// what the table's snapshots hold. A released partition is reported once
// more, then forgotten.
func (s *Sink) Durable() map[sdk.TopicPartition]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[sdk.TopicPartition]int64, len(s.parts))
	for k, p := range s.parts {
		if !p.started || (p.released && len(p.pending) > 0) {
			continue
		}
		off := p.durable(s.opts.Buffered)
		if s.ice != nil {
			off = p.ice.durable // what the table holds
		}
		out[sdk.TopicPartition{Topic: p.topic, Partition: p.partition}] = off
		if p.released {
			delete(s.parts, k)
			if s.last == p {
				s.last = nil
			}
		}
	}
	return out
}

// Release gives up partitions. In exactly_once their open and queued files
// are dropped (they were not committed: the next owner replays them) and an
// upload in progress finishes its attempt; in buffered delivery their open
// files are uploaded first. With table_format = "iceberg" it first waits
// for a table commit under way. Durable then reports each partition's
// final offset once.
func (s *Sink) Release(ctx context.Context, partitions []sdk.TopicPartition) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	stop := context.AfterFunc(ctx, func() { s.mu.Lock(); s.cond.Broadcast(); s.mu.Unlock() })
	defer stop()
	if err := s.iceSettle(ctx); err != nil {
		return err
	}
	var mine []*partitionState
	for _, tp := range partitions {
		p := s.parts[bufferKey{tp.Topic, tp.Partition}]
		if p == nil || p.released {
			continue
		}
		mine = append(mine, p)
		if s.opts.Buffered {
			s.closeFile(p)
			continue
		}
		p.next = p.durable(s.opts.Buffered)
		s.dropGroup(p)
		for _, f := range p.pending {
			switch f.state {
			case fileUploading:
				f.cancel() // no further attempt after this one
			case fileQueued, fileFailed:
				if f.rounds > 0 {
					s.failing--
				}
				f.state = fileDone
				f.cancel()
				s.free(f.chunks)
				f.chunks = nil
			}
		}
		p.ahead = nil
		s.iceRelease(p)
		p.released = true
		s.pop(p)
	}
	s.m.failingFiles.Set(float64(s.failing))
	for _, p := range mine {
		for len(p.pending) > 0 {
			if ctx.Err() != nil {
				return fmt.Errorf("s3 sink: release of %s/%d: %w", p.topic, p.partition, ctx.Err())
			}
			s.cond.Wait()
		}
		p.released = true
		s.log.Info("S3 sink released a partition", "topic", p.topic, "partition", p.partition, "durable", p.next)
	}
	s.m.bufferedBytes.Set(float64(s.held))
	return nil
}
