package postgressource

import (
	"context"
	"fmt"
	"strconv"
	"strings"

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
// Rows whose tracking value is NULL are never read. Rows committed later
// with a tracking value below one already delivered are not seen either;
// use an increasing sequence or a commit-time column for tracking.

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
}

// applyOp is a side effect held until Ack: mark or delete rows by key.
type applyOp struct {
	table *pollTable
	keys  [][]string // keys[i] = values of pk column i, one per row
}

func (s *Source) setupPolling(ctx context.Context) error {
	s.plans = map[string]*pollTable{}
	rows, err := s.query(ctx, `SELECT current_user`)
	if err != nil {
		return err
	}
	user := string(rows[0][0])
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
		priv := "SELECT"
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
			priv = "SELECT,UPDATE"
		}
		if s.cfg.DeleteAfterRead {
			priv = "SELECT,DELETE"
		}
		for _, pv := range strings.Split(priv, ",") {
			r, err := s.query(ctx, `SELECT has_table_privilege($1, $2)`, t.quoted(), pv)
			if err != nil {
				return err
			}
			if string(r[0][0]) != "t" {
				return permanent("user %q lacks %s on table %s; grant it with GRANT %s ON %s TO %s", user, pv, t, pv, t.quoted(), quoteIdent(user))
			}
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

// pollTables reads up to batch_size rows across the tables, starting at a
// different table each call so none starves.
func (s *Source) pollTables(ctx context.Context) (sdk.Batch, error) {
	if len(s.applyQueue) > 0 {
		if err := s.applyAcked(ctx); err != nil {
			return sdk.Batch{}, err
		}
	}
	st := s.committed.clone()
	if st.Tables == nil {
		st.Tables = map[string]*pollState{}
	}
	var msgs []sdk.Message
	remaining := s.cfg.BatchSize
	n := len(s.tables)
	for k := 0; k < n && remaining > 0; k++ {
		t := s.tables[(s.nextTable+k)%n]
		got, err := s.pollOne(ctx, s.plans[t.String()], st, remaining)
		if err != nil {
			return sdk.Batch{}, err
		}
		msgs = append(msgs, got...)
		remaining -= len(got)
	}
	s.nextTable = (s.nextTable + 1) % n
	if len(msgs) == 0 {
		s.sleep(ctx)
		return sdk.Batch{}, ctx.Err()
	}
	st.Pending = nil
	for _, op := range s.pendingApply {
		st.Pending = append(st.Pending, pendingState{Table: op.table.name.String(), Keys: op.keys})
	}
	return s.batch(msgs, st)
}

// pollOne reads one table's next rows and records the new position in st.
func (s *Source) pollOne(ctx context.Context, p *pollTable, st *state, limit int) ([]sdk.Message, error) {
	pos := st.Tables[p.name.String()]
	track := quoteIdent(p.track)
	var (
		conds  = []string{track + " IS NOT NULL"}
		params [][]byte
		order  = track
	)
	if p.processed != "" {
		conds = append(conds, p.procWhere)
	}
	switch {
	case pos != nil && pos.Value != nil && p.keyset && len(pos.PK) == len(p.pk):
		params = append(params, []byte(*pos.Value))
		for _, v := range pos.PK {
			params = append(params, []byte(v))
		}
		conds = append(conds, track+" >= $1", "("+track+", "+quoteList(p.pk)+") > ("+placeholders(1, 1+len(p.pk))+")")
	case pos != nil && pos.Value != nil:
		params = append(params, []byte(*pos.Value))
		conds = append(conds, track+" > $1")
	case s.cfg.InitialOffset != "":
		params = append(params, []byte(s.cfg.InitialOffset))
		conds = append(conds, track+" > $1")
	}
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
	res := s.conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		if pgErrorCode(res.Err) == "22P02" || pgErrorCode(res.Err) == "22007" || pgErrorCode(res.Err) == "22008" {
			return nil, permanent("initial_offset: %q is not a value of tracking column %q of %s: %v", s.cfg.InitialOffset, p.track, p.name, res.Err)
		}
		return nil, res.Err
	}
	if len(res.Rows) == 0 {
		return nil, nil
	}
	rel := s.relationFromFields(p.name, res.FieldDescriptions, p.pk)
	trackIdx := keyIndexes(rel.cols, []string{p.track})
	if trackIdx == nil {
		return nil, fmt.Errorf("tracking column %q missing from the result of %s", p.track, p.name)
	}
	ti := trackIdx[0]
	msgs := make([]sdk.Message, 0, len(res.Rows))
	var op *applyOp
	if p.processed != "" || s.cfg.DeleteAfterRead {
		op = &applyOp{table: p, keys: make([][]string, len(p.pk))}
	}
	for _, row := range res.Rows {
		msgs = append(msgs, s.rowMessage(rel, row, -1, opRead, ti))
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
	st.Tables[p.name.String()] = np
	if op != nil {
		s.pendingApply = append(s.pendingApply, *op)
	}
	return msgs, nil
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
