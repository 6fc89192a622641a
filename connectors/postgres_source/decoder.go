package postgressource

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// The pgoutput decoder: messages of a peek result or a replication stream
// to records.

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
	// The key as it is now: the new tuple (the old one for deletes).
	payload, key := s.seal(buf, start, rel, row, nil)
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
