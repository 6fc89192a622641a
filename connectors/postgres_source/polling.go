package postgressource

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/sdk"
)

// Polling mode.
//
// Each table is read with
//
//	SELECT * FROM t WHERE tracking_column > $last ORDER BY tracking_column LIMIT batch_size
//
// and the candidate state is the last row's tracking value. Ties: many rows
// may share a tracking value, and a batch that ended inside such a group
// would skip the rest of it on the next read. The rule:
//
//   - With a primary key (found in the catalog, or primary_key_column),
//     pages are keyset pages on (tracking_column, primary key): the state
//     keeps both, and the next page starts strictly after that pair, so a
//     tie group may span batches and no row is skipped or repeated.
//   - Without one, a batch is extended to the end of its last tie group:
//     every row whose tracking value equals the batch's highest value is
//     included, so the next read (strictly greater) loses nothing. Such a
//     batch can exceed batch_size by the size of one tie group.
//
// Rows whose tracking value is NULL are never read.
//
// The visibility window. A cursor on values alone skips a row that
// commits after the cursor passed its value: two writers, the one holding
// the lower id committing last. So each poll runs in one REPEATABLE READ
// transaction and records its pg_current_snapshot() per table (Snap), and
// keeps this invariant: every row Snap shows whose (tracking value, key)
// is at or below the cursor has been delivered. The next poll first reads
// the window, the rows at or below the cursor whose xmin Snap does not
// show (they committed since), then reads on above the cursor as before.
//
// The window's lower bound keeps a poll from scanning the table: Marks
// pair a poll's own transaction ID (assigned just after its snapshot, so
// every transaction with a lower ID already had it) with the highest
// tracking value the snapshot showed. A transaction Snap does not show has
// an ID at or above Snap's xmin; when a mark's ID is at or below that
// xmin, the transaction got its ID after that mark's snapshot was taken,
// and a value it assigned then (a sequence default, clock_timestamp(), a
// trigger) is at least the mark's value. So the window is the tracking
// index range from the newest such mark's value to the cursor, filtered by
// xmin: the rows written during the longest transaction open at the last
// poll. Values assigned before a transaction's first write (ids fetched
// ahead by an ORM, now() in a transaction that reads first for a long
// time) can fall below it. Until a mark is old enough (the transactions
// open at the first poll have ended), the window has no lower bound.
//
// Views, materialized views and foreign tables, a standby (which cannot
// assign the poll an ID) and PostgreSQL 12 or older (no pg_snapshot) keep
// the value cursor alone, with a warning at start. Each poll consumes one transaction ID.
// pg_current_snapshot() lists top-level transactions only: a row written
// in a subtransaction (SAVEPOINT) that began before a poll, whose parent
// commits after it, is taken as seen.

// pollTable is the per-table plan worked out at setup.
type pollTable struct {
	name      tableName
	track     string   // tracking column
	pk        []string // primary key columns, nil when none
	keyset    bool     // page on (track, pk)
	pkTypes   []string // SQL types of the pk columns, for casts
	processed string   // processed_column, "" for none
	procSet   string   // SQL the column is set to on Ack
	procWhere string   // filter of unprocessed rows
	window    bool     // read with the visibility window (the table has xmin)
}

// applyOp is a side effect held until Ack: mark or delete rows by key.
type applyOp struct {
	table *pollTable
	keys  [][]string // keys[i] = values of pk column i, one per row
}

func (s *Source) setupPolling(ctx context.Context) error {
	s.plans = map[string]*pollTable{}
	s.visible = false
	rows, err := s.query(ctx, `SELECT current_user`)
	if err != nil {
		return err
	}
	user := string(rows[0][0])
	rows, err = s.query(ctx, `SELECT pg_is_in_recovery(), current_setting('server_version_num')::int >= 130000`)
	if err != nil {
		return err
	}
	standby, pg13 := string(rows[0][0]) == "t", string(rows[0][1]) == "t"
	for _, t := range s.tables {
		info := s.info[t.String()]
		p := &pollTable{name: t, pk: info.pk, track: s.cfg.TrackingColumn}
		if p.track == "" {
			if len(info.pk) != 1 {
				return permanent("tracking_column: not set, and table %s has no single-column primary key to track; name an increasing column such as an id or updated_at", t)
			}
			p.track = info.pk[0]
		}
		if _, ok := info.colType[p.track]; !ok {
			return permanent("tracking_column: table %s has no column %q", t, p.track)
		}
		p.keyset = len(p.pk) > 0 && !(len(p.pk) == 1 && p.pk[0] == p.track)
		for _, c := range p.pk {
			p.pkTypes = append(p.pkTypes, info.colType[c])
		}
		if s.cfg.ProcessedColumn != "" || s.cfg.DeleteAfterRead {
			what := "processed_column"
			if s.cfg.DeleteAfterRead {
				what = "delete_after_read"
			}
			if len(p.pk) == 0 {
				return permanent("%s: table %s has no primary key to find rows by; set primary_key_column", what, t)
			}
		}
		if pc := s.cfg.ProcessedColumn; pc != "" {
			typ, ok := info.colType[pc]
			if !ok {
				return permanent("processed_column: table %s has no column %q", t, pc)
			}
			p.processed = pc
			switch {
			case typ == "boolean":
				p.procSet, p.procWhere = "true", quoteIdent(pc)+" IS NOT TRUE"
			case strings.HasPrefix(typ, "timestamp") || typ == "date":
				p.procSet, p.procWhere = "now()", quoteIdent(pc)+" IS NULL"
			default:
				return permanent("processed_column: column %q of table %s is %s; it must be boolean (set to true) or a timestamp (set to now())", pc, t, typ)
			}
		}
		for _, pv := range s.pollPrivileges() {
			if err := s.privilegeError(ctx, t, user, pv); err != nil {
				return err
			}
		}
		if k := info.kind; !pg13 {
			s.log.Warn("polling PostgreSQL 12 or older: the visibility window needs pg_current_snapshot() (PostgreSQL 13); the cursor follows tracking values only, and a row that commits after a higher value was read is skipped", "table", t.String())
		} else if standby {
			s.log.Warn("polling a standby: the visibility window needs a transaction ID per poll, which a standby cannot assign; the cursor follows tracking values only, and a row that commits after a higher value was read is skipped", "table", t.String())
		} else if k == "r" || k == "p" {
			p.window, s.visible = true, true
		} else {
			s.log.Warn("polling a view, materialized view or foreign table: the visibility window needs a table's xmin, so the cursor follows tracking values only, and a row that commits after a higher value was read is skipped; read the underlying table for the window", "table", t.String(), "relkind", k)
		}
		s.plans[t.String()] = p
	}
	// Side effects of the last checkpointed batch that may not have run.
	s.applyQueue = nil
	for _, ps := range s.committed.Pending {
		p := s.plans[ps.Table]
		if p == nil || len(ps.Keys) != len(p.pk) || (p.processed == "" && !s.cfg.DeleteAfterRead) {
			s.log.Warn("dropping a pending processed_column/delete_after_read from the checkpoint: the table or its settings changed", "table", ps.Table)
			continue
		}
		s.applyQueue = append(s.applyQueue, applyOp{table: p, keys: ps.Keys})
	}
	return nil
}

// pollPrivileges are the privileges polling needs on each table: SELECT,
// and UPDATE for processed_column or DELETE for delete_after_read.
func (s *Source) pollPrivileges() []string {
	switch {
	case s.cfg.DeleteAfterRead:
		return []string{"SELECT", "DELETE"}
	case s.cfg.ProcessedColumn != "":
		return []string{"SELECT", "UPDATE"}
	}
	return []string{"SELECT"}
}

// pollSnap is the snapshot of a poll's REPEATABLE READ transaction.
type pollSnap struct {
	text string // pg_current_snapshot(), as text
	xmax string // its xmax
	xid  string // the poll transaction's ID, taken after the snapshot
}

// pollTables reads up to batch_size rows across the tables, starting at a
// different table each call so none starves.
func (s *Source) pollTables(ctx context.Context) (sdk.Batch, error) {
	if len(s.applyQueue) > 0 {
		if err := s.applyAcked(ctx); err != nil {
			return sdk.Batch{}, err
		}
	}
	if s.retry != nil {
		// Nacked: the same records and state again. (Read again, they
		// would come with another snapshot; the nacked batch's state is
		// as true now as when it was read.)
		b := *s.retry
		s.candidate = s.retryState
		s.pendingApply = append([]applyOp(nil), s.retryApply...)
		return b, nil
	}
	st := s.committed.clone()
	if st.Tables == nil {
		st.Tables = map[string]*pollState{}
	}
	var snap *pollSnap
	if s.visible {
		// One snapshot for every read of the poll, and the one recorded.
		if err := s.exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ"); err != nil {
			return sdk.Batch{}, err
		}
		// The snapshot is taken as this statement starts, and
		// pg_current_xact_id() then gives this transaction an ID: every
		// transaction that had one when the snapshot was taken has a lower
		// one. (The snapshot's own xmax does not say that: it is the last
		// completed ID plus one, and transactions still running may have
		// higher ones.)
		r, err := s.query(ctx, `SELECT pg_current_snapshot()::text, pg_snapshot_xmax(pg_current_snapshot())::text, pg_current_xact_id()::text`)
		if err != nil {
			return sdk.Batch{}, err
		}
		snap = &pollSnap{text: string(r[0][0]), xmax: string(r[0][1]), xid: string(r[0][2])}
	}
	var msgs []sdk.Message
	remaining := s.cfg.BatchSize
	n := len(s.tables)
	for k := 0; k < n && remaining > 0; k++ {
		t := s.tables[(s.nextTable+k)%n]
		p := s.plans[t.String()]
		var (
			got []sdk.Message
			err error
		)
		if p.window {
			got, err = s.pollWindow(ctx, p, st, remaining, snap)
		} else {
			got, err = s.pollOne(ctx, p, st, remaining)
		}
		if err != nil {
			return sdk.Batch{}, err
		}
		msgs = append(msgs, got...)
		remaining -= len(got)
	}
	s.nextTable = (s.nextTable + 1) % n
	if snap != nil {
		if err := s.exec(ctx, "COMMIT"); err != nil {
			return sdk.Batch{}, err
		}
	}
	if len(msgs) == 0 {
		// An empty batch carries no state: the tables keep their previous
		// snapshot, which is safe (the next window is only wider).
		s.sleep(ctx)
		return sdk.Batch{}, ctx.Err()
	}
	st.Pending = nil
	for _, op := range s.pendingApply {
		st.Pending = append(st.Pending, pendingState{Table: op.table.name.String(), Keys: op.keys})
	}
	b, err := s.batch(msgs, st)
	if err == nil {
		s.retry, s.retryState, s.retryApply = &b, s.candidate, append([]applyOp(nil), s.pendingApply...)
	}
	return b, err
}

// sqlArgs collects the text parameters of a statement.
type sqlArgs [][]byte

func (a *sqlArgs) add(v string) string {
	*a = append(*a, []byte(v))
	return "$" + strconv.Itoa(len(*a))
}

func (a *sqlArgs) list(vs []string) string {
	p := make([]string, len(vs))
	for i, v := range vs {
		p[i] = a.add(v)
	}
	return strings.Join(p, ", ")
}

// baseConds are the filters of every read of p; initial_offset applies
// to a first read (no position yet) and to the visibility window.
func (s *Source) baseConds(p *pollTable, args *sqlArgs, offset bool) []string {
	conds := []string{quoteIdent(p.track) + " IS NOT NULL"}
	if p.processed != "" {
		conds = append(conds, p.procWhere)
	}
	if offset && s.cfg.InitialOffset != "" {
		conds = append(conds, quoteIdent(p.track)+" > "+args.add(s.cfg.InitialOffset))
	}
	return conds
}

// pollOne reads one table's next rows and records the new position in st.
func (s *Source) pollOne(ctx context.Context, p *pollTable, st *state, limit int) ([]sdk.Message, error) {
	pos := st.Tables[p.name.String()]
	var args sqlArgs
	conds := s.baseConds(p, &args, pos == nil || pos.Value == nil)
	if pos != nil && pos.Value != nil {
		conds = append(conds, s.afterCond(p, &args, *pos.Value, pos.PK))
	}
	msgs, np, err := s.readPage(ctx, p, conds, args, limit)
	if err != nil || np == nil {
		return nil, err
	}
	st.Tables[p.name.String()] = np
	return msgs, nil
}

// afterCond is the condition "(tracking value, key) after (v, pk)".
func (s *Source) afterCond(p *pollTable, args *sqlArgs, v string, pk []string) string {
	track := quoteIdent(p.track)
	if p.keyset && len(pk) == len(p.pk) {
		a := args.add(v)
		return track + " >= " + a + " AND (" + track + ", " + quoteList(p.pk) + ") > (" + a + ", " + args.list(pk) + ")"
	}
	return track + " > " + args.add(v)
}

// readPage runs the page query of p with conds (keyset pages of limit rows
// in (tracking value, key) order, or, without a key, pages extended to the
// end of their last tie group) and encodes the rows (rowsToMessages); the
// position is nil when the page is empty.
func (s *Source) readPage(ctx context.Context, p *pollTable, conds []string, args sqlArgs, limit int) ([]sdk.Message, *pollState, error) {
	res := s.conn.ExecParams(ctx, pageSQL(p, conds, limit), args, nil, nil, nil).Read()
	if res.Err != nil {
		if pgErrorCode(res.Err) == "22P02" || pgErrorCode(res.Err) == "22007" || pgErrorCode(res.Err) == "22008" {
			return nil, nil, permanent("initial_offset: %q is not a value of tracking column %q of %s: %v", s.cfg.InitialOffset, p.track, p.name, res.Err)
		}
		return nil, nil, res.Err
	}
	if len(res.Rows) == 0 {
		return nil, nil, nil
	}
	return s.rowsToMessages(p, res)
}

// pageSQL is the page query of p under conds.
func pageSQL(p *pollTable, conds []string, limit int) string {
	track := quoteIdent(p.track)
	order := track
	if p.keyset {
		order += ", " + quoteList(p.pk)
	}
	where := strings.Join(conds, " AND ")
	var sql string
	if p.keyset || len(p.pk) == 1 && p.pk[0] == p.track {
		sql = "SELECT * FROM " + p.name.quoted() + " WHERE " + where + " ORDER BY " + order + " LIMIT " + strconv.Itoa(limit)
	} else {
		// Extend to the end of the last tie group.
		sql = "SELECT * FROM " + p.name.quoted() + " WHERE " + where + " AND " + track + " <= (SELECT max(" + track + ") FROM (SELECT " + track + " FROM " +
			p.name.quoted() + " WHERE " + where + " ORDER BY " + track + " LIMIT " + strconv.Itoa(limit) + ") AS page) ORDER BY " + track
	}
	return sql
}

// rowsToMessages encodes a page, queues its side effect, and returns the
// position of its last row.
func (s *Source) rowsToMessages(p *pollTable, res *pgconn.Result) ([]sdk.Message, *pollState, error) {
	rel := s.relationFromFields(p.name, res.FieldDescriptions, p.pk)
	trackIdx := keyIndexes(rel.cols, []string{p.track})
	if trackIdx == nil {
		return nil, nil, fmt.Errorf("tracking column %q missing from the result of %s", p.track, p.name)
	}
	ti := trackIdx[0]
	msgs := make([]sdk.Message, 0, len(res.Rows))
	var op *applyOp
	if p.processed != "" || s.cfg.DeleteAfterRead {
		op = &applyOp{table: p, keys: make([][]string, len(p.pk))}
	}
	for _, row := range res.Rows {
		msgs = append(msgs, s.rowMessage(rel, row, -1, opRead, ti, rowPolling))
		if op != nil {
			for i, ki := range rel.keyIdx {
				op.keys[i] = append(op.keys[i], string(row[ki]))
			}
		}
	}
	last := res.Rows[len(res.Rows)-1]
	v := string(last[ti])
	np := &pollState{Value: &v}
	if p.keyset {
		for _, ki := range rel.keyIdx {
			np.PK = append(np.PK, string(last[ki]))
		}
	}
	if op != nil {
		s.pendingApply = append(s.pendingApply, *op)
	}
	return msgs, np, nil
}

// maxMarks bounds the marks a table's state keeps. Past it, every other
// older mark is dropped: the bound then comes from an older mark, which
// only widens the window.
const maxMarks = 64

// pollWindow reads one table with the visibility window: first the rows
// at or below the cursor that the previous snapshot did not show, then on
// above the cursor. See the comment at the top of this file.
func (s *Source) pollWindow(ctx context.Context, p *pollTable, st *state, limit int, snap *pollSnap) ([]sdk.Message, error) {
	key := p.name.String()
	pos := &pollState{}
	if old := st.Tables[key]; old != nil {
		*pos = *old
	}
	track := quoteIdent(p.track)

	// This snapshot's mark.
	r, err := s.query(ctx, `SELECT max(`+track+`)::text FROM `+p.name.quoted())
	if err != nil {
		return nil, err
	}
	var top *string
	if r[0][0] != nil {
		v := string(r[0][0])
		top = &v
	}
	if n := len(pos.Marks); n == 0 || !sameValue(pos.Marks[n-1].V, top) {
		pos.Marks = append(pos.Marks, pollMark{X: snap.xid, V: top})
	}

	var msgs []sdk.Message
	if pos.Snap != "" && pos.Value != nil {
		passStart := pos.PassSnap
		if passStart == "" {
			passStart = snap.text
		}
		conds, args := s.windowConds(p, pos, snap.xmax)
		pageLimit := limit
		paged := p.keyset || len(p.pk) == 1 && p.pk[0] == p.track
		if !paged {
			pageLimit = math.MaxInt32 // without a key, the window is read whole
		}
		got, last, err := s.readPage(ctx, p, conds, args, pageLimit)
		if err != nil {
			return nil, err
		}
		if last != nil {
			msgs = got
			limit -= len(got)
			if paged && limit <= 0 {
				// The pass goes on at the next poll, with the same
				// previous snapshot.
				pos.PassSnap, pos.PassValue, pos.PassPK = passStart, last.Value, last.PK
				s.thinMarks(pos)
				st.Tables[key] = pos
				return msgs, nil
			}
		}
		spanned := pos.PassSnap != ""
		pos.Snap, pos.PassSnap, pos.PassValue, pos.PassPK = passStart, "", nil, nil
		if spanned {
			// A pass that spanned polls ends here. Reading on above the
			// cursor now would read rows committed since the pass began,
			// which the next pass (from the pass's start) reads anyway.
			s.thinMarks(pos)
			st.Tables[key] = pos
			return msgs, nil
		}
	} else {
		pos.Snap, pos.PassSnap, pos.PassValue, pos.PassPK = snap.text, "", nil, nil
	}

	if limit > 0 {
		var args sqlArgs
		conds := s.baseConds(p, &args, pos.Value == nil)
		if pos.Value != nil {
			conds = append(conds, s.afterCond(p, &args, *pos.Value, pos.PK))
		}
		got, last, err := s.readPage(ctx, p, conds, args, limit)
		if err != nil {
			return nil, err
		}
		if last != nil {
			msgs = append(msgs, got...)
			pos.Value, pos.PK = last.Value, last.PK
		}
	}
	s.thinMarks(pos)
	st.Tables[key] = pos
	return msgs, nil
}

// windowConds are the conditions of the window pass of p from pos (and
// drop the marks older than the one that bounds it): at or above the
// bound, after the pass's last row, at or below the cursor, and not shown
// by pos.Snap. xmax is the current snapshot's.
func (s *Source) windowConds(p *pollTable, pos *pollState, xmax string) ([]string, sqlArgs) {
	track := quoteIdent(p.track)
	var args sqlArgs
	conds := s.baseConds(p, &args, true)
	// Lower bound: the newest mark whose ID is at or below the
	// previous snapshot's xmin. Older marks are no longer needed.
	prevXmin := snapshotXmin(pos.Snap)
	floor := -1
	for i, m := range pos.Marks {
		if x, err := strconv.ParseUint(m.X, 10, 64); err == nil && x <= prevXmin {
			floor = i
		}
	}
	if floor >= 0 {
		if v := pos.Marks[floor].V; v != nil {
			conds = append(conds, track+" >= "+args.add(*v))
		}
		pos.Marks = pos.Marks[floor:]
	}
	if pos.PassValue != nil {
		conds = append(conds, s.afterCond(p, &args, *pos.PassValue, pos.PassPK))
	}
	// Upper bound: the cursor.
	if p.keyset && len(pos.PK) == len(p.pk) {
		a := args.add(*pos.Value)
		conds = append(conds, track+" <= "+a+" AND ("+track+", "+quoteList(p.pk)+") <= ("+a+", "+args.list(pos.PK)+")")
	} else {
		conds = append(conds, track+" <= "+args.add(*pos.Value))
	}
	// Not shown by the previous snapshot. xmin is a 32-bit xid; it is
	// widened with the epoch of this snapshot's xmax (every row this
	// snapshot shows has a lower ID, within 2^31). 1 and 2 are the
	// bootstrap and frozen xids: old rows.
	cur := args.add(xmax)
	conds = append(conds, "NOT (xmin::text::bigint < 3 OR pg_visible_in_snapshot((("+cur+"::bigint >> 32 << 32) + xmin::text::bigint - CASE WHEN xmin::text::bigint > ("+cur+"::bigint & 4294967295) THEN 4294967296 ELSE 0 END)::text::xid8, "+args.add(pos.Snap)+"::pg_snapshot))")
	return conds, args
}

func (s *Source) thinMarks(pos *pollState) {
	for len(pos.Marks) > maxMarks {
		// Keep the oldest and the newer half; drop every other in between.
		half := len(pos.Marks) / 2
		kept := make([]pollMark, 0, maxMarks)
		kept = append(kept, pos.Marks[0])
		for i := 2; i < half; i += 2 {
			kept = append(kept, pos.Marks[i])
		}
		pos.Marks = append(kept, pos.Marks[half:]...)
	}
}

func sameValue(a, b *string) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// snapshotXmin returns the xmin of a pg_snapshot's text form
// (xmin:xmax:xip,...), or 0 when it does not parse (no mark is old enough
// then, and the window has no lower bound).
func snapshotXmin(snap string) uint64 {
	i := strings.IndexByte(snap, ':')
	if i < 0 {
		return 0
	}
	x, err := strconv.ParseUint(snap[:i], 10, 64)
	if err != nil {
		return 0
	}
	return x
}

// applyAcked runs the acknowledged processed_column updates and
// delete_after_read deletes in one transaction, by primary key.
func (s *Source) applyAcked(ctx context.Context) error {
	if len(s.applyQueue) == 0 {
		return nil
	}
	if err := s.exec(ctx, "BEGIN"); err != nil {
		return err
	}
	for _, op := range s.applyQueue {
		p := op.table
		var sql string
		if s.cfg.DeleteAfterRead {
			sql = "DELETE FROM " + p.name.quoted()
		} else {
			sql = "UPDATE " + p.name.quoted() + " SET " + quoteIdent(p.processed) + " = " + p.procSet
		}
		casts := make([]string, len(p.pk))
		params := make([][]byte, len(p.pk))
		for i := range p.pk {
			casts[i] = "$" + strconv.Itoa(i+1) + "::" + p.pkTypes[i] + "[]"
			params[i] = arrayLiteral(op.keys[i])
		}
		sql += " WHERE (" + quoteList(p.pk) + ") IN (SELECT * FROM unnest(" + strings.Join(casts, ", ") + "))"
		if res := s.conn.ExecParams(ctx, sql, params, nil, nil, nil).Read(); res.Err != nil {
			_ = s.exec(ctx, "ROLLBACK")
			return fmt.Errorf("applying %s to %s: %w", map[bool]string{true: "delete_after_read", false: "processed_column"}[s.cfg.DeleteAfterRead], p.name, res.Err)
		}
	}
	if err := s.exec(ctx, "COMMIT"); err != nil {
		return err
	}
	s.applyQueue = nil
	s.committed.Pending = nil // the next checkpoint need not repeat them
	return nil
}

// arrayLiteral writes values as a PostgreSQL array literal of quoted
// elements.
func arrayLiteral(vals []string) []byte {
	b := []byte{'{'}
	for i, v := range vals {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		for j := 0; j < len(v); j++ {
			if v[j] == '"' || v[j] == '\\' {
				b = append(b, '\\')
			}
			b = append(b, v[j])
		}
		b = append(b, '"')
	}
	return append(b, '}')
}
