// Package randomsource is the random generator source for tests and
// demos: it returns records carrying deterministic sequence numbers and
// saves the next sequence number as its state, so a restart continues
// where the last acknowledged batch ended.
//
// Every byte of a record except the json shape's ts field is derived from
// the seed and the sequence number, and a batch re-read after a Nack keeps
// the timestamp of its first attempt, so a replayed batch is identical to
// the first attempt (after a restart only ts differs).
package randomsource

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// State is the source's checkpoint: the sequence number of the next record.
type State struct {
	NextSeq int64 `json:"next_seq"`
}

// ParseState decodes a checkpoint; nil or empty means "start at 0".
func ParseState(blob []byte) (State, error) {
	var s State
	if len(blob) == 0 {
		return s, nil
	}
	if err := json.Unmarshal(blob, &s); err != nil {
		return s, fmt.Errorf("random_source: stored state %q is not {\"next_seq\":N}: %v", truncate(blob), err)
	}
	if s.NextSeq < 0 {
		return s, fmt.Errorf("random_source: stored state has a negative next_seq %d", s.NextSeq)
	}
	return s, nil
}

func truncate(b []byte) string {
	if len(b) > 40 {
		return string(b[:40]) + "..."
	}
	return string(b)
}

// Source is the random source.
type Source struct {
	cfg randomsourceconfig.Config

	mu        sync.Mutex
	committed int64 // next seq acknowledged
	next      int64 // first seq of the next Poll: after the batches in flight
	// outstanding holds the candidates (next seq) of the batches polled
	// and not yet resolved, oldest first.
	outstanding []int64
	lastPoll    time.Time
	now         func() time.Time
	// firstTS is the time of the first attempt of each unacknowledged
	// batch, by its first seq, reused when it is read again after a Nack.
	firstTS map[int64]time.Time
}

func newSource(cfg randomsourceconfig.Config) *Source {
	return &Source{cfg: cfg, now: time.Now, firstTS: map[int64]time.Time{}}
}

// maxRecords is max_records, or 0 when it is not set (no limit).
func (s *Source) maxRecords() int64 {
	if s.cfg.MaxRecords == nil {
		return 0
	}
	return int64(*s.cfg.MaxRecords)
}

// Open continues from the committed state ({"next_seq":N}), or from 0
// without one.
func (s *Source) Open(_ context.Context, state []byte) error {
	st, err := ParseState(state)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.committed, s.next, s.outstanding = st.NextSeq, st.NextSeq, nil
	return nil
}

// Committed returns the next sequence number the source has been told is
// delivered.
func (s *Source) Committed() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.committed
}

// PollAhead lets the source loop poll the next batch while the one before
// is being delivered (sdk.Pipelined): Poll continues after the batches
// in flight.
func (s *Source) PollAhead() int { return 2 }

// Poll waits out the interval since the previous poll, then returns the
// next records_per_batch records after the batches in flight (after the
// committed sequence number when none is). With max_records reached it
// waits for the interval (at least 100ms) and returns an empty batch.
func (s *Source) Poll(ctx context.Context) (sdk.Batch, error) {
	s.mu.Lock()
	start, last := s.next, s.lastPoll
	s.mu.Unlock()
	n := int64(s.cfg.RecordsPerBatch)
	if limit := s.maxRecords(); limit > 0 && start+n > limit {
		n = limit - start
	}
	wait := s.cfg.Interval
	if n <= 0 && wait < 100*time.Millisecond {
		wait = 100 * time.Millisecond
	}
	if !last.IsZero() && wait > 0 {
		if d := wait - s.now().Sub(last); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-ctx.Done():
				t.Stop()
				return sdk.Batch{}, nil
			case <-t.C:
			}
		}
	}
	s.mu.Lock()
	s.lastPoll = s.now()
	s.mu.Unlock()
	if n <= 0 {
		return sdk.Batch{}, nil
	}
	s.mu.Lock()
	ts, ok := s.firstTS[start]
	if !ok {
		ts = s.now().UTC()
		s.firstTS[start] = ts
	}
	s.mu.Unlock()
	tsText := ts.AppendFormat(nil, "2006-01-02T15:04:05.000Z07:00")
	b := sdk.Batch{Messages: make([]sdk.Message, n)}
	for i := range b.Messages {
		b.Messages[i] = s.record(start+int64(i), ts, tsText)
	}
	next := start + n
	b.State, _ = json.Marshal(State{NextSeq: next})
	s.mu.Lock()
	s.next = next
	s.outstanding = append(s.outstanding, next)
	s.mu.Unlock()
	return b, nil
}

// OnBatchResult promotes the oldest candidate on Ack (an empty batch's
// Ack, with none outstanding, changes nothing) and drops every candidate
// on Nack: the next Poll reads again from the committed sequence number.
func (s *Source) OnBatchResult(_ context.Context, r sdk.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r == sdk.Nack {
		s.outstanding, s.next = nil, s.committed
		return nil
	}
	if len(s.outstanding) > 0 {
		delete(s.firstTS, s.committed)
		s.committed, s.outstanding = s.outstanding[0], s.outstanding[1:]
	}
	return nil
}

// Close releases nothing; the source holds no resources.
func (s *Source) Close(context.Context) error { return nil }

// letters has 64 characters, so six random bits pick one.
const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"

// record builds record seq. Its random parts come from a generator seeded
// with (seed, seq).
func (s *Source) record(seq int64, ts time.Time, tsText []byte) sdk.Message {
	var pcg rand.PCG
	pcg.Seed(uint64(s.cfg.Seed), uint64(seq))
	rng := &pcg
	m := sdk.Message{Timestamp: ts}
	switch s.cfg.KeyShape {
	case randomsourceconfig.KeyShapeSequence:
		m.Key = strconv.AppendInt(nil, seq, 10)
	case randomsourceconfig.KeyShapeUUID:
		var u [16]byte
		binary.BigEndian.PutUint64(u[:8], rng.Uint64())
		binary.BigEndian.PutUint64(u[8:], rng.Uint64())
		u[6] = u[6]&0x0f | 0x40 // version 4 layout
		u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
		m.Key = fmt.Appendf(nil, "%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:])
	case randomsourceconfig.KeyShapeRandom:
		m.Key = randomBytes(rng, s.cfg.KeySize)
	}
	size := int(s.cfg.PayloadSize)
	switch s.cfg.PayloadShape {
	case randomsourceconfig.PayloadShapeText:
		m.Payload = appendLetters(make([]byte, 0, size), rng, size)
	case randomsourceconfig.PayloadShapeBytes:
		m.Payload = randomBytes(rng, size)
	default:
		p := make([]byte, 0, size+16)
		p = append(p, `{"seq":`...)
		p = strconv.AppendInt(p, seq, 10)
		p = append(p, `,"ts":"`...)
		p = append(p, tsText...)
		p = append(p, `","filler":"`...)
		fill := size - len(p) - 2
		if fill < 0 {
			fill = 0
		}
		p = appendLetters(p, rng, fill)
		p = append(p, `"}`...)
		m.Payload = p
	}
	return m
}

func randomBytes(rng *rand.PCG, n int) []byte {
	b := make([]byte, n)
	for i := 0; i < n; i += 8 {
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], rng.Uint64())
		copy(b[i:], w[:])
	}
	return b
}

// appendLetters appends n random letters, ten per random word.
func appendLetters(b []byte, rng *rand.PCG, n int) []byte {
	b = slices.Grow(b, n)
	out := b[len(b) : len(b)+n]
	for i := 0; i < n; i += 10 {
		w := rng.Uint64()
		for j := i; j < i+10 && j < n; j++ {
			out[j] = letters[w&63]
			w >>= 6
		}
	}
	return b[:len(b)+n]
}
