package postgressource

import (
	"fmt"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/picomq/pico-connectors/sdk"
)

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
	lastEnd pglogrepl.LSN // end of the last whole transaction read
	change  change        // reused for every tuple message

	inTxn   bool          // between a Begin and its Commit
	txFinal pglogrepl.LSN // commit LSN of the open transaction
	txSeen  int           // its records so far, skipped ones included
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
		d.inTxn, d.txFinal, d.txSeen = true, m.FinalLSN, 0
	case *pglogrepl.CommitMessage:
		d.inTxn = false
		if m.TransactionEndLSN > d.lastEnd {
			d.lastEnd = m.TransactionEndLSN
		}
	case *pglogrepl.RelationMessage:
		d.rels[m.RelationID] = s.relationFromMessage(m)
	case *pglogrepl.LogicalDecodingMessage:
		s.watermark(m)
	case *pglogrepl.TruncateMessage:
		for _, id := range m.RelationIDs {
			if rel := d.rel(id, opTruncate); rel != nil {
				d.emitTruncate(rel, lsn)
			}
		}
	}
	return nil
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
	if d.resumeRows > 0 && d.txFinal == d.resumeLSN && d.txSeen <= d.resumeRows {
		return nil
	}
	return rel
}

// emit writes one change record. For deletes, tuple is the old tuple;
// keyOnly says it holds only the replica identity columns.
func (d *decoder) emit(rel *relation, op string, lsn pglogrepl.LSN, row, old *tuple, keyOnly bool) {
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
	}
	buf = append(buf, '}')
	a.buf = buf
	payload := a.end(start)
	var key []byte
	if len(rel.keyIdx) > 0 {
		// The key as it is now: the new tuple (the old one for deletes).
		start = a.begin()
		a.buf = s.enc.appendTupleKey(a.buf, rel, row)
		key = a.end(start)
	}
	d.msgs = append(d.msgs, sdk.Message{Key: key, Payload: payload, Timestamp: d.commit})
	if s.chunk != nil {
		s.chunkSaw(rel, key, false)
		if old != nil && op == opUpdate {
			s.chunkSaw(rel, s.enc.appendTupleKey(nil, rel, old), false)
		}
	}
}

func (d *decoder) emitTruncate(rel *relation, lsn pglogrepl.LSN) {
	s := d.s
	buf := []byte(`{"` + keyOp + `":"truncate","` + keyTable + `":`)
	buf = append(buf, rel.tableJSON...)
	if s.cfg.IncludeMetadata {
		buf = append(buf, `,"`+keyLSN+`":"`...)
		buf = appendLSN(buf, lsn)
		buf = append(buf, `","`+keyCommitTime+`":"`...)
		buf = d.commit.UTC().AppendFormat(buf, time.RFC3339Nano)
		buf = append(buf, '"')
	}
	buf = append(buf, '}')
	d.msgs = append(d.msgs, sdk.Message{Payload: buf, Timestamp: d.commit})
	s.chunkSaw(rel, nil, true)
}

// relationFromMessage builds a relation from a pgoutput Relation message;
// the record key is the table's primary key, or the replica identity
// columns when it has none.
func (s *Source) relationFromMessage(m *pglogrepl.RelationMessage) *relation {
	table := tableName{m.Namespace, m.RelationName}
	rel := &relation{table: table.String(), tableJSON: appendStringS(nil, table.String())}
	rel.skip = !s.inSet[rel.table]
	rel.cols = make([]column, len(m.Columns))
	var identity []string
	for i, c := range m.Columns {
		rel.cols[i] = newColumn(c.Name, s.typeOf(c.DataType))
		rel.cols[i].identity = c.Flags&1 == 1
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
	return rel
}
