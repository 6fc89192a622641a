package postgressource

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// setupCDC checks wal_level, privileges, the publication and the slot, and
// creates the last two when allowed.
func (s *Source) setupCDC(ctx context.Context) error {
	rows, err := s.query(ctx, `SELECT current_setting('wal_level'), current_user,
  (SELECT rolsuper OR rolreplication FROM pg_catalog.pg_roles WHERE rolname = current_user),
  current_database(), current_setting('server_version_num')::int >= 140000`)
	if err != nil {
		return err
	}
	walLevel, user, canRepl, db := string(rows[0][0]), string(rows[0][1]), string(rows[0][2]) == "t", string(rows[0][3])
	s.pg14 = string(rows[0][4]) == "t"
	if walLevel != "logical" {
		return permanent("postgres has wal_level = %s; CDC needs wal_level = logical (set it in postgresql.conf or with ALTER SYSTEM SET wal_level = logical, then restart the server), or use mode = \"polling\"", walLevel)
	}
	if !canRepl {
		return permanent("user %q lacks the REPLICATION privilege that CDC needs; grant it with ALTER ROLE %s REPLICATION", user, quoteIdent(user))
	}
	for _, t := range s.tables {
		r, err := s.query(ctx, `SELECT has_table_privilege($1, 'SELECT')`, t.quoted())
		if err != nil {
			return err
		}
		if string(r[0][0]) != "t" {
			return permanent("user %q lacks SELECT on table %s; grant it with GRANT SELECT ON %s TO %s", user, t, t.quoted(), quoteIdent(user))
		}
	}
	if err := s.setupPublication(ctx, user); err != nil {
		return err
	}
	return s.setupSlot(ctx, db)
}

// partitionedTable returns the first partitioned table of tables, or nil.
func (s *Source) partitionedTable() *tableName {
	for _, t := range s.tables {
		if info := s.info[t.String()]; info != nil && info.partitioned {
			return &t
		}
	}
	return nil
}

func (s *Source) setupPublication(ctx context.Context, user string) error {
	pub := s.cfg.Publication
	// A partitioned table is captured through its root: changes of every
	// partition, attached now or later, are published as the root's
	// (publish_via_partition_root, PostgreSQL 13 and later).
	parted := s.partitionedTable()
	with := "publish = '" + s.publishList() + "'"
	viaRoot := "false"
	if parted != nil {
		with += ", publish_via_partition_root = true"
		v, err := s.query(ctx, `SELECT current_setting('server_version_num')::int >= 130000`)
		if err != nil {
			return err
		}
		if string(v[0][0]) != "t" {
			return permanent("tables: %s is a partitioned table, captured through its root with publish_via_partition_root, which needs PostgreSQL 13 or later; list its partitions in tables instead", *parted)
		}
		viaRoot = "pubviaroot"
	}
	rows, err := s.query(ctx, `SELECT puballtables, pubupdate OR pubdelete, `+viaRoot+` FROM pg_catalog.pg_publication WHERE pubname = $1`, pub)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		if !s.cfg.CreatePublication {
			return permanent("publication %q does not exist and create_publication is false; create it with CREATE PUBLICATION %s FOR TABLE %s WITH (%s)", pub, quoteIdent(pub), s.tableList(), with)
		}
		if err := s.checkReplicaIdentity(ctx, s.pubTables(), s.ops[opUpdate] || s.ops[opDelete]); err != nil {
			return err
		}
		// Publish only what is captured: the server then decodes less, and
		// a table without a replica identity keeps its UPDATE and DELETE.
		err := s.exec(ctx, "CREATE PUBLICATION "+quoteIdent(pub)+" FOR TABLE "+s.tableList()+" WITH ("+with+")")
		if err != nil {
			if pgErrorCode(err) == "42501" {
				return permanent("user %q may not create publication %q (%v); create it as the table owner: CREATE PUBLICATION %s FOR TABLE %s", user, pub, err, quoteIdent(pub), s.tableList())
			}
			if pgErrorCode(err) != "42710" { // created concurrently
				return fmt.Errorf("creating publication %q: %w", pub, err)
			}
		}
		s.log.Info("created publication", "publication", pub)
		return nil
	}
	if parted != nil && string(rows[0][2]) != "t" {
		// Without the option the partitions' changes carry the partitions'
		// names, and pg_publication_tables lists partitions, not the root.
		return permanent("tables: %s is a partitioned table, captured through its root, but publication %q has publish_via_partition_root off, so its changes would carry the partitions' names; run ALTER PUBLICATION %s SET (publish_via_partition_root = true) (the source never changes an existing publication's options)", *parted, pub, quoteIdent(pub))
	}
	if string(rows[0][0]) == "t" {
		return nil
	}
	var missing []tableName
	for _, t := range s.pubTables() {
		r, err := s.query(ctx, `SELECT 1 FROM pg_catalog.pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`, pub, t.Schema, t.Name)
		if err != nil {
			return err
		}
		if len(r) == 0 {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	var list []string
	for _, t := range missing {
		list = append(list, t.quoted())
	}
	if !s.cfg.CreatePublication {
		return permanent("publication %q does not include %s and create_publication is false; add with ALTER PUBLICATION %s ADD TABLE %s", pub, strings.Join(list, ", "), quoteIdent(pub), strings.Join(list, ", "))
	}
	if err := s.checkReplicaIdentity(ctx, missing, string(rows[0][1]) == "t"); err != nil {
		return err
	}
	if err := s.exec(ctx, "ALTER PUBLICATION "+quoteIdent(pub)+" ADD TABLE "+strings.Join(list, ", ")); err != nil {
		return fmt.Errorf("adding %s to publication %q: %w", strings.Join(list, ", "), pub, err)
	}
	return nil
}

// checkTables runs when a poll found nothing: a table dropped, or taken
// out of the publication, while the source runs yields no changes and no
// error from the slot, so quiet would look healthy for ever. Poll fails
// instead, every time, naming the table.
func (s *Source) checkTables(ctx context.Context) error {
	schemas := make([]string, len(s.tables))
	names := make([]string, len(s.tables))
	for i, t := range s.tables {
		schemas[i], names[i] = t.Schema, t.Name
	}
	rows, err := s.query(ctx, `SELECT u.s, u.n, to_regclass(format('%I.%I', u.s, u.n)) IS NOT NULL
FROM unnest($1::text[], $2::text[]) AS u(s, n)
WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_publication_tables pt WHERE pt.pubname = $3 AND pt.schemaname = u.s AND pt.tablename = u.n)`,
		string(arrayLiteral(schemas)), string(arrayLiteral(names)), s.cfg.Publication)
	if err != nil {
		return err
	}
	for _, r := range rows {
		t := tableName{string(r[0]), string(r[1])}
		if string(r[2]) == "t" {
			return s.notPublished(t)
		}
		if !s.dropMatched(t) { // patterns.go: a pattern's table may go
			return fmt.Errorf("tables: %s was dropped while the source was running, so none of its changes are captured; remove it from tables, or recreate it and restart the source", t)
		}
	}
	return nil
}

// notPublished is checkTables' error for a table taken out of the
// publication.
func (s *Source) notPublished(t tableName) error {
	return fmt.Errorf("tables: %s is no longer in publication %q, so none of its changes are captured; add it back with ALTER PUBLICATION %s ADD TABLE %s (changes made meanwhile are not published; with create_publication = true the source adds it back when it reconnects, after this error)", t, s.cfg.Publication, quoteIdent(s.cfg.Publication), t.quoted())
}

// publishList is the publication's publish parameter: the captured
// operations, in capture_operations' order of the schema.
func (s *Source) publishList() string {
	var ops []string
	for _, op := range []string{opInsert, opUpdate, opDelete, opTruncate} {
		if s.ops[op] {
			ops = append(ops, op)
		}
	}
	return strings.Join(ops, ", ")
}

// checkReplicaIdentity refuses to put a table into a publication that
// publishes updates or deletes when the table has no replica identity (no
// primary key with REPLICA IDENTITY DEFAULT, or NOTHING): PostgreSQL would
// then fail every UPDATE and DELETE the application runs on it.
func (s *Source) checkReplicaIdentity(ctx context.Context, tables []tableName, publishesChanges bool) error {
	if !publishesChanges {
		return nil
	}
	for _, t := range tables {
		r, err := s.query(ctx, `SELECT c.relreplident, EXISTS (SELECT 1 FROM pg_catalog.pg_index i WHERE i.indrelid = c.oid AND i.indisprimary)
FROM pg_catalog.pg_class c WHERE c.oid = $1::regclass`, t.quoted())
		if err != nil {
			return err
		}
		ident, hasPK := string(r[0][0]), string(r[0][1]) == "t"
		var why string
		switch {
		case ident == "n":
			why = "has REPLICA IDENTITY NOTHING"
		case ident == "d" && !hasPK:
			why = "has no primary key and REPLICA IDENTITY DEFAULT"
		default:
			continue
		}
		return permanent("tables: %s %s: in publication %q, which publishes updates and deletes, every UPDATE and DELETE the application runs on it would fail (\"cannot update table because it does not have a replica identity\"); the publication was left unchanged. Run ALTER TABLE %s REPLICA IDENTITY FULL, or add a primary key, or capture inserts only with capture_operations = [\"insert\"]",
			t, why, s.cfg.Publication, t.quoted())
	}
	return nil
}

// pubTables are the tables of the publication: tables, and signal_table.
func (s *Source) pubTables() []tableName {
	if s.signalTable == nil || s.inSet[s.signalTable.String()] {
		return s.tables
	}
	return append(slices.Clip(s.tables), *s.signalTable)
}

func (s *Source) tableList() string {
	var list []string
	for _, t := range s.pubTables() {
		list = append(list, t.quoted())
	}
	return strings.Join(list, ", ")
}

// setupSlot finds or creates the slot and reconciles its position with
// the committed LSN: the committed LSN wins when it is ahead.
func (s *Source) setupSlot(ctx context.Context, db string) error {
	slot := s.cfg.ReplicationSlot
	rows, err := s.query(ctx, `SELECT plugin, slot_type, database, active, coalesce(active_pid::text, ''), coalesce(confirmed_flush_lsn::text, '')
FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, slot)
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		if s.committedLSN != 0 || (s.committed.Snapshot != nil && len(s.committed.Snapshot.Tables) > 0) {
			return permanent("replication slot %q was dropped after this source had delivered changes up to LSN %s; changes since then cannot be recovered from it. Delete this source's checkpoint to start over with a new slot (and snapshot = \"initial\" to re-read the tables)", slot, s.committedLSN)
		}
		if !s.cfg.CreateSlot {
			return permanent("replication slot %q does not exist and create_slot is false; create it with SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot, slot)
		}
		return s.createSlot(ctx)
	}
	plugin, typ, sdb, active, pid, confirmed := string(rows[0][0]), string(rows[0][1]), string(rows[0][2]), string(rows[0][3]), string(rows[0][4]), string(rows[0][5])
	if typ != "logical" {
		return permanent("replication slot %q is a %s slot; CDC needs a logical slot with plugin pgoutput; choose another replication_slot", slot, typ)
	}
	if plugin != "pgoutput" {
		return permanent("replication slot %q uses output plugin %q; this source needs pgoutput; drop it (SELECT pg_drop_replication_slot('%s')) or choose another replication_slot", slot, plugin, slot)
	}
	if sdb != db {
		return permanent("replication slot %q belongs to database %q, not %q; choose another replication_slot", slot, sdb, db)
	}
	if active == "t" {
		return errTransient{fmt.Errorf("replication slot %q is in use by another process (PID %s); only one reader may use a slot at a time", slot, pid)}
	}
	pos, err := pglogrepl.ParseLSN(confirmed)
	if err != nil {
		return fmt.Errorf("replication slot %q has no confirmed position yet", slot)
	}
	s.slotLSN = pos
	if s.committedLSN > s.slotLSN {
		// Delivered and saved, but the slot was not advanced before a crash.
		s.pendingAdvance = s.committedLSN
		if err := s.advance(ctx); err != nil {
			return err
		}
	}
	return nil
}

// createSlot creates the slot. For snapshot = "initial" it is created on a
// replication connection with EXPORT_SNAPSHOT, and the snapshot is imported
// into a repeatable-read transaction on the main connection, so the rows
// read are exactly those the slot's stream starts after.
func (s *Source) createSlot(ctx context.Context) error {
	slot := s.cfg.ReplicationSlot
	wantSnap := s.committed.Snapshot != nil && !s.committed.Snapshot.Done
	if !wantSnap {
		rows, err := s.query(ctx, `SELECT lsn::text FROM pg_create_logical_replication_slot($1, 'pgoutput')`, slot)
		if err != nil {
			return s.slotError(err)
		}
		s.slotLSN, _ = pglogrepl.ParseLSN(string(rows[0][0]))
		s.log.Info("created replication slot", "slot", slot, "lsn", s.slotLSN)
		return nil
	}
	rc := s.pgcfg.Copy()
	rc.RuntimeParams["replication"] = "database"
	repl, err := pgconn.ConnectConfig(ctx, rc)
	if err != nil {
		return err
	}
	res, err := pglogrepl.CreateReplicationSlot(ctx, repl, slot, "pgoutput", pglogrepl.CreateReplicationSlotOptions{
		Mode: pglogrepl.LogicalReplication, SnapshotAction: "EXPORT_SNAPSHOT",
	})
	if err != nil {
		_ = repl.Close(ctx)
		return s.slotError(err)
	}
	s.replConn = repl // the exported snapshot lives as long as this connection is idle
	s.slotLSN, _ = pglogrepl.ParseLSN(res.ConsistentPoint)
	s.log.Info("created replication slot with exported snapshot", "slot", slot, "lsn", s.slotLSN)
	err = s.beginSnapshot(ctx, res.SnapshotName)
	_ = repl.Close(ctx)
	s.replConn = nil
	return err
}

func (s *Source) slotError(err error) error {
	switch pgErrorCode(err) {
	case "42501":
		return permanent("creating replication slot %q: %v; the user needs the REPLICATION privilege (ALTER ROLE ... REPLICATION)", s.cfg.ReplicationSlot, err)
	case "53400":
		return permanent("creating replication slot %q: %v; raise max_replication_slots or drop an unused slot", s.cfg.ReplicationSlot, err)
	case "55000":
		return permanent("creating replication slot %q: %v", s.cfg.ReplicationSlot, err)
	}
	return fmt.Errorf("creating replication slot %q: %w", s.cfg.ReplicationSlot, err)
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

// newDecoder starts decoding at the committed position. A transaction
// delivered in part before (the state's tx_lsn) has its first tx_rows
// records skipped when it comes again.
func (s *Source) newDecoder() *decoder {
	d := &decoder{s: s, rels: map[uint32]*relation{}}
	if s.committed.TxLSN != "" {
		if lsn, err := pglogrepl.ParseLSN(s.committed.TxLSN); err == nil && lsn >= s.committedLSN {
			d.resumeLSN, d.resumeRows = lsn, s.committed.TxRows
		}
	}
	return d
}

// decoder turns pgoutput messages into records. It lives as long as one
// peek result or one replication stream, which send the Relation messages
// it caches.
type decoder struct {
	s       *Source
	rels    map[uint32]*relation
	msgs    []sdk.Message
	skip    bool // transaction already delivered (commit before committedLSN)
	commit  time.Time
	xid     uint32        // of the open transaction
	prevTx  pglogrepl.LSN // commit LSN of the last transaction read (Debezium's sequence)
	lastEnd pglogrepl.LSN // end of the last whole transaction read
	change  change        // reused for every tuple message

	inTxn   bool          // between a Begin and its Commit
	txFinal pglogrepl.LSN // commit LSN of the open transaction
	txSeen  int           // its records so far, skipped ones included
	// Transaction metadata: the position of the record being written in
	// its transaction (1 for the first), overall and per table; skipped
	// records count, so a split transaction numbers on after a restart.
	txOrder  int
	txTables map[string]int
	txBuf    []byte // scratch for the Debezium transaction block
	// A transaction delivered in part before this decoder started.
	resumeLSN  pglogrepl.LSN
	resumeRows int
}

func (d *decoder) handle(lsn pglogrepl.LSN, data []byte) (err error) {
	if len(data) == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("malformed pgoutput message at LSN %s: %v", lsn, r)
		}
	}()
	s := d.s
	switch data[0] {
	case 'I', 'U', 'D':
		c := &d.change
		if err := readChange(data, c); err != nil {
			return fmt.Errorf("malformed pgoutput message at LSN %s: %v", lsn, err)
		}
		switch data[0] {
		case 'I':
			if rel := d.rels[c.relID]; rel != nil && rel.signal {
				s.signalRow(d, rel, &c.new) // signal.go
			}
			if rel := d.rel(c.relID, opInsert); rel != nil {
				d.emit(rel, opInsert, lsn, &c.new, nil, false)
			}
		case 'U':
			if rel := d.rel(c.relID, opUpdate); rel != nil {
				var old *tuple
				if c.oldKind != 0 {
					old = &c.old
				}
				d.emit(rel, opUpdate, lsn, &c.new, old, c.oldKind == 'K')
			}
		case 'D':
			if rel := d.rel(c.relID, opDelete); rel != nil {
				d.emit(rel, opDelete, lsn, &c.old, nil, c.oldKind == 'K')
			}
		}
		return nil
	}
	msg, err := pglogrepl.Parse(data)
	if err != nil {
		// Message types this source does not use (stream, prepare).
		return nil
	}
	switch m := msg.(type) {
	case *pglogrepl.BeginMessage:
		d.skip = m.FinalLSN < s.committedLSN
		d.commit = m.CommitTime
		d.xid = m.Xid
		d.inTxn, d.txFinal, d.txSeen = true, m.FinalLSN, 0
		d.txOrder = 0
		clear(d.txTables)
	case *pglogrepl.CommitMessage:
		d.txCommit() // txmeta.go
		d.inTxn = false
		d.prevTx = m.CommitLSN
		if m.TransactionEndLSN > d.lastEnd {
			d.lastEnd = m.TransactionEndLSN
		}
	case *pglogrepl.RelationMessage:
		d.rels[m.RelationID] = s.relationFromMessage(m)
	case *pglogrepl.LogicalDecodingMessage:
		s.watermark(m)
		s.signalMessage(d, m) // signal.go
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if rel := d.rel(id, opTruncate); rel != nil {
				d.emitTruncate(rel, lsn)
			}
		}
	}
	return nil
}

// refresh builds again the cached relation of t, which has just joined
// tables: its changes were skipped, they are captured from now on.
func (d *decoder) refresh(t tableName) {
	for id, rel := range d.rels {
		if rel.table == t.String() && rel.src != nil {
			d.rels[id] = d.s.relationFromMessage(rel.src)
		}
	}
}

// count numbers one more record of rel in the open transaction.
func (d *decoder) count(rel *relation) {
	d.txOrder++
	if d.txTables == nil {
		d.txTables = map[string]int{}
	}
	d.txTables[rel.table]++
}

func (d *decoder) rel(id uint32, op string) *relation {
	if d.skip || !d.s.ops[op] {
		return nil
	}
	rel := d.rels[id]
	if rel == nil || rel.skip {
		return nil
	}
	// One more record of this transaction: those a previous run delivered
	// are skipped.
	d.txSeen++
	d.count(rel)
	if d.resumeRows > 0 && d.txFinal == d.resumeLSN && d.txSeen <= d.resumeRows {
		return nil
	}
	if d.txOrder == 1 && d.s.cfg.TransactionTopic != "" {
		d.txEvent(false) // txmeta.go: BEGIN before the first record
	}
	return rel
}

// emit writes one change record. For deletes, tuple is the old tuple;
// keyOnly says it holds only the replica identity columns.
func (d *decoder) emit(rel *relation, op string, lsn pglogrepl.LSN, row, old *tuple, keyOnly bool) {
	s := d.s
	if s.dbz != nil {
		d.emitDbz(rel, op, lsn, row, old, keyOnly)
	} else {
		d.emitFlat(rel, op, lsn, row, old, keyOnly)
	}
	if s.chunk != nil {
		// The chunk knows its rows by primary key, whatever the record key.
		s.chunkSaw(rel, s.enc.appendTupleKey(nil, rel, row, rel.keyIdx), false)
		if old != nil && op == opUpdate {
			s.chunkSaw(rel, s.enc.appendTupleKey(nil, rel, old, rel.keyIdx), false)
		}
	}
}

// emitFlat writes one change record in the flat format.
func (d *decoder) emitFlat(rel *relation, op string, lsn pglogrepl.LSN, row, old *tuple, keyOnly bool) {
	s := d.s
	a := &s.arena
	start := a.begin()
	buf := append(a.buf, '{')
	var fill *tuple
	if old != nil && !keyOnly {
		fill = old
	}
	buf, empty := s.enc.appendTuple(buf, rel, row, op == opDelete && keyOnly, fill)
	buf = appendOp(buf, op, !empty)
	if old != nil && op == opUpdate {
		buf = append(buf, `,"`+keyBefore+`":{`...)
		buf, _ = s.enc.appendTuple(buf, rel, old, keyOnly, nil)
		buf = append(buf, '}')
	}
	if s.cfg.IncludeMetadata {
		buf = appendCDCMeta(buf, rel, lsn, d.commit)
		buf = d.appendTxMeta(buf)
	}
	buf = append(buf, '}')
	a.buf = buf
	payload := a.end(start)
	var key []byte
	if len(rel.recKey) > 0 {
		// The key as it is now: the new tuple (the old one for deletes).
		start = a.begin()
		a.buf = s.enc.appendTupleKey(a.buf, rel, row, rel.recKey)
		key = a.end(start)
	}
	d.msgs = append(d.msgs, sdk.Message{Key: key, Payload: payload, Timestamp: d.commit})
}

func (d *decoder) emitTruncate(rel *relation, lsn pglogrepl.LSN) {
	s := d.s
	if s.dbz != nil {
		d.emitDbzTruncate(rel, lsn)
		s.chunkSaw(rel, nil, true)
		return
	}
	buf := []byte(`{"` + keyOp + `":"truncate","` + keyTable + `":`)
	buf = append(buf, rel.tableJSON...)
	if s.cfg.IncludeMetadata {
		buf = append(buf, `,"`+keyLSN+`":"`...)
		buf = appendLSN(buf, lsn)
		buf = append(buf, `","`+keyCommitTime+`":"`...)
		buf = d.commit.UTC().AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, '"')
		buf = d.appendTxMeta(buf)
	}
	buf = append(buf, '}')
	d.msgs = append(d.msgs, sdk.Message{Payload: buf, Timestamp: d.commit})
	s.chunkSaw(rel, nil, true)
}

// appendTxMeta appends `,"__xid":X,"__tx_order":N`: the transaction's ID
// and the record's position in it (1 for its first record).
func (d *decoder) appendTxMeta(buf []byte) []byte {
	buf = append(buf, `,"`+keyXID+`":`...)
	buf = strconv.AppendUint(buf, uint64(d.xid), 10)
	buf = append(buf, `,"`+keyTxOrder+`":`...)
	return strconv.AppendInt(buf, int64(d.txOrder), 10)
}

// relationFromMessage builds a relation from a pgoutput Relation message;
// the record key is the table's primary key, or the replica identity
// columns when it has none.
func (s *Source) relationFromMessage(m *pglogrepl.RelationMessage) *relation {
	table := tableName{m.Namespace, m.RelationName}
	rel := &relation{table: table.String(), tableJSON: jsonscan.AppendString(nil, table.String()), src: m}
	rel.skip = !s.inSet[rel.table]
	rel.signal = s.isSignalTable(table)
	rel.cols = make([]column, len(m.Columns))
	var identity []string
	for i, c := range m.Columns {
		rel.cols[i] = newColumn(c.Name, s.typeOf(c.DataType))
		rel.cols[i].identity = c.Flags&1 == 1
		if s.dbz != nil {
			rel.cols[i].dbz = s.dbzTypeOf(c.DataType, c.TypeModifier)
		}
		if rel.cols[i].identity {
			identity = append(identity, c.Name)
		}
	}
	if info := s.info[rel.table]; info != nil && len(info.pk) > 0 {
		rel.keyIdx = keyIndexes(rel.cols, info.pk)
	}
	if rel.keyIdx == nil && m.ReplicaIdentity != 'f' {
		rel.keyIdx = keyIndexes(rel.cols, identity)
	}
	s.applyRules(rel)
	return rel
}
