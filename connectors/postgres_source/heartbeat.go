package postgressource

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
)

// The heartbeat (CDC, heartbeat_interval > 0) runs at the start of a Poll
// once per interval, in the Poll goroutine, so it never races the readers:
//
//  1. heartbeat_query, when set, runs on the source's connection (like
//     Debezium's heartbeat.action.query). An UPDATE of a small table writes
//     WAL in this database, so the position the readers confirm moves even
//     when nothing else writes here. A failing query is logged and reported
//     by Health until a heartbeat succeeds; reading goes on.
//  2. The stream reader asks the server for a keepalive (a standby status
//     update with the reply flag). The server answers with the position it
//     has decoded up to; everything before it was sent, so when the reader
//     is idle with nothing unacknowledged the reader's own quiet path
//     confirms it after the empty batch (never past a batch in flight, and
//     never past WAL the server has not flushed, which it does not decode).
//     Without it the server sends keepalives only when it catches up or
//     every wal_sender_timeout/2, so under a heavy write load on other
//     tables a quiet slot would move only every 30 s.
//
// The peek reader needs no request: each empty peek already moves the slot
// to the position read before it, after the empty batch is acknowledged.

// heartbeat runs the heartbeat when one is due.
func (s *Source) heartbeat(ctx context.Context) {
	if s.cfg.Mode != "cdc" || s.cfg.HeartbeatInterval <= 0 || s.conn == nil {
		return
	}
	w := &s.slots
	if !w.lastBeat.IsZero() && time.Since(w.lastBeat) < s.cfg.HeartbeatInterval {
		return
	}
	w.lastBeat = time.Now()
	// While a peek result is read across polls (a split transaction) the
	// connection is busy: the query waits for the next heartbeat.
	if q := s.cfg.HeartbeatQuery; q != "" && !s.snapTx && s.cursor == nil {
		err := s.exec(ctx, q)
		w.mu.Lock()
		if err != nil {
			w.beatErr = fmt.Errorf("heartbeat_query failed: %v; it runs every heartbeat_interval on the source's connection: fix it or leave heartbeat_query empty", err)
			s.log.Warn("heartbeat_query failed", "error", err)
		} else {
			w.beatErr = nil
		}
		w.mu.Unlock()
	}
	if s.cfg.CDCReader == postgressourceconfig.CDCReaderStream && s.streamConn != nil && s.retry == nil {
		pos := max(s.streamSent, s.slotLSN)
		if pos == 0 {
			return
		}
		err := pglogrepl.SendStandbyStatusUpdate(ctx, s.streamConn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos, ReplyRequested: true})
		if err != nil {
			s.log.Debug("heartbeat: keepalive request failed; the stream reconnects on this poll", "error", err)
		}
	}
}
