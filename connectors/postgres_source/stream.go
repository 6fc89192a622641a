package postgressource

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/picomq/pico-connectors/sdk"
)

// The stream reader (cdc_reader = "stream").
//
// Every peek and every pg_replication_slot_advance re-reads the WAL from
// the slot's restart_lsn, which PostgreSQL moves only at xl_running_xacts
// records (every 15 s of activity or more). Under a sustained write load
// that distance grows to hundreds of megabytes and each peek pays for it.
// The stream reader keeps one replication connection open
// (START_REPLICATION ... LOGICAL with pgoutput), so the server decodes each
// change once. The stage-and-apply contract is the same:
//
//   - Poll reads the stream until batch_size records or until the stream
//     is quiet, and returns the end LSN of the last whole transaction as
//     the candidate. A transaction larger than batch_size is split: the
//     candidate then also names it and how many of its records are
//     delivered, and after a restart those are skipped when the server
//     sends it again.
//   - Ack promotes it and confirms it to the server with a standby status
//     update (the slot's confirmed position follows).
//   - Nack keeps the batch, and the next Poll returns the same records with
//     the same state again.
//   - A restart starts the stream at the committed LSN; transactions at or
//     before it are skipped, as with peek.
//
// A quiet database does not pin WAL: with nothing pending, the server's
// WAL end from its keepalives is confirmed after the empty batch.

// streamLinger is how long a Poll that already has records waits for more
// before returning them.
const streamLinger = 5 * time.Millisecond

func (s *Source) startStream(ctx context.Context) error {
	rc := s.pgcfg.Copy()
	rc.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		return err
	}
	err = pglogrepl.StartReplication(ctx, conn, s.cfg.ReplicationSlot, s.committedLSN, pglogrepl.StartReplicationOptions{
		Mode:       pglogrepl.LogicalReplication,
		PluginArgs: s.incrPluginArgs([]string{"proto_version '1'", "publication_names " + quoteLiteral(quoteIdent(s.cfg.Publication))}),
	})
	if err != nil {
		_ = conn.Close(ctx)
		return s.peekError(err)
	}
	s.streamConn = conn
	s.streamDec = s.newDecoder()
	s.streamSent = 0
	s.streamIdle = 0
	return nil
}

func (s *Source) closeStream() {
	if s.streamConn != nil {
		_ = s.streamConn.Close(context.Background())
		s.streamConn = nil
	}
	s.streamDec = nil
	s.chunk = nil // its watermarks are followed by this stream only
	// A new stream starts at the committed LSN and sends a nacked batch
	// again by itself.
	s.retry, s.retryState = nil, nil
}

// confirm tells the server that everything up to lsn is delivered.
func (s *Source) confirm(lsn pglogrepl.LSN) error {
	if s.streamConn == nil || lsn <= s.streamSent {
		return nil
	}
	if err := pglogrepl.SendStandbyStatusUpdate(context.Background(), s.streamConn, pglogrepl.StandbyStatusUpdate{WALWritePosition: lsn}); err != nil {
		return err
	}
	s.streamSent = lsn
	if lsn > s.slotLSN {
		s.slotLSN = lsn
	}
	return nil
}

// pollStream returns the next batch from the replication stream.
func (s *Source) pollStream(ctx context.Context) (sdk.Batch, error) {
	if s.streamConn != nil && s.streamConn.IsClosed() {
		s.closeStream()
	}
	if s.streamConn != nil && !s.streamMsgs && !s.streamDec.inTxn && len(s.streamDec.msgs) == 0 {
		if _, due := s.incrNext(); due {
			// An incremental snapshot became due (a table discovered):
			// its watermarks need a stream that sends messages.
			s.closeStream()
		}
	}
	if s.streamConn == nil {
		if err := s.startStream(ctx); err != nil {
			return sdk.Batch{}, err
		}
	}
	if err := s.confirm(s.pendingAdvance); err != nil {
		return sdk.Batch{}, err
	}
	d := s.streamDec
	if c := s.chunk; c != nil && c.ready && !d.inTxn {
		return s.chunkBatch(d)
	}
	if s.chunk == nil && !d.inTxn && (s.committed.Snapshot == nil || s.committed.Snapshot.Done) {
		if t, ok := s.incrNext(); ok {
			if err := s.startChunk(ctx, t); err != nil {
				return sdk.Batch{}, err
			}
		}
	}
	wait := s.cfg.PollInterval
	if wait <= 0 {
		wait = time.Second
	}
	deadline := time.Now().Add(wait)
	for {
		if len(d.msgs) >= s.cfg.BatchSize {
			break // inside a transaction too: the candidate says where
		}
		if s.chunk != nil && s.chunk.ready && !d.inTxn {
			break // the chunk goes in the next batch
		}
		until := deadline
		switch {
		case d.inTxn && len(d.msgs) > 0:
			// The rest of a transaction arrives at once: wait for it
			// rather than split it on a pause.
			until = time.Now().Add(time.Second)
		case len(d.msgs) > 0:
			until = time.Now().Add(streamLinger)
		}
		rctx, cancel := context.WithDeadline(ctx, until)
		msg, err := s.streamConn.ReceiveMessage(rctx)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return sdk.Batch{}, ctx.Err()
			}
			if pgconn.Timeout(err) && !s.streamConn.IsClosed() {
				break
			}
			return sdk.Batch{}, fmt.Errorf("replication stream: %w", err)
		}
		switch m := msg.(type) {
		case *pgproto3.CopyData:
			if len(m.Data) == 0 {
				continue
			}
			switch m.Data[0] {
			case pglogrepl.PrimaryKeepaliveMessageByteID:
				ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(m.Data[1:])
				if err != nil {
					return sdk.Batch{}, err
				}
				// An unsaved signal (signal.go) keeps its WAL unconfirmed.
				idle := !d.inTxn && len(d.msgs) == 0 && !s.unsaved
				if idle && ka.ServerWALEnd > s.streamIdle {
					s.streamIdle = ka.ServerWALEnd
				}
				if ka.ReplyRequested && idle && ka.ServerWALEnd > s.streamSent {
					// Everything received was delivered and acknowledged,
					// and nothing is pending: confirming the server's
					// position skips only WAL without records. A server
					// shutting down waits for this.
					if err := s.confirm(ka.ServerWALEnd); err != nil {
						return sdk.Batch{}, err
					}
				} else if ka.ReplyRequested {
					// Answer even with nothing new to confirm: without a
					// reply the server ends the stream after
					// wal_sender_timeout (60s), and an idle source would
					// reconnect every minute.
					if err := pglogrepl.SendStandbyStatusUpdate(ctx, s.streamConn, pglogrepl.StandbyStatusUpdate{WALWritePosition: s.streamSent}); err != nil {
						return sdk.Batch{}, err
					}
				}
			case pglogrepl.XLogDataByteID:
				xld, err := pglogrepl.ParseXLogData(m.Data[1:])
				if err != nil {
					return sdk.Batch{}, err
				}
				if xld.ServerWALEnd > s.committedLSN && s.committedLSN > 0 {
					s.lag.Set(float64(xld.ServerWALEnd - s.committedLSN))
				}
				if len(xld.WALData) == 0 {
					continue
				}
				if err := d.handle(xld.WALStart, xld.WALData); err != nil {
					return sdk.Batch{}, err
				}
			}
		case *pgproto3.ErrorResponse:
			return sdk.Batch{}, s.peekError(pgconn.ErrorResponseToPgError(m))
		case *pgproto3.CopyDone:
			return sdk.Batch{}, errors.New("replication stream ended by the server")
		}
	}
	if len(d.msgs) == 0 && s.chunk != nil && s.chunk.ready && !d.inTxn {
		return s.chunkBatch(d)
	}
	if len(d.msgs) == 0 {
		if !d.inTxn {
			s.lag.Set(0) // caught up
		}
		if s.unsaved {
			if _, due := s.incrNext(); due {
				// A signal in no saved state yet: confirm nothing past it.
				return sdk.Batch{}, nil
			}
			s.unsaved = false // done, and nothing to deliver
		}
		// Nothing pending: what the server has sent so far can be
		// confirmed once this empty batch is resolved.
		if !d.inTxn && max(d.lastEnd, s.streamIdle) > s.streamSent {
			s.quietLSN = max(d.lastEnd, s.streamIdle)
		}
		return sdk.Batch{}, nil
	}
	s.streamIdle = 0
	return s.cdcBatch(d)
}
