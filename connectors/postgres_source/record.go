package postgressource

import (
	"bytes"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/internal/jsonscan"
)

// Reserved payload keys. Columns are written at the top level so routing
// by any column works with a field path; these keys start with two
// underscores to keep clear of column names.
const (
	keyOp             = "__op"
	keyBefore         = "__before"
	keyTable          = "__table"
	keyLSN            = "__lsn"
	keyCommitTime     = "__commit_time"
	keyTrackingValue  = "__tracking_value"
	keyXID            = "__xid"
	keyTxOrder        = "__tx_order"
	unchangedToastVal = `{"__unchanged_toast":true}`
)

// column is one column of a relation, with its JSON key pre-encoded.
type column struct {
	name string
	key  []byte // `"name":`
	typ  *pgType
	// replica identity flag from a pgoutput Relation message
	identity bool
	// rule is what table_settings does to the column (settings.go); nil:
	// written as it is.
	rule *colRule
	// dbz is the column's type for record_format = "debezium"
	// (debezium.go); nil with the flat format.
	dbz *dbzType
}

// relation describes the columns of one table as a message or result
// delivers them.
type relation struct {
	table     string
	tableJSON []byte // `"schema.table"`
	cols      []column
	keyIdx    []int // columns of the primary key (or replica identity): positions, chunk identity
	recKey    []int // columns of the record key: keyIdx, or table_settings' key_columns
	skip      bool  // not one of the configured tables
	signal    bool  // signal_table (signal.go)
	// src is the Relation message a CDC relation was built from, to
	// build it again when a table joins tables (patterns.go).
	src    *pglogrepl.RelationMessage
	dbzTbl []byte // debezium.go: `,"schema":...,"table":...`
}

func newColumn(name string, typ *pgType) column {
	k := jsonscan.AppendString(nil, name)
	return column{name: name, key: append(k, ':'), typ: typ}
}

// arena hands out payload slices from blocks of arenaBlock bytes, so a
// batch costs a few allocations rather than one per record. A block is
// never reused: it lives as long as a record in it is referenced (by the
// runtime, until the batch is resolved), so what the arena keeps alive is
// bounded by the batch in flight plus one block.
//
// A record is appended to buf between begin and end. Blocks never grow: a
// record that does not fit makes append move the block, with a copy of
// every record before it, to an array 1.25x bigger; kept as the next
// block, that array grew again at the next record that did not fit, to
// tens or hundreds of MB. end gives such a record an allocation of its own
// instead, and begin starts a fresh block when less than arenaSlack is
// left, so that happens only for records larger than arenaSlack.
type arena struct {
	buf  []byte
	size int // cap of the block buf was made with; append changes it when it moves buf
}

// arenaBlock is the size of a fresh block.
const arenaBlock = 256 << 10

// arenaSlack is the room a block must have left for a record to start in
// it: more than most records, little enough to waste at a block's end.
const arenaSlack = 4 << 10

// begin starts a record at the end of buf and returns where it starts.
func (a *arena) begin() int {
	if a.size-len(a.buf) < arenaSlack {
		a.buf = make([]byte, 0, arenaBlock)
		a.size = cap(a.buf)
	}
	return len(a.buf)
}

// end returns the record appended to buf since begin returned start.
func (a *arena) end(start int) []byte {
	if cap(a.buf) == a.size {
		return a.buf[start:len(a.buf):len(a.buf)]
	}
	// It did not fit and buf moved: the record gets its own copy, the
	// moved array goes to the collector, and the next record a new block.
	rec := bytes.Clone(a.buf[start:])
	a.buf, a.size = nil, 0
	return rec[:len(rec):len(rec)]
}

// appendTuple appends the columns of a pgoutput tuple to an open JSON
// object. onlyIdentity writes only replica identity columns (a 'K' tuple).
// fill supplies values for unchanged TOAST columns when the old tuple has
// them.
func (e *encoder) appendTuple(buf []byte, rel *relation, t *tuple, onlyIdentity bool, fill *tuple) ([]byte, bool) {
	first := true
	for i, c := range t.cols {
		if i >= len(rel.cols) {
			break
		}
		col := &rel.cols[i]
		if onlyIdentity && !col.identity || col.dropped() {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, col.key...)
		switch c.kind {
		case 't':
			buf = e.appendCol(buf, col, c.data)
		case 'u':
			if fill != nil && i < len(fill.cols) && fill.cols[i].kind == 't' {
				buf = e.appendCol(buf, col, fill.cols[i].data)
			} else {
				buf = append(buf, unchangedToastVal...)
			}
		case 'b':
			if col.rule != nil {
				buf = e.appendCol(buf, col, c.data)
			} else {
				buf = jsonscan.AppendBytesString(buf, c.data)
			}
		default:
			buf = append(buf, "null"...)
		}
	}
	return buf, first
}

// appendTupleKey appends a key: a JSON object of the columns idx (the
// record key rel.recKey, or rel.keyIdx).
func (e *encoder) appendTupleKey(buf []byte, rel *relation, t *tuple, idx []int) []byte {
	buf = append(buf, '{')
	for n, i := range idx {
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, rel.cols[i].key...)
		if i < len(t.cols) && t.cols[i].kind == 't' {
			buf = e.appendCol(buf, &rel.cols[i], t.cols[i].data)
		} else {
			buf = append(buf, "null"...)
		}
	}
	return append(buf, '}')
}

// appendRow appends the columns of a query result row (text format, nil
// is NULL) to an open JSON object, skipping column index skipIdx (-1 for
// none).
func (e *encoder) appendRow(buf []byte, rel *relation, vals [][]byte, skipIdx int) []byte {
	first := true
	for i, v := range vals {
		if i == skipIdx || i >= len(rel.cols) || rel.cols[i].dropped() {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, rel.cols[i].key...)
		if v == nil {
			buf = append(buf, "null"...)
		} else {
			buf = e.appendCol(buf, &rel.cols[i], v)
		}
	}
	return buf
}

// appendRowKey appends a key: a JSON object of the columns idx of a query
// result row.
func (e *encoder) appendRowKey(buf []byte, rel *relation, vals [][]byte, idx []int) []byte {
	buf = append(buf, '{')
	for n, i := range idx {
		if n > 0 {
			buf = append(buf, ',')
		}
		buf = append(buf, rel.cols[i].key...)
		if vals[i] == nil {
			buf = append(buf, "null"...)
		} else {
			buf = e.appendCol(buf, &rel.cols[i], vals[i])
		}
	}
	return append(buf, '}')
}

// appendMeta appends `,"__op":op` and, with metadata on, the table and LSN
// and commit time, to an open JSON object that has at least one member
// when nonEmpty.
func appendOp(buf []byte, op string, nonEmpty bool) []byte {
	if nonEmpty {
		buf = append(buf, ',')
	}
	buf = append(buf, `"`+keyOp+`":"`...)
	buf = append(buf, op...)
	return append(buf, '"')
}

func appendCDCMeta(buf []byte, rel *relation, lsn pglogrepl.LSN, commit time.Time) []byte {
	buf = append(buf, `,"`+keyTable+`":`...)
	buf = append(buf, rel.tableJSON...)
	buf = append(buf, `,"`+keyLSN+`":"`...)
	buf = appendLSN(buf, lsn)
	buf = append(buf, `","`+keyCommitTime+`":"`...)
	buf = commit.UTC().AppendFormat(buf, time.RFC3339Nano)
	return append(buf, '"')
}

func appendLSN(buf []byte, lsn pglogrepl.LSN) []byte {
	buf = strconv.AppendUint(buf, uint64(lsn>>32), 16)
	buf = append(buf, '/')
	return strconv.AppendUint(buf, uint64(uint32(lsn)), 16)
}

// relationFromFields builds a relation from a query result's columns.
func (s *Source) relationFromFields(table tableName, fds []pgconn.FieldDescription, pk []string) *relation {
	rel := &relation{table: table.String(), tableJSON: jsonscan.AppendString(nil, table.String())}
	rel.cols = make([]column, len(fds))
	for i, fd := range fds {
		rel.cols[i] = newColumn(fd.Name, s.typeOf(fd.DataTypeOID))
		if s.dbz != nil {
			rel.cols[i].dbz = s.dbzTypeOf(fd.DataTypeOID, fd.TypeModifier)
		}
	}
	rel.keyIdx = keyIndexes(rel.cols, pk)
	s.applyRules(rel)
	return rel
}

// keyIndexes finds the named key columns; nil when any is missing.
func keyIndexes(cols []column, pk []string) []int {
	var idx []int
	for _, name := range pk {
		found := -1
		for i := range cols {
			if cols[i].name == name {
				found = i
				break
			}
		}
		if found < 0 {
			return nil
		}
		idx = append(idx, found)
	}
	return idx
}

// seal ends the record whose payload was appended to the arena since
// start (buf holds it) and appends its key in the arena: the columns
// rel.recKey of the tuple row, or else of the result row vals; no key when
// the relation has none.
func (s *Source) seal(buf []byte, start int, rel *relation, row *tuple, vals [][]byte) (payload, key []byte) {
	a := &s.arena
	a.buf = buf
	payload = a.end(start)
	if len(rel.recKey) == 0 {
		return payload, nil
	}
	start = a.begin()
	if row != nil {
		a.buf = s.enc.appendTupleKey(a.buf, rel, row, rel.recKey)
	} else {
		a.buf = s.enc.appendRowKey(a.buf, rel, vals, rel.recKey)
	}
	return payload, a.end(start)
}
