package postgressource

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// Incremental snapshot of a table added to tables after the first start
// (snapshot = "initial", stream reader), in the manner of DBLog: the stream
// keeps running, and the table's existing rows are read in primary-key
// chunks of at most batch_size rows, each between two watermarks written
// into the WAL (pg_logical_emit_message, transactional, so the commit
// flushes them):
//
//  1. write the low watermark;
//  2. SELECT the next chunk after the last key read;
//  3. write the high watermark.
//
// While the stream is between the two watermarks, a change of a row of the
// chunk removes that row from the chunk: the stream's version is newer than
// or the same as the SELECT's. At the high watermark the rest of the chunk
// is delivered as __op = "read" records, in its own batch, whose state
// records the chunk's last key. A crash before that state is saved reads the
// chunk again with new watermarks (the old ones are ignored), so the
// snapshot is resumable and at least once; a row is never delivered older
// than a change the stream delivered before it.

const watermarkPrefix = "picomq_watermark"

// incrChunk is the chunk being read between its watermarks.
type incrChunk struct {
	id      string
	table   tableName
	low     bool // the low watermark was seen in the stream
	ready   bool // the high watermark was seen
	keys    []string
	rows    map[string]sdk.Message
	last    []string // primary key of the chunk's last row
	partial bool     // fewer rows than batch_size: the table is done
}

// setupIncremental finds the tables added since the last checkpoint (to
// tables, or matched by a pattern of it) and records what is known.
// connect calls it once the tables are known, on every connect.
func (s *Source) setupIncremental() {
	st := s.committed
	if s.cfg.Mode != "cdc" {
		return
	}
	if s.fromState && st.Known != nil {
		for _, t := range s.tables {
			if name := t.String(); !slices.Contains(st.Known, name) {
				s.queueIncremental(name)
			}
		}
	}
	s.fromState = true // a reconnect compares with what is known now
	st.Known = st.Known[:0:0]
	for _, t := range s.tables {
		st.Known = append(st.Known, t.String())
	}
}

// queueIncremental asks for the incremental snapshot of a table added to
// tables, or discovered, since the checkpoint: with snapshot = "initial"
// and the stream reader.
func (s *Source) queueIncremental(name string) {
	st := s.committed
	if s.cfg.Snapshot != "initial" || st.Incr[name] != nil {
		return
	}
	if s.cfg.CDCReader != postgressourceconfig.CDCReaderStream {
		s.log.Warn("a table added to tables is snapshotted only with cdc_reader = \"stream\"; its changes are captured from now on, its existing rows are not read", "table", name)
		return
	}
	if st.Incr == nil {
		st.Incr = map[string]*snapTable{}
	}
	st.Incr[name] = &snapTable{}
	s.log.Info("table added to tables: its existing rows are read by an incremental snapshot while changes stream", "table", name)
}

// incrNext is the next table whose incremental snapshot is unfinished.
func (s *Source) incrNext() (tableName, bool) {
	for _, t := range s.tables {
		if tp := s.committed.Incr[t.String()]; tp != nil && !tp.Done {
			return t, true
		}
	}
	return tableName{}, false
}

// startChunk writes the low watermark, reads the next chunk of the table
// and writes the high watermark.
func (s *Source) startChunk(ctx context.Context, t tableName) error {
	info := s.info[t.String()]
	tp := s.committed.Incr[t.String()]
	if info == nil || len(info.pk) == 0 {
		s.log.Warn("a table without a primary key cannot be snapshotted incrementally; its changes are captured, its existing rows are not read", "table", t)
		tp.Done = true
		return nil
	}
	id := s.cfg.ReplicationSlot + ":" + strconv.FormatInt(time.Now().UnixNano(), 36)
	if err := s.exec(ctx, "SELECT pg_logical_emit_message(true, '"+watermarkPrefix+"', '"+id+":low')"); err != nil {
		return fmt.Errorf("incremental snapshot of %s: writing the low watermark: %w", t, err)
	}
	cols := quoteList(info.pk)
	sql := "SELECT * FROM " + t.quoted()
	var params [][]byte
	if len(tp.After) == len(info.pk) {
		sql += " WHERE (" + cols + ") > (" + placeholders(1, len(info.pk)) + ")"
		for _, v := range tp.After {
			params = append(params, []byte(v))
		}
	}
	sql += " ORDER BY " + cols + " LIMIT " + strconv.Itoa(s.cfg.BatchSize)
	res := s.conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("incremental snapshot of %s: %w", t, res.Err)
	}
	rel := s.relationFromFields(t, res.FieldDescriptions, info.pk)
	c := &incrChunk{id: id, table: t, rows: make(map[string]sdk.Message, len(res.Rows)), partial: len(res.Rows) < s.cfg.BatchSize}
	for _, row := range res.Rows {
		m := s.rowMessage(rel, row, -1, opRead, -1, rowIncremental)
		k := string(s.enc.appendRowKey(nil, rel, row, rel.keyIdx)) // by primary key, whatever the record key
		c.keys = append(c.keys, k)
		c.rows[k] = m
	}
	if n := len(res.Rows); n > 0 {
		for _, i := range rel.keyIdx {
			c.last = append(c.last, string(res.Rows[n-1][i]))
		}
	}
	if err := s.exec(ctx, "SELECT pg_logical_emit_message(true, '"+watermarkPrefix+"', '"+id+":high')"); err != nil {
		return fmt.Errorf("incremental snapshot of %s: writing the high watermark: %w", t, err)
	}
	s.chunk = c
	return nil
}

// watermark handles a logical decoding message from the stream.
func (s *Source) watermark(m *pglogrepl.LogicalDecodingMessage) {
	c := s.chunk
	if c == nil || m.Prefix != watermarkPrefix {
		return
	}
	switch string(m.Content) {
	case c.id + ":low":
		c.low = true
	case c.id + ":high":
		if c.low {
			c.ready = true
		}
	}
}

// chunkSaw drops a row of the open chunk that the stream changed between
// the watermarks. key is the record key (JSON); "" with truncate drops all.
func (s *Source) chunkSaw(rel *relation, key []byte, truncate bool) {
	c := s.chunk
	if c == nil || !c.low || c.ready || rel.table != c.table.String() {
		return
	}
	if truncate {
		clear(c.rows)
		return
	}
	delete(c.rows, string(key))
}

// chunkBatch delivers what is left of a chunk whose high watermark was
// seen, with the chunk's last key in the state.
func (s *Source) chunkBatch(d *decoder) (sdk.Batch, error) {
	c := s.chunk
	s.chunk = nil
	var msgs []sdk.Message
	for _, k := range c.keys {
		if m, ok := c.rows[k]; ok {
			msgs = append(msgs, m)
		}
	}
	st := s.committed.clone()
	tp := st.Incr[c.table.String()]
	if c.last != nil {
		tp.After = c.last
	}
	tp.Done = c.partial
	if len(msgs) > 0 {
		tp.Chunks++ // chunks delivered: their batch's Ack counts them
		tp.Rows += int64(len(msgs))
	}
	if tp.Done {
		s.log.Info("incremental snapshot complete", "table", c.table)
	}
	if len(msgs) == 0 {
		// Nothing to deliver: the progress needs no checkpoint of its own
		// (a crash reads the same rows again).
		s.committed = st
		return sdk.Batch{}, nil
	}
	cand := max(d.lastEnd, s.committedLSN)
	if cand > 0 {
		st.LSN = cand.String()
	}
	st.TxLSN, st.TxRows = "", 0
	s.candidateLSN = cand
	b, err := s.batch(msgs, st)
	if err == nil {
		s.retry, s.retryState, s.retryLSN = &b, s.candidate, cand
	}
	return b, err
}

// incrPluginArgs asks pgoutput for logical decoding messages (the
// watermarks) while an incremental snapshot is due.
func (s *Source) incrPluginArgs(args []string) []string {
	_, due := s.incrNext()
	s.streamMsgs = due || s.pg14
	if s.streamMsgs {
		return append(args, "messages 'true'")
	}
	return args
}
