package s3sink

import (
	"fmt"

	"github.com/picomq/pico-connectors/sdk"
)

// Placing a record in its group's files, when path_template reads each
// record (see group.go).

// maxOpen returns max_open_files (100 when a Config built in code left it
// out).
func (s *Sink) maxOpen() int {
	if s.opts.MaxOpenFiles > 0 {
		return s.opts.MaxOpenFiles
	}
	return 100
}

// place makes the file rec belongs to p's open file, within p's group. A
// record that would open one file more than max_open_files cuts the group
// first (the record starts the next one: a cut every replay makes too). A
// group not started yet is left to startFile.
func (s *Sink) place(p *partitionState, rec *sdk.Record, batch []sdk.Record) error {
	for p.group.count > 0 {
		b, err := s.layout.appendDir(s.dirBuf[:0], rec, p.group.firstTime)
		s.dirBuf = b
		if err != nil {
			return recordError(rec, err)
		}
		if p.open.count > 0 && string(b) == p.open.dir {
			return nil
		}
		if p.idle[string(b)] == nil && openFileCount(p) >= s.maxOpen() {
			if err := s.close(p, batch); err != nil {
				return err
			}
			continue
		}
		switchTo(p, b)
		return nil
	}
	return nil
}

// lookUpGroup looks for the marker of a group of p starting at first whose
// lead is in dir: when found, the group is written again whole, cut where
// the marker says (see marker.go). The lock is released meanwhile.
func (s *Sink) lookUpGroup(p *partitionState, dir string, first int64) error {
	prefix := filePrefix(dir+"_", p.partition, first)
	client := s.client
	s.mu.Unlock()
	found, last, err := listLast(s.ctx, client, s.opts.Bucket, prefix, s.attemptTimeout(0))
	s.mu.Lock()
	if err != nil {
		return fmt.Errorf("s3 sink: listing s3://%s/%s* to find a group of files cut before the last commit (the sink needs s3:ListBucket): %w", s.opts.Bucket, prefix, err)
	}
	if s.parts[p.bufferKey] != p || p.released {
		return errReleased
	}
	p.group.recover, p.group.cut = found, last
	if found {
		s.log.Info("S3 sink found the marker of a group of files cut before the last commit, which may be in the bucket in part; the group is written again, cut at the same record",
			"topic", p.topic, "partition", p.partition, "first_offset", first, "last_offset", last)
	}
	return nil
}
