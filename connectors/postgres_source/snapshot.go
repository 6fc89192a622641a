package postgressource

import (
	"context"
	"strconv"
	"strings"

	"github.com/picomq/pico-connectors/sdk"
)

// The initial snapshot.
//
// When this source creates the slot it does so on a replication connection
// with EXPORT_SNAPSHOT and imports that snapshot into a repeatable-read
// transaction: the rows read are exactly the database as of the slot's
// start, and the stream continues from there with nothing missed or
// repeated. Each table is read in primary-key order, batch_size rows at a
// time; the last key read is the candidate state, so the snapshot survives
// Nack (the same transaction re-reads the same rows) and restarts.
//
// An exported snapshot lives only as long as the transaction that imported
// it. After a restart, a reconnect, or with a slot that already existed,
// the snapshot continues from the stored key in a fresh repeatable-read
// transaction. That is still complete and at-least-once: the slot has not
// moved during the snapshot, so every change committed after the slot's
// start is streamed afterwards, and rows the fresh snapshot shows in their
// newer state converge to the same final state. A table without a primary
// key is read by ctid, which is only stable within one snapshot, so such
// a table restarts from its first row when its snapshot is resumed.

// beginSnapshot opens the snapshot transaction, importing name when set.
func (s *Source) beginSnapshot(ctx context.Context, name string) error {
	if err := s.exec(ctx, "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"); err != nil {
		return err
	}
	if name != "" {
		if err := s.exec(ctx, "SET TRANSACTION SNAPSHOT '"+strings.ReplaceAll(name, "'", "''")+"'"); err != nil {
			_ = s.exec(ctx, "ROLLBACK")
			return err
		}
		s.snapFresh = false
	} else {
		s.snapFresh = true
		// ctid positions of another snapshot mean nothing here.
		if snap := s.committed.Snapshot; snap != nil {
			for name, tp := range snap.Tables {
				if tp.CTID != "" && !tp.Done {
					s.log.Info("restarting the snapshot of a table without primary key", "table", name)
					tp.CTID = ""
				}
			}
		}
	}
	s.snapTx = true
	return nil
}

// pollSnapshot reads the next rows of the first unfinished table. With
// every table done and nothing read, it marks the snapshot done and
// closes the transaction.
func (s *Source) pollSnapshot(ctx context.Context) (sdk.Batch, error) {
	st := s.committed.clone()
	if st.Snapshot.Tables == nil {
		st.Snapshot.Tables = map[string]*snapTable{}
	}
	limit := s.cfg.BatchSize
	for _, t := range s.tables {
		tp := st.Snapshot.Tables[t.String()]
		if tp == nil {
			tp = &snapTable{}
			st.Snapshot.Tables[t.String()] = tp
		}
		if tp.Done {
			continue
		}
		info := s.info[t.String()]
		var (
			sql    string
			params [][]byte
		)
		if len(info.pk) > 0 {
			cols := quoteList(info.pk)
			sql = "SELECT * FROM " + t.quoted()
			if len(tp.After) == len(info.pk) {
				sql += " WHERE (" + cols + ") > (" + placeholders(1, len(info.pk)) + ")"
				for _, v := range tp.After {
					params = append(params, []byte(v))
				}
			}
			sql += " ORDER BY " + cols + " LIMIT " + strconv.Itoa(limit)
		} else if info.partitioned {
			// A ctid is unique within one partition only: the position is
			// the partition's OID and the ctid, as "oid:ctid".
			sql = "SELECT tableoid::oid::text || ':' || ctid::text, * FROM " + t.quoted()
			if oid, ctid, ok := strings.Cut(tp.CTID, ":"); ok {
				sql += " WHERE (tableoid, ctid) > ($1::oid, $2::tid)"
				params = append(params, []byte(oid), []byte(ctid))
			}
			sql += " ORDER BY tableoid, ctid LIMIT " + strconv.Itoa(limit)
		} else {
			sql = "SELECT ctid, * FROM " + t.quoted()
			if tp.CTID != "" {
				sql += " WHERE ctid > $1::tid"
				params = append(params, []byte(tp.CTID))
			}
			sql += " ORDER BY ctid LIMIT " + strconv.Itoa(limit)
		}
		res := s.conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
		if res.Err != nil {
			return sdk.Batch{}, res.Err
		}
		skip := -1
		if len(info.pk) == 0 {
			skip = 0
		}
		rel := s.relationFromFields(t, res.FieldDescriptions, info.pk)
		msgs := make([]sdk.Message, 0, len(res.Rows))
		for _, row := range res.Rows {
			msgs = append(msgs, s.rowMessage(rel, row, skip, opRead, -1, rowSnapshot))
		}
		if n := len(res.Rows); n > 0 {
			last := res.Rows[n-1]
			if skip == 0 {
				tp.CTID = string(last[0])
			} else {
				tp.After = tp.After[:0]
				for _, i := range rel.keyIdx {
					tp.After = append(tp.After, string(last[i]))
				}
			}
		}
		if len(res.Rows) < limit {
			tp.Done = true
		}
		if len(msgs) > 0 {
			st.Snapshot.Done = allDone(st.Snapshot, s.tables)
			return s.batch(msgs, st)
		}
	}
	// Every table is read: the stream takes over. Nothing here needs
	// delivering, so the new state is committed in memory only.
	st.Snapshot.Done = true
	s.committed = st
	if s.snapTx {
		if err := s.exec(ctx, "COMMIT"); err != nil {
			return sdk.Batch{}, err
		}
		s.snapTx = false
	}
	s.log.Info("initial snapshot complete")
	return sdk.Batch{}, nil
}

func allDone(snap *snapState, tables []tableName) bool {
	for _, t := range tables {
		if tp := snap.Tables[t.String()]; tp == nil || !tp.Done {
			return false
		}
	}
	return true
}

// rowMessage encodes a result row as a record. trackIdx names the
// tracking column for __tracking_value (-1: none).
func (s *Source) rowMessage(rel *relation, row [][]byte, skip int, op string, trackIdx int, from rowSource) sdk.Message {
	if s.dbz != nil {
		return s.rowMessageDbz(rel, row, skip, from)
	}
	a := &s.arena
	start := a.begin()
	buf := append(a.buf, '{')
	open := len(buf)
	buf = s.enc.appendRow(buf, rel, row, skip)
	buf = appendOp(buf, op, len(buf) > open)
	if s.cfg.IncludeMetadata {
		buf = append(buf, `,"`+keyTable+`":`...)
		buf = append(buf, rel.tableJSON...)
		if trackIdx >= 0 && !rel.cols[trackIdx].dropped() {
			buf = append(buf, `,"`+keyTrackingValue+`":`...)
			if row[trackIdx] == nil {
				buf = append(buf, "null"...)
			} else {
				buf = s.enc.appendCol(buf, &rel.cols[trackIdx], row[trackIdx])
			}
		}
	}
	buf = append(buf, '}')
	payload, key := s.seal(buf, start, rel, nil, row)
	return sdk.Message{Key: key, Payload: payload}
}

func quoteList(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = quoteIdent(n)
	}
	return strings.Join(q, ", ")
}

// placeholders returns "$from, ..., $from+n-1".
func placeholders(from, n int) string {
	p := make([]string, n)
	for i := range p {
		p[i] = "$" + strconv.Itoa(from+i)
	}
	return strings.Join(p, ", ")
}
