package postgressource

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// pollCDC runs the snapshot while one is due, then reads the slot.
func (s *Source) pollCDC(ctx context.Context) (sdk.Batch, error) {
	if s.retry != nil {
		// Nacked: the same records and state again.
		b := *s.retry
		s.candidate, s.candidateLSN = s.retryState, s.retryLSN
		return b, nil
	}
	if s.pendingAdvance > s.slotLSN && s.cursor == nil {
		if err := s.moveSlot(ctx); err != nil {
			return sdk.Batch{}, err
		}
	}
	if snap := s.committed.Snapshot; snap != nil {
		if snap.Done && s.snapTx {
			if err := s.exec(ctx, "COMMIT"); err != nil {
				return sdk.Batch{}, err
			}
			s.snapTx = false
		}
		if !snap.Done {
			if !s.snapTx {
				if err := s.beginSnapshot(ctx, ""); err != nil {
					return sdk.Batch{}, err
				}
			}
			b, err := s.pollSnapshot(ctx)
			if err != nil || len(b.Messages) > 0 {
				return b, err
			}
		}
	}
	if s.cfg.CDCReader == postgressourceconfig.CDCReaderStream {
		b, err := s.pollStream(ctx)
		if err == nil && len(b.Messages) == 0 && ctx.Err() == nil {
			err = s.checkTables(ctx)
		}
		return b, err
	}
	for {
		b, more, err := s.peek(ctx)
		if err != nil || len(b.Messages) > 0 {
			return b, err
		}
		if !more {
			if err := s.checkTables(ctx); err != nil {
				return sdk.Batch{}, err
			}
			s.sleep(ctx)
			return sdk.Batch{}, ctx.Err()
		}
		// A full peek with nothing for us: skip past it and look again.
		if s.quietLSN > s.pendingAdvance {
			s.pendingAdvance = s.quietLSN
		}
		s.quietLSN = 0
		if err := s.advance(ctx); err != nil {
			return sdk.Batch{}, err
		}
		if ctx.Err() != nil {
			return sdk.Batch{}, ctx.Err()
		}
	}
}

// peekCursor is a peek result being read: a poll takes at most
// batch_size records from it and leaves the rest for the next poll, so a
// transaction larger than batch_size comes back in pieces.
type peekCursor struct {
	rr     *pgconn.ResultReader
	cancel context.CancelFunc // ends the query (and the connection)
	d      *decoder
	n      int           // rows read
	flush  pglogrepl.LSN // WAL flush position read before the peek
}

func (s *Source) closeCursor() {
	if s.cursor != nil {
		s.cursor.cancel()
		s.cursor = nil
	}
	s.retry, s.retryState = nil, nil
}

// peek returns up to batch_size records of the slot's changes, reading a
// peek of at least batch_size changes (PostgreSQL returns whole
// transactions) across as many polls as it takes. more says the peek was
// full and has been read to its end, so there may be more WAL.
func (s *Source) peek(ctx context.Context) (sdk.Batch, bool, error) {
	limit := s.cfg.BatchSize
	cur := s.cursor
	if cur == nil {
		// The flush position, not the write position: logical decoding
		// returns only flushed WAL, so a commit written but not yet
		// flushed (synchronous_commit = off) lies between the two, and an
		// empty peek that moved the slot to the write position would skip
		// it unread.
		rows, err := s.query(ctx, `SELECT pg_current_wal_flush_lsn()::text`)
		if err != nil {
			return sdk.Batch{}, false, err
		}
		flush, _ := pglogrepl.ParseLSN(string(rows[0][0]))
		if flush > s.committedLSN && s.committedLSN > 0 {
			s.lag.Set(float64(flush - s.committedLSN))
		}
		// The result outlives this poll: its context is the cursor's.
		qctx, cancel := context.WithCancel(context.Background())
		rr := s.conn.ExecParams(qctx,
			`SELECT lsn, data FROM pg_logical_slot_peek_binary_changes($1, NULL, $2, 'proto_version', '1', 'publication_names', $3)`,
			[][]byte{[]byte(s.cfg.ReplicationSlot), []byte(strconv.Itoa(limit)), []byte(quoteIdent(s.cfg.Publication))},
			nil, nil, []int16{1, 1})
		cur = &peekCursor{rr: rr, cancel: cancel, d: s.newDecoder(), flush: flush}
		s.cursor = cur
	}
	stop := context.AfterFunc(ctx, cur.cancel)
	defer stop()
	d := cur.d
	done := false
	for len(d.msgs) < s.cfg.BatchSize {
		if !cur.rr.NextRow() {
			done = true
			break
		}
		cur.n++
		vals := cur.rr.Values()
		if len(vals) != 2 || len(vals[0]) != 8 {
			continue
		}
		lsn := pglogrepl.LSN(binary.BigEndian.Uint64(vals[0]))
		if err := d.handle(lsn, vals[1]); err != nil {
			return sdk.Batch{}, false, err
		}
	}
	more := false
	if done {
		s.cursor = nil
		_, err := cur.rr.Close()
		cur.cancel()
		if err != nil {
			return sdk.Batch{}, false, s.peekError(err)
		}
		more = cur.n >= limit
	}
	if len(d.msgs) > 0 {
		b, err := s.cdcBatch(d)
		return b, more, err
	}
	// Nothing for us: everything up to what was read is safe to skip.
	target := d.lastEnd
	if !more && cur.flush > target {
		target = cur.flush
	}
	if !more {
		s.lag.Set(0) // caught up
	}
	if target > s.slotLSN {
		s.quietLSN = target
	}
	return sdk.Batch{}, more, nil
}

// cdcBatch returns the decoder's records with their candidate state: the
// end of the last whole transaction, and when the batch ends inside a
// transaction, that transaction and how many of its records are
// delivered. The batch is kept for a Nack.
func (s *Source) cdcBatch(d *decoder) (sdk.Batch, error) {
	cand := max(d.lastEnd, s.committedLSN)
	st := s.committed.clone()
	if cand > 0 {
		st.LSN = cand.String()
	}
	st.TxLSN, st.TxRows = "", 0
	if d.inTxn && !d.skip && d.txSeen > 0 {
		st.TxLSN, st.TxRows = d.txFinal.String(), d.txSeen
	}
	s.candidateLSN = cand
	b, err := s.batch(d.msgs, st)
	d.msgs = nil
	if err == nil {
		s.retry, s.retryState, s.retryLSN = &b, s.candidate, cand
	}
	return b, err
}

// peekError turns the errors of the slot functions into clear ones.
func (s *Source) peekError(err error) error {
	switch pgErrorCode(err) {
	case "42704":
		return permanent("replication slot %q does not exist any more (dropped while this source was running); changes since LSN %s cannot be recovered from it. Delete this source's checkpoint to start over", s.cfg.ReplicationSlot, s.committedLSN)
	case "55006":
		return errTransient{fmt.Errorf("replication slot %q is in use by another process: %v", s.cfg.ReplicationSlot, err)}
	case "42501":
		return permanent("reading replication slot %q: %v", s.cfg.ReplicationSlot, err)
	case "42P01":
		return fmt.Errorf("publication %q is missing or names a dropped table: %w", s.cfg.Publication, err)
	}
	return err
}

// advance moves the slot to pendingAdvance.
func (s *Source) advance(ctx context.Context) error {
	if s.pendingAdvance <= s.slotLSN {
		return nil
	}
	rows, err := s.query(ctx, `SELECT end_lsn::text FROM pg_replication_slot_advance($1, $2::pg_lsn)`, s.cfg.ReplicationSlot, s.pendingAdvance.String())
	if err != nil {
		return s.peekError(err)
	}
	if pos, err := pglogrepl.ParseLSN(string(rows[0][0])); err == nil && pos > s.slotLSN {
		s.slotLSN = pos
	}
	if s.slotLSN < s.pendingAdvance {
		// Clamped to the flushed WAL: remember the rest for later.
		return nil
	}
	return nil
}

// moveSlot moves the slot to pendingAdvance: pg_replication_slot_advance
// for the peek reader, a standby status update for the stream reader
// (whose open stream holds the slot).
func (s *Source) moveSlot(ctx context.Context) error {
	if s.cfg.CDCReader == postgressourceconfig.CDCReaderStream {
		if s.streamConn == nil {
			return nil // confirmed when the stream starts again
		}
		return s.confirm(s.pendingAdvance)
	}
	return s.advance(ctx)
}
