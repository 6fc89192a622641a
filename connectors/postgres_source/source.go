// Package postgressource is the PostgreSQL source: change data capture
// through a logical replication slot (pgoutput), or polling of tables by a
// tracking column.
//
// It is the reference for the stage-and-apply pattern of the sources spec.
// In CDC mode Poll reads the slot (a replication stream, or peeks) without
// consuming it and the batch's state is the end LSN of its last whole
// transaction, plus the position inside a transaction larger than
// batch_size that is split; only Ack moves the slot. In polling mode the
// state is the highest tracking value read per table, with the snapshot
// whose later commits the next poll reads below it (polling.go), and the
// batch's pending keys, and processed_column updates or delete_after_read
// deletes run only on Ack (or, after a crash, at the restart).
package postgressource

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// state is the blob the runtime stores for this source.
type state struct {
	V    int    `json:"v"`
	Mode string `json:"mode"`
	// CDC: the end LSN of the last transaction delivered in full.
	LSN string `json:"lsn,omitempty"`
	// CDC: a transaction larger than batch_size is delivered in pieces.
	// TxLSN is the commit LSN of the one delivered in part (after LSN),
	// TxRows how many of its records are delivered; a restart skips those.
	// Checkpoints written before these fields existed load unchanged.
	TxLSN  string `json:"tx_lsn,omitempty"`
	TxRows int    `json:"tx_rows,omitempty"`
	// CDC: the tables captured so far, and the incremental snapshots of
	// tables added to tables after the first start (see incremental.go).
	Known    []string              `json:"known,omitempty"`
	Incr     map[string]*snapTable `json:"incremental,omitempty"`
	Snapshot *snapState            `json:"snapshot,omitempty"`
	// Polling: progress per table, keyed by schema.table.
	Tables map[string]*pollState `json:"tables,omitempty"`
	// Polling: the processed_column updates or delete_after_read deletes
	// of the batch this state belongs to. A restart runs them first, so a
	// crash between the checkpoint and the Ack's side effect loses none.
	Pending []pendingState `json:"pending,omitempty"`
}

// pendingState is one table's side effect: the keys of its rows, one list
// per primary key column.
type pendingState struct {
	Table string     `json:"table"`
	Keys  [][]string `json:"keys"`
}

type snapState struct {
	Done   bool                  `json:"done"`
	Tables map[string]*snapTable `json:"tables,omitempty"`
}

type snapTable struct {
	Done bool `json:"done,omitempty"`
	// Chunks and Rows count an incremental snapshot's delivered chunks
	// and rows (its progress, signal.go).
	Chunks int64    `json:"chunks,omitempty"`
	Rows   int64    `json:"rows,omitempty"`
	After  []string `json:"after,omitempty"` // last primary key read
	CTID   string   `json:"ctid,omitempty"`  // tables without a key
}

type pollState struct {
	// Value is the last tracking value delivered, in PostgreSQL text form.
	Value *string `json:"value"`
	// PK is the primary key of the last row delivered (keyset tie-break).
	PK []string `json:"pk,omitempty"`

	// The visibility window (polling.go); checkpoints written before it
	// have none of these and resume as a first poll of the window would.
	//
	// Snap is the pg_current_snapshot() every row at or below the cursor
	// that it shows has been delivered; the next window pass reads the
	// rows it does not show.
	Snap string `json:"snap,omitempty"`
	// A window pass larger than batch_size spans polls: PassSnap is the
	// snapshot of the poll it started in (Snap once it ends), PassValue
	// and PassPK the last row it delivered.
	PassSnap  string   `json:"pass_snap,omitempty"`
	PassValue *string  `json:"pass_value,omitempty"`
	PassPK    []string `json:"pass_pk,omitempty"`
	// Marks give the window's lower bound, oldest first.
	Marks []pollMark `json:"marks,omitempty"`
}

// pollMark is one poll's: X is the poll transaction's ID, assigned after
// its snapshot was taken (so a transaction with an ID at or above X got it
// later), V the highest tracking value that snapshot showed (nil: the
// table was empty).
type pollMark struct {
	X string  `json:"x"`
	V *string `json:"v"`
}

func (st *state) clone() *state {
	b, _ := json.Marshal(st)
	var c state
	_ = json.Unmarshal(b, &c)
	return &c
}

// errTransient marks setup errors that may clear up by themselves, such
// as a slot still held by a process that is shutting down.
type errTransient struct{ err error }

func (e errTransient) Error() string { return e.err.Error() }
func (e errTransient) Unwrap() error { return e.err }

func isTransient(err error) bool {
	var t errTransient
	return errors.As(err, &t)
}

// permanent returns an error no retry will fix (configuration,
// privileges, a dropped slot), marked with sdk.Permanent; Poll keeps
// returning it.
func permanent(format string, args ...any) error {
	return sdk.Permanent(fmt.Errorf(format, args...))
}

// Source is the PostgreSQL source.
type Source struct {
	cfg    postgressourceconfig.Config
	log    *slog.Logger
	tables []tableName
	inSet  map[string]bool
	// Patterns of tables (patterns.go), the tables named exactly, and
	// the discovery's bookkeeping.
	patterns    []*tablePattern
	exactTables []tableName
	exact       map[string]bool
	discovered  time.Time
	warned      map[string]bool
	fromState   bool // Open had a checkpoint

	// Snapshots on demand (signal.go): signal_table, whether a signal
	// read from the stream is in no saved state yet (no WAL is confirmed
	// past it until then), and the progress the API shows.
	signalTable *tableName
	unsaved     bool
	candCarries bool // the candidate state holds the unsaved signals
	pg14        bool // the stream can send logical decoding messages
	progMu      sync.Mutex
	asked       map[string]bool // requested, not yet read from the stream
	progress    []sdk.SnapshotProgress
	snapChunks  sdk.Counter
	snapRows    sdk.Counter
	snapPending sdk.Gauge
	ops         map[string]bool
	enc         encoder
	pgcfg       *pgconn.Config
	conn        *pgconn.PgConn
	types       map[uint32]*pgType
	info        map[string]*tableInfo
	rules       map[string]*tableRules // table_settings by schema.table (settings.go)
	// table_settings given by pattern, in their order.
	patternRules []patternRules
	// record_format = "debezium" (debezium.go); nil: flat.
	dbz      *dbzFormat
	catTypes map[uint32]catType // pg_type rows of OIDs 10000 and up

	mu        sync.Mutex
	committed *state
	candidate *state
	// fatal is set by a permanent error; Poll keeps returning it.
	fatal error

	// CDC
	committedLSN   pglogrepl.LSN
	candidateLSN   pglogrepl.LSN
	slotLSN        pglogrepl.LSN // the slot's confirmed position, as last seen
	quietLSN       pglogrepl.LSN // advance target of an empty peek, applied after Ack
	pendingAdvance pglogrepl.LSN
	snapTx         bool   // a snapshot transaction is open on conn
	exportedSnap   string // snapshot exported by the slot we created
	replConn       *pgconn.PgConn
	snapFresh      bool // the open snapshot is not the slot's own

	// The last batch, returned again after a Nack (CDC, both readers, and
	// polling).
	retry      *sdk.Batch
	retryState *state
	retryLSN   pglogrepl.LSN

	// CDC, peek reader: a peek result read across polls, so a transaction
	// larger than batch_size is split; s.conn is busy while it is open.
	cursor *peekCursor

	// CDC, stream reader
	chunk      *incrChunk // incremental snapshot chunk between its watermarks
	streamConn *pgconn.PgConn
	streamDec  *decoder      // lives as long as the stream
	streamSent pglogrepl.LSN // last position confirmed to the server
	streamIdle pglogrepl.LSN // server WAL end seen with nothing pending
	streamMsgs bool          // the stream was asked for logical decoding messages

	// Polling
	pendingApply []applyOp // side effects of the candidate batch
	retryApply   []applyOp // those of the batch in s.retry
	applyQueue   []applyOp // acknowledged side effects not yet applied
	nextTable    int
	plans        map[string]*pollTable
	visible      bool // some table is read with the visibility window

	arena arena
	// lag is how far the committed position trails the server's WAL
	// (CDC), in bytes.
	lag     sdk.Gauge
	metrics sdk.Metrics

	slots slotWatch // slots.go, heartbeat.go
}

// newSource builds a source from a Config with its slot and publication
// names set. It checks the schema's rules (Validate: a Config built in code
// gets the checks Load made) and what the schema cannot state, and connects
// to nothing until Open.
func newSource(opt postgressourceconfig.Config, env sdk.Env) (*Source, error) {
	if err := opt.Validate(); err != nil {
		return nil, err
	}
	if err := check(opt); err != nil {
		return nil, err
	}
	s := &Source{cfg: opt, log: env.Logger, metrics: env.Metrics, inSet: map[string]bool{}, ops: map[string]bool{}, info: map[string]*tableInfo{}}
	s.asked = map[string]bool{}
	s.snapChunks = env.Metrics.Counter("postgres_source_snapshot_chunks_total", "CDC: incremental snapshot chunks delivered (tables added or discovered, snapshots on demand).")
	s.snapRows = env.Metrics.Counter("postgres_source_snapshot_rows_total", "CDC: rows delivered by incremental snapshots.")
	s.snapPending = env.Metrics.Gauge("postgres_source_snapshot_tables_pending", "CDC: tables whose incremental snapshot is queued or running.")
	if opt.SignalTable != "" {
		t, _ := parseTable(opt.SignalTable)
		s.signalTable = &t
	}
	s.lag = env.Metrics.Gauge("postgres_source_lag_bytes", "CDC: bytes of WAL between the server's current position and the last delivered change.")
	s.enc.numericAsString = opt.NumericFormat == postgressourceconfig.NumericFormatString
	if opt.RecordFormat == postgressourceconfig.RecordFormatDebezium {
		name := opt.LogicalName
		if name == "" {
			name = env.Key
		}
		s.dbz = newDbzFormat(name)
	}
	s.exact = map[string]bool{}
	for _, t := range opt.Tables {
		tn, p, _ := parseTableEntry(t)
		if p != nil {
			s.patterns = append(s.patterns, p)
		} else if !s.exact[tn.String()] {
			s.exactTables = append(s.exactTables, tn)
			s.exact[tn.String()] = true
		}
	}
	s.resetTables()
	for _, op := range opt.CaptureOperations {
		s.ops[op] = true
	}
	s.rules = map[string]*tableRules{}
	for i, ts := range opt.TableSettings {
		tn, p, _ := parseTableEntry(ts.Table)
		if p != nil {
			s.patternRules = append(s.patternRules, patternRules{p, newTableRules(i, ts)})
		} else {
			s.rules[tn.String()] = newTableRules(i, ts)
		}
	}
	cfg, err := parseConnString(opt)
	if err != nil {
		return nil, fmt.Errorf("connection_string: %w", err)
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// Fixed session settings make the text form of values predictable.
	cfg.RuntimeParams["TimeZone"] = "UTC"
	cfg.RuntimeParams["DateStyle"] = "ISO, YMD"
	cfg.RuntimeParams["IntervalStyle"] = "iso_8601"
	cfg.RuntimeParams["bytea_output"] = "hex"
	cfg.RuntimeParams["extra_float_digits"] = "3"
	cfg.RuntimeParams["client_encoding"] = "UTF8"
	if cfg.RuntimeParams["application_name"] == "" {
		cfg.RuntimeParams["application_name"] = "pico-connectors"
	}
	if cfg.ConnectTimeout == 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	s.pgcfg = cfg
	return s, nil
}

// Open loads the committed state blob (nil on the first start), then
// connects and checks the database (wal_level, privileges, slot,
// publication, tables). Configuration, permission and state problems are
// errors; a database that cannot be reached yet is not (Poll retries).
func (s *Source) Open(ctx context.Context, blob []byte) error {
	opt := s.cfg
	s.committed = &state{V: 1, Mode: string(opt.Mode)}
	if len(blob) > 0 {
		var st state
		if err := json.Unmarshal(blob, &st); err != nil {
			return fmt.Errorf("state: the stored checkpoint is not this source's (%v); delete it to start over", err)
		}
		if st.Mode != string(opt.Mode) {
			return fmt.Errorf("state: the stored checkpoint was written in %s mode but mode is %s; delete the checkpoint to start over", st.Mode, opt.Mode)
		}
		s.committed = &st
	}
	if s.committed.LSN != "" {
		lsn, err := pglogrepl.ParseLSN(s.committed.LSN)
		if err != nil {
			return fmt.Errorf("state: bad LSN %q in the stored checkpoint", s.committed.LSN)
		}
		s.committedLSN = lsn
	}
	if s.committed.TxLSN != "" {
		if _, err := pglogrepl.ParseLSN(s.committed.TxLSN); err != nil || s.committed.TxRows < 0 {
			return fmt.Errorf("state: bad tx_lsn %q or tx_rows %d in the stored checkpoint; delete it to start over", s.committed.TxLSN, s.committed.TxRows)
		}
	}
	if opt.Mode == "cdc" && opt.Snapshot == "initial" && len(blob) == 0 {
		s.committed.Snapshot = &snapState{Tables: map[string]*snapTable{}}
	}
	s.fromState = len(blob) > 0

	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if err := s.connect(ctx); err != nil {
		if sdk.IsPermanent(err) {
			s.close()
			return err
		}
		s.log.Warn("postgres setup failed; retrying on poll", "error", err)
	}
	s.startSlotWatch(s.metrics) // slots.go
	return nil
}

// isConnError reports whether err means the connection is gone.
func isConnError(err error) bool {
	if err == nil {
		return false
	}
	var ne net.Error
	var ce *pgconn.ConnectError
	if errors.As(err, &ne) || errors.As(err, &ce) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || pgconn.SafeToRetry(err) {
		return true
	}
	if code := pgErrorCode(err); len(code) >= 2 && (code[:2] == "08" || code[:2] == "57") {
		// connection exception, operator intervention (shutdown)
		return true
	}
	return strings.Contains(err.Error(), "conn closed") || strings.Contains(err.Error(), "connection reset")
}

// connect opens the connection and runs the mode's checks and setup.
func (s *Source) connect(ctx context.Context) error {
	conn, err := pgconn.ConnectConfig(ctx, s.pgcfg)
	if err != nil {
		if code := pgErrorCode(err); code == "28000" || code == "28P01" || code == "3D000" {
			return permanent("connection_string: %v", err)
		}
		return err
	}
	s.conn = conn
	if err := s.loadTypes(ctx); err != nil {
		s.close()
		if !isConnError(err) {
			err = sdk.Permanent(err)
		}
		return err
	}
	if s.dbz != nil {
		rows, err := s.query(ctx, `SELECT current_database()`)
		if err != nil {
			s.close()
			return err
		}
		s.dbz.db = jsonscan.AppendString(nil, string(rows[0][0]))
	}
	s.resetTables()
	for _, t := range s.tables {
		info, err := s.loadTable(ctx, t)
		if err != nil {
			s.close()
			if isConnError(err) {
				return err
			}
			return sdk.Permanent(err)
		}
		if err := s.checkSettings(t, info); err != nil {
			s.close()
			return err
		}
		s.info[t.String()] = info
	}
	if err := s.resolvePatterns(ctx); err != nil { // patterns.go
		s.close()
		if isConnError(err) {
			return err
		}
		return sdk.Permanent(err)
	}
	s.setupIncremental() // incremental.go
	if s.cfg.Mode == "cdc" {
		err = s.setupCDC(ctx)
	} else {
		err = s.setupPolling(ctx)
	}
	if err != nil {
		s.close()
		if !isConnError(err) && !sdk.IsPermanent(err) && !isTransient(err) {
			err = sdk.Permanent(err)
		}
		return err
	}
	return nil
}

// close drops the connections.
func (s *Source) close() {
	s.closeCursor()
	s.closeStream()
	if s.replConn != nil {
		_ = s.replConn.Close(context.Background())
		s.replConn = nil
	}
	if s.conn != nil {
		_ = s.conn.Close(context.Background())
		s.conn = nil
	}
	s.snapTx = false
	s.exportedSnap = ""
}

// Poll returns the next batch; see the package documentation.
func (s *Source) Poll(ctx context.Context) (sdk.Batch, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fatal != nil {
		return sdk.Batch{}, s.fatal
	}
	if err := s.slotLost(); err != nil { // slots.go
		return sdk.Batch{}, s.fail(ctx, err)
	}
	s.candidate = nil
	s.pendingApply = nil
	if s.conn != nil && s.conn.IsClosed() {
		s.close() // a cancelled query closes the connection
	}
	if s.conn == nil {
		if err := s.connect(ctx); err != nil {
			return sdk.Batch{}, s.fail(ctx, err)
		}
		s.log.Info("connected to postgres")
	}
	s.heartbeat(ctx)                        // heartbeat.go
	if err := s.discover(ctx); err != nil { // patterns.go
		return sdk.Batch{}, s.fail(ctx, err)
	}
	var (
		b   sdk.Batch
		err error
	)
	if s.cfg.Mode == "cdc" {
		b, err = s.pollCDC(ctx)
		s.publishProgress()
	} else {
		b, err = s.pollTables(ctx)
	}
	if err != nil {
		s.candidate = nil
		s.pendingApply = nil
		s.quietLSN = 0
		return sdk.Batch{}, s.fail(ctx, err)
	}
	return b, nil
}

// fail classifies a Poll error: permanent errors stick; anything else
// drops the connection (it may be gone, or inside a failed transaction)
// and pauses for poll_interval so the runtime's retry is not a tight loop.
// The next Poll reconnects and re-runs the checks.
func (s *Source) fail(ctx context.Context, err error) error {
	if sdk.IsPermanent(err) {
		s.fatal = err
		s.close()
		return err
	}
	s.close()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	s.sleep(ctx)
	if isConnError(err) {
		return fmt.Errorf("postgres unavailable, will reconnect: %w", err)
	}
	return err
}

func (s *Source) sleep(ctx context.Context) {
	d := s.cfg.PollInterval
	if d <= 0 {
		d = time.Second
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// OnBatchResult promotes (Ack) or drops (Nack) the candidate state. Side
// effects that fail because the database is unreachable are retried at the
// start of the next Poll.
func (s *Source) OnBatchResult(ctx context.Context, result sdk.Result) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch result {
	case sdk.Ack:
		if s.candidate != nil {
			s.countSnapshot(s.candidate) // signal.go
			s.committed = s.candidate
			if s.candCarries {
				s.unsaved = false
			}
		}
		if s.cfg.Mode == "cdc" {
			if s.candidateLSN > s.committedLSN {
				s.committedLSN = s.candidateLSN
			}
			target := max(s.committedLSN, s.quietLSN)
			if target > s.pendingAdvance {
				s.pendingAdvance = target
			}
			s.retry = nil
			// With a peek result still open, the slot moves at the next
			// poll that finds it closed.
			if s.conn != nil && s.cursor == nil && s.pendingAdvance > s.slotLSN {
				if err := s.moveSlot(ctx); err != nil {
					s.log.Warn("advancing the replication slot failed; retrying on the next poll", "error", err)
					if isConnError(err) {
						s.close()
					}
				}
			}
		} else {
			s.retry, s.retryState, s.retryApply = nil, nil, nil
			s.applyQueue = append(s.applyQueue, s.pendingApply...)
			if s.conn != nil {
				if err := s.applyAcked(ctx); err != nil {
					s.log.Warn("applying processed_column/delete_after_read failed; retrying on the next poll", "error", err)
					if isConnError(err) {
						s.close()
					}
				}
			}
		}
	case sdk.Nack:
	default:
		return fmt.Errorf("unknown batch result %d", result)
	}
	s.candidate = nil
	s.candidateLSN = 0
	s.quietLSN = 0
	s.pendingApply = nil
	s.publishProgress()
	return nil
}

// Close releases the connections. The slot and publication stay.
func (s *Source) Close(ctx context.Context) error {
	s.stopSlotWatch() // slots.go
	s.mu.Lock()
	defer s.mu.Unlock()
	s.close()
	return nil
}

// batch wraps messages with the candidate state.
func (s *Source) batch(msgs []sdk.Message, st *state) (sdk.Batch, error) {
	if len(msgs) == 0 {
		return sdk.Batch{}, nil
	}
	blob, err := json.Marshal(st)
	if err != nil {
		return sdk.Batch{}, err
	}
	s.candidate = st
	s.candCarries = s.unsaved
	return sdk.Batch{Messages: msgs, State: blob}, nil
}
