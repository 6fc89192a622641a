package postgressource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// Snapshots on demand (CDC, stream reader): a table of tables is read
// again, online, by the incremental snapshot (incremental.go) while the
// stream goes on. Three ways in, one road:
//
//   - POST /sources/KEY/snapshot (sdk.Snapshotter, Source.Snapshot) and
//     pico-connectors admin KEY snapshot TABLE... write a signal into the
//     WAL, pg_logical_emit_message(true, 'picomq_signal', ...) naming this
//     source's slot;
//   - a row inserted into signal_table, Debezium's execute-snapshot signal.
//
// The stream reads the signal in commit order: the tables get a fresh
// entry in the state's "incremental" map, whose chunks then run as for a
// table added to tables. The signal is durable from its commit: until a
// batch whose state holds the request is saved, the source confirms no
// WAL past it (a crash reads the signal again).

const signalPrefix = "picomq_signal"

// signalBody is the content of a picomq_signal message.
type signalBody struct {
	Slot string       `json:"slot"`
	Type string       `json:"type"`
	Data snapshotData `json:"data"`
}

// snapshotData is Debezium's execute-snapshot data.
type snapshotData struct {
	Collections []string `json:"data-collections"`
	Type        string   `json:"type,omitempty"`
}

// emitSnapshotSignal writes the signal that asks the source of slot for
// a snapshot of tables.
func emitSnapshotSignal(ctx context.Context, conn *pgconn.PgConn, slot string, tables []string) error {
	body, _ := json.Marshal(signalBody{Slot: slot, Type: "execute-snapshot", Data: snapshotData{Collections: tables, Type: "incremental"}})
	res := conn.ExecParams(ctx, `SELECT pg_logical_emit_message(true, '`+signalPrefix+`', $1)`, [][]byte{body}, nil, nil, nil).Read()
	if res.Err != nil {
		return fmt.Errorf("writing the snapshot signal: %w", res.Err)
	}
	return nil
}

// snapshotsOffered says why the configuration takes no snapshots on
// demand, or nil.
func snapshotsOffered(cfg postgressourceconfig.Config) error {
	if cfg.Mode != postgressourceconfig.ModeCDC || cfg.CDCReader != postgressourceconfig.CDCReaderStream {
		return errors.New(`snapshots on demand need mode = "cdc" with cdc_reader = "stream" (they read between watermarks in the stream)`)
	}
	return nil
}

// checkSnapshotNames returns the tables named, as schema.table, or an
// error naming one that is not one of tables (nor matched by a pattern of
// it: captured says which are).
func checkSnapshotNames(names []string, captured func(tableName) bool) ([]string, error) {
	var out []string
	for _, n := range names {
		t, err := parseTable(n)
		if err != nil {
			return nil, fmt.Errorf("table %q: %v", n, err)
		}
		if !captured(t) {
			return nil, fmt.Errorf("table %s is not one of tables (nor matched by a pattern of it): only captured tables can be snapshotted", t)
		}
		if !slices.Contains(out, t.String()) {
			out = append(out, t.String())
		}
	}
	return out, nil
}

// Snapshot asks for snapshots of tables (sdk.Snapshotter): it checks
// that each is captured and has a primary key, then writes the signal on
// a connection of its own. The stream picks it up.
func (s *Source) Snapshot(ctx context.Context, names []string) error {
	if err := snapshotsOffered(s.cfg); err != nil {
		return err
	}
	// Poll holds the lock while it reads (or reconnects): wait for it as
	// long as the caller does.
	locked := make(chan struct{})
	go func() { s.mu.Lock(); close(locked) }()
	select {
	case <-locked:
	case <-ctx.Done():
		go func() { <-locked; s.mu.Unlock() }()
		return fmt.Errorf("the source is busy (connecting or reading); try again: %w", ctx.Err())
	}
	tables, err := checkSnapshotNames(names, func(t tableName) bool { return s.inSet[t.String()] })
	if err == nil {
		for _, t := range tables {
			if info := s.info[t]; info == nil || len(info.pk) == 0 {
				err = fmt.Errorf("table %s has no primary key: the incremental snapshot reads in primary-key chunks", t)
				break
			}
		}
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	conn, err := pgconn.ConnectConfig(ctx, s.pgcfg)
	if err != nil {
		return fmt.Errorf("connecting to postgres: %w", err)
	}
	defer conn.Close(context.Background())
	// Queued before the signal is written: the stream may read it (and
	// clear the request) before emitSnapshotSignal returns.
	s.setAsked(tables, true)
	if err := emitSnapshotSignal(ctx, conn, s.cfg.ReplicationSlot, tables); err != nil {
		s.setAsked(tables, false)
		return err
	}
	s.publishProgress()
	return nil
}

// signalMessage handles a picomq_signal message from the stream.
func (s *Source) signalMessage(d *decoder, m *pglogrepl.LogicalDecodingMessage) {
	if m.Prefix != signalPrefix || d.skip {
		return
	}
	var b signalBody
	if err := json.Unmarshal(m.Content, &b); err != nil || b.Slot != s.cfg.ReplicationSlot {
		return // another source's, or not a signal
	}
	s.signal(b.Type, b.Data, "api or admin command")
}

// signalRow handles a row inserted into signal_table.
func (s *Source) signalRow(d *decoder, rel *relation, row *tuple) {
	if d.skip {
		return
	}
	var typ, data string
	for i, c := range rel.cols {
		if i >= len(row.cols) || row.cols[i].kind != 't' {
			continue
		}
		switch c.name {
		case "type":
			typ = string(row.cols[i].data)
		case "data":
			data = string(row.cols[i].data)
		}
	}
	var sd snapshotData
	if typ == "execute-snapshot" {
		if err := json.Unmarshal([]byte(data), &sd); err != nil {
			s.log.Warn("signal_table: an execute-snapshot signal whose data is not {\"data-collections\": [...], \"type\": \"incremental\"}; ignored", "error", err)
			return
		}
	}
	s.signal(typ, sd, "signal_table")
}

// signal applies a signal: an execute-snapshot of captured tables queues
// their incremental snapshot, from the first row.
func (s *Source) signal(typ string, data snapshotData, from string) {
	if typ != "execute-snapshot" {
		s.log.Warn("a signal other than execute-snapshot; ignored", "type", typ, "from", from)
		return
	}
	if t := strings.ToLower(data.Type); t != "" && t != "incremental" {
		s.log.Warn("an execute-snapshot signal of a type other than incremental; ignored (only incremental snapshots are supported)", "type", data.Type, "from", from)
		return
	}
	if err := snapshotsOffered(s.cfg); err != nil {
		s.log.Warn("an execute-snapshot signal; ignored: "+err.Error(), "from", from)
		return
	}
	var names []string
	for _, n := range data.Collections {
		if isPattern(n) {
			if p, err := parsePattern(n); err == nil {
				for _, t := range s.tables {
					if p.match(t) {
						names = append(names, t.String())
					}
				}
			}
			continue
		}
		t, err := parseTable(n)
		if err != nil || !s.inSet[t.String()] {
			s.log.Warn("an execute-snapshot signal names a table that is not captured; left out", "table", n, "from", from)
			continue
		}
		names = append(names, t.String())
	}
	st := s.committed
	for _, name := range names {
		if st.Incr == nil {
			st.Incr = map[string]*snapTable{}
		}
		st.Incr[name] = &snapTable{}
		if s.chunk != nil && s.chunk.table.String() == name {
			s.chunk = nil // read again from the first row
		}
		s.unsaved = true
		s.log.Info("snapshot on demand: the table is read again while changes stream", "table", name, "from", from)
	}
	s.setAsked(names, false)
}

// setAsked records tables as asked for through Snapshot and not yet read
// from the stream (on), or no longer (off).
func (s *Source) setAsked(tables []string, on bool) {
	s.progMu.Lock()
	defer s.progMu.Unlock()
	for _, t := range tables {
		if on {
			s.asked[t] = true
		} else {
			delete(s.asked, t)
		}
	}
}

// isSignalTable reports whether t is signal_table.
func (s *Source) isSignalTable(t tableName) bool {
	return s.signalTable != nil && *s.signalTable == t
}

// publishProgress records the snapshots' progress for SnapshotProgress
// and the metrics: the tables asked for and not yet seen in the stream,
// then the state's incremental snapshots.
func (s *Source) publishProgress() {
	var out []sdk.SnapshotProgress
	running := ""
	if t, ok := s.incrNext(); ok {
		running = t.String()
	}
	s.progMu.Lock()
	defer s.progMu.Unlock()
	var incr map[string]*snapTable
	if s.committed != nil {
		incr = s.committed.Incr
	}
	names := make([]string, 0, len(incr)+len(s.asked))
	for name := range incr {
		names = append(names, name)
	}
	for name := range s.asked {
		if incr[name] == nil {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		p := sdk.SnapshotProgress{Name: name, State: sdk.SnapshotQueued}
		// A table asked for again shows queued until the stream reads
		// the request.
		if tp := incr[name]; tp != nil && !(tp.Done && s.asked[name]) {
			p.Chunks, p.Rows = tp.Chunks, tp.Rows
			switch {
			case tp.Done:
				p.State = sdk.SnapshotDone
			case name == running:
				p.State = sdk.SnapshotRunning
			}
		}
		out = append(out, p)
	}
	pending := 0
	for _, p := range out {
		if p.State != sdk.SnapshotDone {
			pending++
		}
	}
	s.progress = out
	s.snapPending.Set(float64(pending))
}

// SnapshotProgress returns the snapshots on demand and of added tables
// (sdk.Snapshotter), as last recorded.
func (s *Source) SnapshotProgress() []sdk.SnapshotProgress {
	s.progMu.Lock()
	defer s.progMu.Unlock()
	return slices.Clone(s.progress)
}

// countSnapshot adds what the acknowledged state cand delivered beyond
// committed to the snapshot metrics.
func (s *Source) countSnapshot(cand *state) {
	for name, tp := range cand.Incr {
		old := s.committed.Incr[name]
		var chunks, rows int64
		if old != nil {
			chunks, rows = old.Chunks, old.Rows
		}
		if tp.Chunks > chunks {
			s.snapChunks.Add(float64(tp.Chunks - chunks))
			s.snapRows.Add(float64(tp.Rows - rows))
		}
	}
}
