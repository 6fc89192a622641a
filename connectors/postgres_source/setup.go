package postgressource

// The CDC set-up: what Open checks and creates on the server (wal_level,
// privileges, the publication, the slot). Check (check.go) runs the same
// queries and reports what they find instead of acting on it.

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
)

// serverInfo is what setupCDC (and Check) read of the server and the
// connected user.
type serverInfo struct {
	walLevel, user, db string
	canRepl            bool // a superuser, or the REPLICATION attribute
	pg14               bool // PostgreSQL 14 or later: pgoutput sends messages on request
}

func (s *Source) readServer(ctx context.Context) (serverInfo, error) {
	rows, err := s.query(ctx, `SELECT current_setting('wal_level'), current_user,
  (SELECT rolsuper OR rolreplication FROM pg_catalog.pg_roles WHERE rolname = current_user),
  current_database(), current_setting('server_version_num')::int >= 140000`)
	if err != nil {
		return serverInfo{}, err
	}
	return serverInfo{walLevel: string(rows[0][0]), user: string(rows[0][1]), canRepl: string(rows[0][2]) == "t", db: string(rows[0][3]), pg14: string(rows[0][4]) == "t"}, nil
}

// walLevelError is the error of a server CDC cannot read, nil when
// wal_level is logical.
func walLevelError(level string) error {
	if level == "logical" {
		return nil
	}
	return permanent("postgres has wal_level = %s; CDC needs wal_level = logical (set it in postgresql.conf or with ALTER SYSTEM SET wal_level = logical, then restart the server), or use mode = \"polling\"", level)
}

// replicationError is the error of a user without the REPLICATION
// attribute, nil when it has it.
func (i serverInfo) replicationError() error {
	if i.canRepl {
		return nil
	}
	return permanent("user %q lacks the REPLICATION privilege that CDC needs; grant it with ALTER ROLE %s REPLICATION", i.user, quoteIdent(i.user))
}

// privilegeError is the error of a user that lacks priv (SELECT, UPDATE,
// DELETE) on table t, nil when it has it.
func (s *Source) privilegeError(ctx context.Context, t tableName, user, priv string) error {
	r, err := s.query(ctx, `SELECT has_table_privilege($1, $2)`, t.quoted(), priv)
	if err != nil {
		return err
	}
	if string(r[0][0]) != "t" {
		return permanent("user %q lacks %s on table %s; grant it with GRANT %s ON %s TO %s", user, priv, t, priv, t.quoted(), quoteIdent(user))
	}
	return nil
}

// setupCDC checks wal_level, privileges, the publication and the slot, and
// creates the last two when allowed.
func (s *Source) setupCDC(ctx context.Context) error {
	srv, err := s.readServer(ctx)
	if err != nil {
		return err
	}
	if err := walLevelError(srv.walLevel); err != nil {
		return err
	}
	if err := srv.replicationError(); err != nil {
		return err
	}
	s.pg14 = srv.pg14
	for _, t := range s.tables {
		if err := s.privilegeError(ctx, t, srv.user, "SELECT"); err != nil {
			return err
		}
	}
	if err := s.setupPublication(ctx, srv.user); err != nil {
		return err
	}
	return s.setupSlot(ctx, srv.db)
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

// pubState is what setupPublication (and Check) read of the publication.
type pubState struct {
	// with is the publication's WITH clause for the captured tables.
	with string
	// found: the publication exists; allTables: FOR ALL TABLES; changes:
	// it publishes updates or deletes.
	found, allTables, changes bool
	// rootProblem is set when a partitioned table cannot be captured
	// through its root with this publication or server.
	rootProblem error
	// missing are the captured tables the publication does not include.
	missing []tableName
}

// readPublication reads the publication's state; see pubState.
func (s *Source) readPublication(ctx context.Context) (pubState, error) {
	pub := s.cfg.Publication
	// A partitioned table is captured through its root: changes of every
	// partition, attached now or later, are published as the root's
	// (publish_via_partition_root, PostgreSQL 13 and later).
	parted := s.partitionedTable()
	st := pubState{with: "publish = '" + s.publishList() + "'"}
	viaRoot := "false"
	if parted != nil {
		st.with += ", publish_via_partition_root = true"
		v, err := s.query(ctx, `SELECT current_setting('server_version_num')::int >= 130000`)
		if err != nil {
			return st, err
		}
		if string(v[0][0]) != "t" {
			st.rootProblem = permanent("tables: %s is a partitioned table, captured through its root with publish_via_partition_root, which needs PostgreSQL 13 or later; list its partitions in tables instead", *parted)
			return st, nil
		}
		viaRoot = "pubviaroot"
	}
	rows, err := s.query(ctx, `SELECT puballtables, pubupdate OR pubdelete, `+viaRoot+` FROM pg_catalog.pg_publication WHERE pubname = $1`, pub)
	if err != nil || len(rows) == 0 {
		return st, err
	}
	st.found, st.allTables, st.changes = true, string(rows[0][0]) == "t", string(rows[0][1]) == "t"
	if parted != nil && string(rows[0][2]) != "t" {
		// Without the option the partitions' changes carry the partitions'
		// names, and pg_publication_tables lists partitions, not the root.
		st.rootProblem = permanent("tables: %s is a partitioned table, captured through its root, but publication %q has publish_via_partition_root off, so its changes would carry the partitions' names; run ALTER PUBLICATION %s SET (publish_via_partition_root = true) (the source never changes an existing publication's options)", *parted, pub, quoteIdent(pub))
		return st, nil
	}
	if st.allTables {
		return st, nil
	}
	for _, t := range s.pubTables() {
		r, err := s.query(ctx, `SELECT 1 FROM pg_catalog.pg_publication_tables WHERE pubname = $1 AND schemaname = $2 AND tablename = $3`, pub, t.Schema, t.Name)
		if err != nil {
			return st, err
		}
		if len(r) == 0 {
			st.missing = append(st.missing, t)
		}
	}
	return st, nil
}

// absentError is the error of a publication that does not exist and may
// not be created.
func (s *Source) absentError(st pubState) error {
	pub := s.cfg.Publication
	return permanent("publication %q does not exist and create_publication is false; create it with CREATE PUBLICATION %s FOR TABLE %s WITH (%s)", pub, quoteIdent(pub), s.tableList(), st.with)
}

// incompleteError is the error of a publication that lacks some tables
// and may not be altered.
func (s *Source) incompleteError(st pubState) error {
	pub := s.cfg.Publication
	list := quotedList(st.missing)
	return permanent("publication %q does not include %s and create_publication is false; add with ALTER PUBLICATION %s ADD TABLE %s", pub, list, quoteIdent(pub), list)
}

func quotedList(tables []tableName) string {
	var list []string
	for _, t := range tables {
		list = append(list, t.quoted())
	}
	return strings.Join(list, ", ")
}

func (s *Source) setupPublication(ctx context.Context, user string) error {
	pub := s.cfg.Publication
	st, err := s.readPublication(ctx)
	if err != nil {
		return err
	}
	if st.rootProblem != nil {
		return st.rootProblem
	}
	if !st.found {
		if !s.cfg.CreatePublication {
			return s.absentError(st)
		}
		if err := s.checkReplicaIdentity(ctx, s.pubTables(), s.ops[opUpdate] || s.ops[opDelete]); err != nil {
			return err
		}
		// Publish only what is captured: the server then decodes less, and
		// a table without a replica identity keeps its UPDATE and DELETE.
		err := s.exec(ctx, "CREATE PUBLICATION "+quoteIdent(pub)+" FOR TABLE "+s.tableList()+" WITH ("+st.with+")")
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
	if len(st.missing) == 0 {
		return nil
	}
	if !s.cfg.CreatePublication {
		return s.incompleteError(st)
	}
	if err := s.checkReplicaIdentity(ctx, st.missing, st.changes); err != nil {
		return err
	}
	list := quotedList(st.missing)
	if err := s.exec(ctx, "ALTER PUBLICATION "+quoteIdent(pub)+" ADD TABLE "+list); err != nil {
		return fmt.Errorf("adding %s to publication %q: %w", list, pub, err)
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
		if err := s.replicaIdentityError(ctx, t); err != nil {
			return err
		}
	}
	return nil
}

// replicaIdentityError is the error of a table without a replica identity
// in a publication that publishes updates and deletes, nil when it has one.
func (s *Source) replicaIdentityError(ctx context.Context, t tableName) error {
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
		return nil
	}
	return permanent("tables: %s %s: in publication %q, which publishes updates and deletes, every UPDATE and DELETE the application runs on it would fail (\"cannot update table because it does not have a replica identity\"); the publication was left unchanged. Run ALTER TABLE %s REPLICA IDENTITY FULL, or add a primary key, or capture inserts only with capture_operations = [\"insert\"]",
		t, why, s.cfg.Publication, t.quoted())
}

// pubTables are the tables of the publication: tables, and signal_table.
func (s *Source) pubTables() []tableName {
	if s.signalTable == nil || s.inSet[s.signalTable.String()] {
		return s.tables
	}
	return append(slices.Clip(s.tables), *s.signalTable)
}

func (s *Source) tableList() string { return quotedList(s.pubTables()) }

// setupSlot finds or creates the slot and reconciles its position with
// the committed LSN: the committed LSN wins when it is ahead.
func (s *Source) setupSlot(ctx context.Context, db string) error {
	slot := s.cfg.ReplicationSlot
	info, found, err := s.readSlot(ctx)
	if err != nil {
		return err
	}
	if !found {
		if s.committedLSN != 0 || (s.committed.Snapshot != nil && len(s.committed.Snapshot.Tables) > 0) {
			return permanent("replication slot %q was dropped after this source had delivered changes up to LSN %s; changes since then cannot be recovered from it. Delete this source's checkpoint to start over with a new slot (and snapshot = \"initial\" to re-read the tables)", slot, s.committedLSN)
		}
		if !s.cfg.CreateSlot {
			return s.noSlotError()
		}
		return s.createSlot(ctx)
	}
	if err := s.unusableSlotError(info, db); err != nil {
		return err
	}
	pos, err := pglogrepl.ParseLSN(info.confirmed)
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

// slotInfo is what setupSlot (and Check) read of the replication slot.
type slotInfo struct {
	plugin, typ, db, active, pid, confirmed string
}

func (s *Source) readSlot(ctx context.Context) (slotInfo, bool, error) {
	rows, err := s.query(ctx, `SELECT plugin, slot_type, database, active, coalesce(active_pid::text, ''), coalesce(confirmed_flush_lsn::text, '')
FROM pg_catalog.pg_replication_slots WHERE slot_name = $1`, s.cfg.ReplicationSlot)
	if err != nil || len(rows) == 0 {
		return slotInfo{}, false, err
	}
	r := rows[0]
	return slotInfo{plugin: string(r[0]), typ: string(r[1]), db: string(r[2]), active: string(r[3]), pid: string(r[4]), confirmed: string(r[5])}, true, nil
}

// noSlotError is the error of a slot that does not exist and may not be
// created.
func (s *Source) noSlotError() error {
	slot := s.cfg.ReplicationSlot
	return permanent("replication slot %q does not exist and create_slot is false; create it with SELECT pg_create_logical_replication_slot('%s', 'pgoutput')", slot, slot)
}

// unusableSlotError is the error of a slot this source cannot read (another kind,
// plugin or database, or in use), nil when it can.
func (s *Source) unusableSlotError(info slotInfo, db string) error {
	slot := s.cfg.ReplicationSlot
	if info.typ != "logical" {
		return permanent("replication slot %q is a %s slot; CDC needs a logical slot with plugin pgoutput; choose another replication_slot", slot, info.typ)
	}
	if info.plugin != "pgoutput" {
		return permanent("replication slot %q uses output plugin %q; this source needs pgoutput; drop it (SELECT pg_drop_replication_slot('%s')) or choose another replication_slot", slot, info.plugin, slot)
	}
	if info.db != db {
		return permanent("replication slot %q belongs to database %q, not %q; choose another replication_slot", slot, info.db, db)
	}
	if info.active == "t" {
		return errTransient{fmt.Errorf("replication slot %q is in use by another process (PID %s); only one reader may use a slot at a time", slot, info.pid)}
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
