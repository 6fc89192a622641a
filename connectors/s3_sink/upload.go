package s3sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Uploads: closed files queue per partition and upload in the background,
// up to max_in_flight; a failed one is retried in rounds (exactly_once) or
// left behind a .lost marker (buffered).

// refuse returns the error Consume fails with while uploads fail
// (exactly_once), so the runtime's status shows it.
func (s *Sink) refuse() error {
	if s.opts.Buffered || s.failing == 0 {
		return nil
	}
	return fmt.Errorf("s3 sink: %d file(s) kept in memory after failed uploads and retried with back-off; no record is accepted until one succeeds: %w", s.failing, s.lastErr)
}

// kick starts uploads up to max_in_flight, the oldest files of every
// partition first, among the first max_in_flight files of each (see
// window). A file uploads beside the earlier files of its partition still
// on their way only when each of those was cut at a replayable record and
// has its directory (see the package doc), or, in a group of files, is of
// its group or of one whose marker is in the bucket (marker.go); in
// buffered delivery only the oldest file of a partition uploads.
func (s *Sink) kick() {
	for depth := 0; depth < s.opts.MaxInFlight && s.inFlight < s.opts.MaxInFlight; depth++ {
		for _, p := range s.parts {
			if s.inFlight >= s.opts.MaxInFlight {
				break
			}
			i := s.window(p, depth)
			if i >= len(p.pending) || p.pending[i].state != fileQueued || !s.mayStart(p, i) {
				continue
			}
			f := p.pending[i]
			f.state = fileUploading
			s.inFlight++
			s.wg.Add(1)
			go s.upload(f)
		}
	}
	s.m.inFlight.Set(float64(s.inFlight))
}

// window returns the index in p.pending of the file at depth in the
// window kick starts uploads from: p's oldest files, done or not; in a
// group of files, its oldest files not done, so the next group's start as
// the files of one end, in whatever order they do.
func (s *Sink) window(p *partitionState, depth int) int {
	if !s.layout.perRecord {
		return depth
	}
	for i, f := range p.pending {
		if f.state == fileDone {
			continue
		}
		if depth == 0 {
			return i
		}
		depth--
	}
	return len(p.pending)
}

// mayStart reports whether p.pending[i] may upload now.
func (s *Sink) mayStart(p *partitionState, i int) bool {
	if i > 0 && s.opts.Buffered {
		return false
	}
	f := p.pending[i]
	for _, g := range p.pending[:i] {
		if g.state == fileDone {
			continue
		}
		if s.layout.perRecord && !sameGroup(g, f) && !g.marked() || !s.layout.perRecord && (!g.replayable || g.dir != f.dir) {
			return false
		}
	}
	return true
}

// sameGroup reports whether g, queued before f, is of f's group of files
// (see group.go, marker.go).
func sameGroup(g, f *closedFile) bool {
	return g.info.FirstOffset == f.info.FirstOffset
}

// upload runs one round of max_attempts for f, then records the outcome.
func (s *Sink) upload(f *closedFile) {
	defer s.wg.Done()
	start := s.now()
	target := "s3://" + s.opts.Bucket + "/" + f.key
	attempts, err := s.retry.do(f.ctx, target, func(context.Context) error {
		if err := s.encode(f); err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(s.ctx, s.attemptTimeout(f.size))
		defer cancel()
		if err := s.markGroup(ctx, f); err != nil {
			return err
		}
		in := s.opts.objectInput(f.key)
		if f.stream != nil {
			return s.putStreamed(ctx, in, f)
		}
		in.Body, in.ContentLength = newChunkReader(f.chunks), aws.Int64(f.size)
		if s.multipart(f.size) {
			return s.putMultipart(ctx, in, f)
		}
		_, err := s.client.PutObject(ctx, in)
		return err
	})
	if err == nil {
		s.uploadedInGroup(f)
	}
	var markErr error
	if err != nil && s.opts.Buffered {
		markErr = s.writeLostMarker(f.ctx, f.key, f.info, f.count, attempts, err)
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	defer s.cond.Broadcast()
	s.inFlight--
	p := f.p
	if err == nil {
		s.m.uploadSeconds.Observe(s.now().Sub(start).Seconds())
		s.m.filesUploaded.Add(1)
		s.m.recordsUploaded.Add(float64(f.count))
		s.m.bytesUploaded.Add(float64(f.size))
		s.log.Debug("S3 sink uploaded a file", "key", f.key, "records", f.count, "bytes", f.size, "attempts", attempts)
		if f.rounds > 0 {
			s.failing--
			s.log.Info("S3 sink uploaded a file after failed rounds", "key", f.key, "rounds", f.rounds)
		}
		s.lastErr = nil
		f.uploaded = true
		s.iceUploaded(f)
		s.finish(f)
	} else {
		s.m.uploadFailures.Add(1)
		s.lastErr = err
		switch {
		case s.opts.Buffered:
			s.m.recordsLost.Add(float64(f.count))
			s.m.filesLost.Add(1)
			s.log.Error("S3 sink dropped a file after a failed upload", "key", f.key, "marker", f.key+LostSuffix,
				"first_offset", f.info.FirstOffset, "last_offset", f.info.LastOffset, "records", f.count,
				"attempts", attempts, "error", err, "marker_error", markErr)
			f.err = err
			if markErr != nil {
				f.err = errors.Join(err, fmt.Errorf("writing the marker %s%s also failed: %w", f.key, LostSuffix, markErr))
			}
			s.finish(f)
		case p.released:
			if f.rounds > 0 {
				s.failing--
			}
			s.finish(f)
		default:
			if f.rounds == 0 {
				s.failing++
			}
			f.rounds++
			f.state = fileFailed
			level := slog.LevelWarn
			if f.rounds == 1 {
				level = slog.LevelError
			}
			s.log.Log(context.Background(), level, "S3 sink could not upload a file; it stays in memory and is retried, and the partition's commit waits",
				"key", f.key, "records", f.count, "rounds", f.rounds, "attempts", attempts, "error", err)
			if !s.closing {
				d := backoff(s.opts.RetryDelay, f.rounds+1, rand.Float64())
				time.AfterFunc(d, func() { s.requeue(f) })
			}
		}
	}
	s.m.failingFiles.Set(float64(s.failing))
	s.kick()
	s.m.bufferedBytes.Set(float64(s.held))
}

// requeue puts a failed file back in the queue for its next round.
func (s *Sink) requeue(f *closedFile) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f.state == fileFailed && !s.closing && !f.p.released {
		f.state = fileQueued
		s.kick()
	}
}

// finish marks f done and frees its chunks; then takes the done files at
// the front of its partition's queue off it, so a file leaves the queue
// only after every earlier one, whatever order uploads finish in.
func (s *Sink) finish(f *closedFile) {
	f.state = fileDone
	s.dropMultipart(f)
	f.cancel()
	s.free(f.chunks)
	f.chunks = nil
	s.pop(f.p)
}

// pop takes the done files at the front of p's queue off it. For a
// released partition it moves next past each uploaded one, up to the first
// that was not.
func (s *Sink) pop(p *partitionState) {
	n := 0
	for ; n < len(p.pending) && p.pending[n].state == fileDone; n++ {
		if g := p.pending[n]; p.released && !p.stuck {
			if g.uploaded {
				if g.lead {
					p.next = max(p.next, g.info.LastOffset+1)
				}
			} else {
				p.stuck = true
			}
		}
	}
	if n > 0 {
		rest := copy(p.pending, p.pending[n:])
		clear(p.pending[rest:])
		p.pending = p.pending[:rest]
	}
}

// LostMarker is the JSON body of a <key>.lost object.
type LostMarker struct {
	Bucket      string `json:"bucket"`
	Key         string `json:"key"`
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	FirstOffset int64  `json:"first_offset"`
	LastOffset  int64  `json:"last_offset"`
	RecordCount int    `json:"record_count"`
	Attempts    int    `json:"attempts"`
	Error       string `json:"error"`
	Time        string `json:"time"`
}

// writeLostMarker writes <key>.lost once, without retries: the store has
// just refused the file, and the marker is a courtesy next to the error.
func (s *Sink) writeLostMarker(ctx context.Context, key string, info fileInfo, count, attempts int, cause error) error {
	m := LostMarker{
		Bucket: s.opts.Bucket, Key: key, Topic: info.Topic, Partition: info.Partition,
		FirstOffset: info.FirstOffset, LastOffset: info.LastOffset, RecordCount: count,
		Attempts: attempts, Error: cause.Error(), Time: s.now().UTC().Format(time.RFC3339Nano),
	}
	body, err := json.Marshal(m)
	if err != nil {
		return err
	}
	// The marker is how an operator finds the range to recover: write it
	// even when the caller's context has just ended (a stop during the
	// retries), within a bound of its own.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.attemptTimeout(int64(len(body))))
	defer cancel()
	in := &s3.PutObjectInput{
		Bucket:      aws.String(s.opts.Bucket),
		Key:         aws.String(key + LostSuffix),
		Body:        bytes.NewReader(body),
		ContentType: aws.String("application/json"),
	}
	s.opts.Object.putObject(in) // an encryption-only bucket policy accepts the marker too
	_, err = s.client.PutObject(ctx, in)
	return err
}
