package s3sink

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/picomq/pico-connectors/sdk"
)

// The open file of a partition: a record is appended to it (formatted, or
// as a Parquet row), within max_buffer_size, and the file is cut at the
// rotation thresholds and handed to upload.

// maxObjectBytes is the most bytes a file may hold before it is closed:
// S3's largest object in parts of part_size (see options.objectLimit),
// less room for the overhead of compression or of Parquet's encoding (the
// file's size counts its bytes before either, streamed or not).
func (s *Sink) maxObjectBytes() int64 {
	if s.opts.Compression != compressNone || s.pq != nil {
		return s.opts.objectLimit() - 64<<20
	}
	return s.opts.objectLimit()
}

// rotateBefore reports whether rec must start a new group of files: it
// reaches the group's first record's time plus rotate_interval, it is past
// where the group's files found in the bucket end, or it would take its
// file past what one PutObject takes.
func (s *Sink) rotateBefore(p *partitionState, rec *sdk.Record, rowSize int) bool {
	if s.opts.RotateInterval > 0 && !rec.Timestamp.Before(p.group.firstTime.Add(s.opts.RotateInterval)) {
		return true
	}
	if p.group.recover && p.group.cut >= 0 && rec.Offset > p.group.cut {
		return true // the group's files in the bucket end there
	}
	if s.pq != nil {
		return p.open.size+int64(rowSize)+pqFooterBound > s.maxObjectBytes()
	}
	// A cheap bound first; the estimate only near the limit.
	crude := int64(len(rec.Payload)+len(rec.Key)+len(p.topic))*8 + 4096
	for _, h := range rec.Headers {
		crude += int64(len(h.Key)+len(h.Value)+8) * 8
	}
	if p.open.size+crude <= s.maxObjectBytes() {
		return false
	}
	return p.open.size+int64(s.fmt.estimate(rec, len(p.topic))+1) > s.maxObjectBytes()
}

// dirOf renders the key directory of a file whose group starts at rec.
func (s *Sink) dirOf(rec *sdk.Record) (string, error) {
	b, err := s.layout.appendDir(s.dirBuf[:0], rec, rec.Timestamp)
	s.dirBuf = b
	if err != nil {
		return "", recordError(rec, err)
	}
	return string(b), nil
}

func recordError(rec *sdk.Record, err error) error {
	return fmt.Errorf("s3 sink: record %s/%d@%d cannot be written: %w", rec.Topic, rec.Partition, rec.Offset, err)
}

// startFile starts p's open file at rec, and p's group with it when the
// group has no record yet. A file of a group under way already has its
// directory (place).
func (s *Sink) startFile(p *partitionState, rec *sdk.Record) error {
	fb := &p.open
	if p.group.count == 0 {
		dir, err := s.dirOf(rec)
		if err != nil {
			return err
		}
		fb.dir = dir
		p.group.first, p.group.firstTime = rec.Offset, rec.Timestamp
	}
	fb.first = rec.Offset
	fb.firstTime = rec.Timestamp
	fb.part = s.icePartition(rec)
	s.open++
	s.m.openFiles.Set(float64(s.open))
	return nil
}

// countAppended counts rec, just appended to p's open file.
func countAppended(p *partitionState, rec *sdk.Record) {
	p.open.count++
	p.open.last = rec.Offset
	p.group.count++
	p.group.last = rec.Offset
	p.next = rec.Offset + 1
}

// append formats rec into p's open file (parquet: its row, s.row),
// starting a new chunk when the record might not fit; a new chunk waits
// for room under max_buffer_size.
func (s *Sink) append(p *partitionState, rec *sdk.Record) error {
	need := s.fmt.estimate(rec, len(p.topic)) + 1 // + the closing ']'
	if s.pq != nil {
		need = s.row.size + binary.MaxVarintLen64 // + a row group's mark
	}
	fb := &p.open
	n := len(fb.chunks)
	if n == 0 || cap(fb.chunks[n-1])-len(fb.chunks[n-1]) < need {
		if err := s.room(p, s.pool.capFor(chunkClass(fb), need)); err != nil {
			return err
		}
		n = len(fb.chunks) // room may have closed p's file
		c := s.pool.get(chunkClass(fb), need)
		s.grow(cap(c))
		fb.chunks = append(fb.chunks, c)
		n++
	}
	if fb.count == 0 {
		if err := s.startFile(p, rec); err != nil {
			s.free(fb.chunks)
			fb.chunks = fb.chunks[:0]
			return err
		}
	}
	c := &fb.chunks[n-1]
	before := len(*c)
	if s.pq != nil {
		*c = s.appendParquetRow(*c, fb)
	} else {
		*c = s.fmt.appendRecord(*c, rec, fb.count == 0, p.tail)
	}
	fb.size += int64(len(*c) - before)
	countAppended(p, rec)
	if !p.open.full(&s.opts) { // a full file is cut now: its upload sends its parts
		s.streamOpen(p)
	}
	return nil
}

// chunkClass is the index of the chunk fb takes next, for the pool's
// sizes: a streamed file, whose first chunks go back as its parts go up,
// takes the largest.
func chunkClass(fb *fileBuffer) int {
	if fb.stream != nil {
		return 64
	}
	return len(fb.chunks)
}

// room waits until n more bytes fit under max_buffer_size, less what
// parquet encodings that may start need (encodeRoom), and until p's open
// file, when it streams, holds at most max_in_flight parts besides the one
// filling (streamAhead). It waits for uploads and parts; when every held
// byte is in open files and no part is on its way it closes the largest
// one early (safe: its successors wait for it, and a replay finds it in
// the bucket). It fails while uploads fail (exactly_once), or when p is
// released meanwhile.
func (s *Sink) room(p *partitionState, n int) error {
	for {
		over := s.held > 0 && s.held+int64(n) > s.opts.MaxBufferSize-s.encodeRoom()
		if !over && !s.streamAhead(p) {
			return nil
		}
		if err := s.refuse(); err != nil {
			return fmt.Errorf("s3 sink: max_buffer_size (%s) reached: %w", formatSize(s.opts.MaxBufferSize), err)
		}
		if over && s.pendingFiles() == 0 && !s.partsRunning() {
			if big := s.largestOpen(); big != nil {
				s.log.Debug("S3 sink at max_buffer_size: uploading the largest open file early",
					"topic", big.topic, "partition", big.partition, "bytes", groupSize(big))
				s.closeFile(big)
				continue
			}
		}
		s.m.bufferedBytes.Set(float64(s.held))
		s.cond.Wait()
		if s.parts[p.bufferKey] != p || p.released {
			return errReleased
		}
		if s.closing {
			return errors.New("s3 sink: closed during Consume")
		}
	}
}

func (s *Sink) pendingFiles() int {
	n := 0
	for _, p := range s.parts {
		n += len(p.pending)
	}
	return n
}

// largestOpen returns the partition with the largest open files, one that
// replays a hole (p.ahead) or a group found in part (group.recover) only
// when no other has an open file: cutting
// there early is the one cut a hole's replay may not make (see the package
// doc), taken only so as not to wait forever.
func (s *Sink) largestOpen() *partitionState {
	var big *partitionState
	var bigSize int64
	for _, p := range s.parts {
		if p.group.count == 0 {
			continue
		}
		size := groupSize(p)
		free, bigFree := len(p.ahead) == 0 && !p.group.recover, big != nil && len(big.ahead) == 0 && !big.group.recover
		if big == nil || free && !bigFree || free == bigFree && size > bigSize {
			big, bigSize = p, size
		}
	}
	return big
}

// close closes p's open file. In buffered delivery it waits for the
// upload, and on a loss it rewinds p to the first record of batch the
// lost file held, so the redelivered batch writes those again.
func (s *Sink) close(p *partitionState, batch []sdk.Record) error {
	f := s.cutFile(p, true)
	if f == nil || !s.opts.Buffered {
		return nil
	}
	for f.state != fileDone {
		s.cond.Wait()
	}
	err := groupErr(f)
	if err == nil {
		return nil
	}
	for i := range batch {
		if r := &batch[i]; r.Topic == p.topic && r.Partition == p.partition {
			p.next = max(f.info.FirstOffset, r.Offset)
			break
		}
	}
	return err
}

// groupErr returns why a file of the group of lead was lost (buffered
// delivery), once lead is done: the files of a partition upload one by
// one, lead last.
func groupErr(lead *closedFile) error {
	for _, g := range lead.siblings {
		if g.err != nil {
			return g.err
		}
	}
	return lead.err
}

// closeFile finishes p's open file at a record a replay may not cut at
// (the wall clock, memory, a stop), queues it for upload and starts what
// max_in_flight allows.
func (s *Sink) closeFile(p *partitionState) *closedFile { return s.cutFile(p, false) }

// cutFile finishes p's open files, queues them for upload and starts what
// max_in_flight allows. replayable: every replay cuts at the same record.
// It returns the group's lead (the file of its first record), queued last.
func (s *Sink) cutFile(p *partitionState, replayable bool) *closedFile {
	if p.group.count == 0 {
		return nil
	}
	var lead *closedFile
	if len(p.idle) == 0 {
		lead = s.cutOne(p, &p.open, replayable)
	} else {
		fbs := make([]*fileBuffer, 0, len(p.idle)+1)
		for _, fb := range p.idle {
			fbs = append(fbs, fb)
		}
		if p.open.count > 0 {
			fbs = append(fbs, &p.open)
		}
		slices.SortFunc(fbs, func(a, b *fileBuffer) int { return cmp.Compare(a.first, b.first) })
		var group []*closedFile
		for _, fb := range append(fbs[1:], fbs[0]) {
			group = append(group, s.cutOne(p, fb, replayable))
		}
		lead = group[len(group)-1]
		lead.siblings = group[:len(group)-1]
		if !s.opts.Buffered {
			m := &groupMark{key: markerKey(lead.dir, p.partition, lead.info.FirstOffset, lead.info.LastOffset), left: len(group)}
			for _, f := range group {
				f.mark = m
			}
		}
		clear(p.idle)
		if p.open.count == 0 {
			s.dropFile(&p.open) // placed, but nothing appended
		}
	}
	lead.lead = true
	p.group = groupState{cut: -1}
	s.kick()
	return lead
}

// cutOne finishes fb, a file of p's group, and queues it. Its key carries
// the group's offsets: one file per directory per group, so no two share
// a key, and every file of the group names where the group ends.
func (s *Sink) cutOne(p *partitionState, fb *fileBuffer, replayable bool) *closedFile {
	if len(fb.chunks) == 0 && fb.size > 0 {
		// Streamed, every byte up in parts: the format's end (json_array's
		// ']') needs a chunk.
		c := s.pool.get(0, 1)
		s.grow(cap(c))
		fb.chunks = append(fb.chunks, c)
	}
	if last := len(fb.chunks) - 1; last >= 0 {
		c := &fb.chunks[last]
		before, capBefore := len(*c), cap(*c)
		*c = s.fmt.finish(*c)
		fb.size += int64(len(*c) - before)
		s.grow(cap(*c) - capBefore)
	}
	g := &p.group
	info := fileInfo{Topic: p.topic, Partition: p.partition, FirstOffset: g.first, LastOffset: g.last, FirstTime: g.firstTime}
	f := &closedFile{
		p: p, info: info, part: fb.part, count: fb.count, chunks: fb.chunks, size: fb.size, dir: fb.dir, replayable: replayable,
		key: fileKey(fb.dir, p.partition, g.first, g.last, s.opts.Format.ext()+s.opts.Compression.ext()),
	}
	f.ctx, f.cancel = context.WithCancel(s.ctx)
	s.cutStream(fb, f)
	p.pending = append(p.pending, f)
	*fb = fileBuffer{}
	s.open--
	s.m.openFiles.Set(float64(s.open))
	return f
}
