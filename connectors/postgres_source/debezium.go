package postgressource

import (
	"encoding/base64"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// record_format = "debezium": Debezium's PostgreSQL change event, as its
// JSON converter writes it with schemas disabled (value.converter.
// schemas.enable = false):
//
//	{"before":{...}|null,"after":{...}|null,
//	 "source":{"version","connector":"postgresql","name","ts_ms","snapshot","db","sequence",
//	           "ts_us","ts_ns","schema","table","txId","lsn","xmin"},
//	 "transaction":null|{"id","total_order","data_collection_order"},
//	 "op":"c"|"u"|"d"|"r"|"t","ts_ms","ts_us","ts_ns"}
//
// The fields are in the order of Debezium's schemas (Envelope, and
// io.debezium.connector.postgresql.Source), optional fields written as
// null as the converter does. Values follow Debezium's defaults with
// decimal.handling.mode = string (dbzValue below); the README's table
// lists where this source differs.

// dbzConnector is source.connector.
const dbzConnector = "postgresql"

// dbzUnavailable is Debezium's unavailable.value.placeholder: an unchanged
// TOASTed value that the change does not carry.
const dbzUnavailable = "__debezium_unavailable_value"

// Debezium's values for timestamp infinity (PGStatement.DATE_POSITIVE_INFINITY
// and DATE_NEGATIVE_INFINITY, as its documentation gives them).
const (
	dbzPosInfinityTS = "9223372036825200000"
	dbzNegInfinityTS = "-9223372036832400000"
)

// dbzKind says how the text form of a value becomes Debezium's JSON.
type dbzKind uint8

const (
	dzString      dbzKind = iota // JSON string of the text form
	dzBool                       // t/f
	dzInt                        // integer literal
	dzFloat                      // float literal; NaN and infinities as strings
	dzNumeric                    // decimal.handling.mode = string: "1.50", "NAN", "POSITIVE_INFINITY"
	dzMoney                      // as numeric, from the locale's text form ("$1,234.50" → "1234.50")
	dzJSON                       // io.debezium.data.Json: the document as a string
	dzBytea                      // bytes: base64
	dzTimestamp                  // MicroTimestamp (Timestamp: millis, for precision 0-3)
	dzTimestampTZ                // ZonedTimestamp: ISO 8601 in UTC, precision digits of fraction
	dzDate                       // io.debezium.time.Date: days since the epoch
	dzTime                       // MicroTime (Time: millis, for precision 0-3)
	dzTimeTZ                     // ZonedTime: ISO 8601 in UTC
	dzInterval                   // MicroDuration: microseconds, 365.25/12 days a month
	dzBit                        // bit(1), varbit(1): boolean
	dzBits                       // bit(n), varbit: little-endian bytes, base64
	dzPoint                      // io.debezium.data.geometry.Point: {x, y, wkb, srid}
	dzArray                      // JSON array of the element's values
)

// dbzType is what the Debezium encoder knows of one column type.
type dbzType struct {
	kind  dbzKind
	prec  int // time types: fractional digits (-1: unset, 6); bit types: length (-1: unset)
	elem  *dbzType
	delim byte
}

// catType is one row of pg_type for OIDs of 10000 and up (loadTypes).
type catType struct {
	typtype, category, delim byte
	elem, base               uint32
	typmod                   int32 // a domain's typmod of its base type
}

// dbzBuiltin maps built-in scalar OIDs to their kind; the time and bit
// types take their precision from the column's type modifier.
var dbzBuiltin = map[uint32]dbzKind{
	16: dzBool, 17: dzBytea, 20: dzInt, 21: dzInt, 23: dzInt, 26: dzInt,
	700: dzFloat, 701: dzFloat, 1700: dzNumeric, 790: dzMoney, 114: dzJSON, 3802: dzJSON,
	1114: dzTimestamp, 1184: dzTimestampTZ, 1082: dzDate, 1083: dzTime, 1266: dzTimeTZ,
	1186: dzInterval, 1560: dzBits, 1562: dzBits, 600: dzPoint,
}

// dbzTypeOf resolves the Debezium type of a column of type oid with type
// modifier typmod: domains as their base type (with the domain's modifier
// when the column has none), arrays by their element, enums and anything
// else unknown as their text form.
func (s *Source) dbzTypeOf(oid uint32, typmod int32) *dbzType {
	return s.dbzResolve(oid, typmod, 0)
}

func (s *Source) dbzResolve(oid uint32, typmod int32, depth int) *dbzType {
	if k, ok := dbzBuiltin[oid]; ok {
		t := &dbzType{kind: k, prec: int(typmod)}
		if (k == dzBits) && typmod == 1 {
			t.kind = dzBit
		}
		return t
	}
	if elem, ok := builtinArrays[oid]; ok {
		return &dbzType{kind: dzArray, elem: s.dbzResolve(elem, typmod, depth+1), delim: ','}
	}
	if oid == 1020 { // box[] uses ';'
		return &dbzType{kind: dzArray, elem: &dbzType{kind: dzString}, delim: ';'}
	}
	c, ok := s.catTypes[oid]
	if !ok || depth > 10 {
		return &dbzType{kind: dzString}
	}
	switch {
	case c.typtype == 'd':
		if typmod < 0 {
			typmod = c.typmod
		}
		return s.dbzResolve(c.base, typmod, depth+1)
	case c.category == 'A' && c.elem != 0:
		delim := c.delim
		if delim == 0 {
			delim = ','
		}
		return &dbzType{kind: dzArray, elem: s.dbzResolve(c.elem, typmod, depth+1), delim: delim}
	}
	return &dbzType{kind: dzString}
}

// dbzFormat is the source's Debezium settings.
type dbzFormat struct {
	head []byte // `"version":"...","connector":"postgresql","name":"..."`
	db   []byte // JSON string of current_database(), set on connect
}

func newDbzFormat(name string) *dbzFormat {
	f := &dbzFormat{}
	f.head = append(f.head, `"version":`...)
	f.head = jsonscan.AppendString(f.head, "pico-connectors "+sdk.Version())
	f.head = append(f.head, `,"connector":"`+dbzConnector+`","name":`...)
	f.head = jsonscan.AppendString(f.head, name)
	f.db = []byte(`""`)
	return f
}

// appendDbz appends the Debezium JSON of the non-NULL text value v.
func (e *encoder) appendDbz(buf []byte, t *dbzType, v []byte) []byte {
	switch t.kind {
	case dzBool:
		if len(v) == 1 && (v[0] == 't' || v[0] == 'f') {
			if v[0] == 't' {
				return append(buf, "true"...)
			}
			return append(buf, "false"...)
		}
	case dzInt, dzFloat:
		if isNumberLiteral(v) {
			return append(buf, v...)
		}
	case dzNumeric:
		return appendDbzDecimal(buf, v)
	case dzMoney:
		return appendDbzMoney(buf, v)
	case dzJSON:
		return jsonscan.AppendBytesString(buf, v)
	case dzBytea:
		return e.appendValue(buf, byteaType, v)
	case dzTimestamp:
		if out, ok := appendDbzTimestamp(buf, v, t.prec); ok {
			return out
		}
	case dzTimestampTZ:
		if out, ok := appendDbzTimestampTZ(buf, v, t.prec); ok {
			return out
		}
	case dzDate:
		if y, m, d, n, ok := parseDate(v); ok && n == len(v) {
			return strconv.AppendInt(buf, daysFromCivil(y, m, d), 10)
		}
	case dzTime:
		if us, n, ok := parseClock(v); ok && n == len(v) {
			if t.prec >= 0 && t.prec <= 3 {
				return strconv.AppendInt(buf, us/1000, 10)
			}
			return strconv.AppendInt(buf, us, 10)
		}
	case dzTimeTZ:
		if out, ok := appendDbzTimeTZ(buf, v); ok {
			return out
		}
	case dzInterval:
		if us, ok := parseISOInterval(v); ok {
			return strconv.AppendInt(buf, us, 10)
		}
	case dzBit:
		if len(v) == 1 && (v[0] == '0' || v[0] == '1') {
			if v[0] == '1' {
				return append(buf, "true"...)
			}
			return append(buf, "false"...)
		}
	case dzBits:
		if out, ok := appendDbzBits(buf, v); ok {
			return out
		}
	case dzPoint:
		if out, ok := appendDbzPoint(buf, v); ok {
			return out
		}
	case dzArray:
		if out, ok := e.appendDbzArray(buf, t, v); ok {
			return out
		}
	}
	return jsonscan.AppendBytesString(buf, v)
}

var byteaType = &pgType{kind: kindBytea}

// appendDbzUnavailable appends Debezium's placeholder for an unchanged
// TOASTed value of type t (UnchangedToastedPlaceholder): the string, its
// bytes for bytea, a one-element list for arrays of text-like and bytea
// elements, the placeholder's bytes as numbers for integer arrays.
func appendDbzUnavailable(buf []byte, t *dbzType) []byte {
	switch {
	case t.kind == dzBytea:
		buf = append(buf, '"')
		buf = base64.StdEncoding.AppendEncode(buf, []byte(dbzUnavailable))
		return append(buf, '"')
	case t.kind == dzArray && t.elem.kind == dzInt:
		buf = append(buf, '[')
		for i := 0; i < len(dbzUnavailable); i++ {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = strconv.AppendInt(buf, int64(dbzUnavailable[i]), 10)
		}
		return append(buf, ']')
	case t.kind == dzArray:
		buf = append(buf, '[')
		buf = appendDbzUnavailable(buf, t.elem)
		return append(buf, ']')
	}
	return append(buf, `"`+dbzUnavailable+`"`...)
}

// appendDbzArray turns the text form of an array into nested JSON arrays
// of the element's Debezium values.
func (e *encoder) appendDbzArray(buf []byte, t *dbzType, v []byte) ([]byte, bool) {
	return parseArray(buf, v, t.delim, func(buf, item []byte) []byte { return e.appendDbz(buf, t.elem, item) })
}

// appendDbzTuple appends a row image of a pgoutput tuple as a JSON object:
// every column the value keeps (a 'K' tuple's columns outside the replica
// identity are null, as in Debezium's before), an unchanged TOASTed value
// from fill when it has it, else Debezium's placeholder.
func (e *encoder) appendDbzTuple(buf []byte, rel *relation, t *tuple, fill *tuple) []byte {
	buf = append(buf, '{')
	first := true
	for i := range rel.cols {
		col := &rel.cols[i]
		if col.dropped() {
			continue
		}
		if !first {
			buf = append(buf, ',')
		}
		first = false
		buf = append(buf, col.key...)
		if i >= len(t.cols) {
			buf = append(buf, "null"...)
			continue
		}
		c := t.cols[i]
		switch c.kind {
		case 't', 'b':
			buf = e.appendCol(buf, col, c.data)
		case 'u':
			if fill != nil && i < len(fill.cols) && fill.cols[i].kind == 't' {
				buf = e.appendCol(buf, col, fill.cols[i].data)
			} else if col.rule != nil && col.rule.mask != nil {
				buf = append(buf, col.rule.mask...)
			} else {
				buf = appendDbzUnavailable(buf, col.dbz)
			}
		default:
			buf = append(buf, "null"...)
		}
	}
	return append(buf, '}')
}

// dbzSource is what one record's source block says beyond the table.
type dbzSource struct {
	ts       time.Time // commit time (CDC), read time (snapshot, polling)
	snapshot string    // "true", "incremental", "false"
	cdc      bool      // txId, lsn and sequence are known
	xid      uint32
	lsn      pglogrepl.LSN
	prevLSN  pglogrepl.LSN // commit LSN of the transaction before (sequence); 0: null
}

// appendDbzSource appends `"source":{...}`.
func (f *dbzFormat) appendSource(buf []byte, rel *relation, src *dbzSource) []byte {
	buf = append(buf, `"source":{`...)
	buf = append(buf, f.head...)
	ts := src.ts
	buf = append(buf, `,"ts_ms":`...)
	buf = strconv.AppendInt(buf, ts.UnixMilli(), 10)
	buf = append(buf, `,"snapshot":"`...)
	buf = append(buf, src.snapshot...)
	buf = append(buf, `","db":`...)
	buf = append(buf, f.db...)
	buf = append(buf, `,"sequence":`...)
	if src.cdc {
		buf = append(buf, `"[`...)
		if src.prevLSN == 0 {
			buf = append(buf, "null"...)
		} else {
			buf = append(buf, `\"`...)
			buf = strconv.AppendUint(buf, uint64(src.prevLSN), 10)
			buf = append(buf, `\"`...)
		}
		buf = append(buf, `,\"`...)
		buf = strconv.AppendUint(buf, uint64(src.lsn), 10)
		buf = append(buf, `\"]"`...)
	} else {
		buf = append(buf, "null"...)
	}
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, ts.UnixMicro(), 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, ts.UnixNano(), 10)
	buf = append(buf, rel.dbzTable()...)
	if src.cdc {
		buf = append(buf, `,"txId":`...)
		buf = strconv.AppendUint(buf, uint64(src.xid), 10)
		buf = append(buf, `,"lsn":`...)
		buf = strconv.AppendUint(buf, uint64(src.lsn), 10)
	} else {
		buf = append(buf, `,"txId":null,"lsn":null`...)
	}
	return append(buf, `,"xmin":null}`...)
}

// dbzTable is `,"schema":"...","table":"..."`, made once per relation.
func (rel *relation) dbzTable() []byte {
	if rel.dbzTbl == nil {
		schema, name := rel.table, ""
		if t, err := parseTable(rel.table); err == nil {
			schema, name = t.Schema, t.Name
		} else if i := lastDot(rel.table); i >= 0 {
			schema, name = rel.table[:i], rel.table[i+1:]
		}
		b := append([]byte(nil), `,"schema":`...)
		b = jsonscan.AppendString(b, schema)
		b = append(b, `,"table":`...)
		b = jsonscan.AppendString(b, name)
		rel.dbzTbl = b
	}
	return rel.dbzTbl
}

func lastDot(s string) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '.' {
			return i
		}
	}
	return -1
}

// appendTail appends `,"transaction":...,"op":"x","ts_ms":...,"ts_us":...,"ts_ns":...}`,
// the time being now (when the record was made, as Debezium's is when it
// processed the event).
func appendDbzTail(buf []byte, tx []byte, op byte, now time.Time) []byte {
	buf = append(buf, `,"transaction":`...)
	if tx == nil {
		buf = append(buf, "null"...)
	} else {
		buf = append(buf, tx...)
	}
	buf = append(buf, `,"op":"`...)
	buf = append(buf, op)
	buf = append(buf, `","ts_ms":`...)
	buf = strconv.AppendInt(buf, now.UnixMilli(), 10)
	buf = append(buf, `,"ts_us":`...)
	buf = strconv.AppendInt(buf, now.UnixMicro(), 10)
	buf = append(buf, `,"ts_ns":`...)
	buf = strconv.AppendInt(buf, now.UnixNano(), 10)
	return append(buf, '}')
}

// emitDbz writes the Debezium record(s) of one change. For deletes, row is
// the old tuple; keyOnly says a tuple of the old row holds only the
// replica identity columns.
func (d *decoder) emitDbz(rel *relation, op string, lsn pglogrepl.LSN, row, old *tuple, keyOnly bool) {
	s := d.s
	src := dbzSource{ts: d.commit, snapshot: "false", cdc: true, xid: d.xid, lsn: lsn, prevLSN: d.prevTx}
	switch op {
	case opInsert:
		d.dbzRecord(rel, 'c', &src, nil, row, nil, row, nil)
	case opDelete:
		d.dbzRecord(rel, 'd', &src, row, nil, nil, row, nil)
	case opUpdate:
		var fill *tuple
		if old != nil && !keyOnly {
			fill = old
		}
		if old != nil && len(rel.recKey) > 0 && (!keyOnly || identityKey(rel)) {
			oldKey := s.enc.appendTupleKey(nil, rel, old, rel.recKey)
			newKey := s.enc.appendTupleKey(nil, rel, row, rel.recKey)
			if string(oldKey) != string(newKey) {
				// A key change: Debezium sends a delete of the old key and
				// a create of the new one, each naming the other key.
				d.dbzRecord(rel, 'd', &src, old, nil, nil, old, []sdk.Header{{Key: "__debezium.newkey", Value: newKey}})
				d.count(rel) // two records of one change
				d.dbzRecord(rel, 'c', &src, nil, row, fill, row, []sdk.Header{{Key: "__debezium.oldkey", Value: oldKey}})
				return
			}
		}
		d.dbzRecord(rel, 'u', &src, old, row, fill, row, nil)
	}
}

// identityKey reports whether every record key column is a replica
// identity column, so a 'K' tuple carries the old key.
func identityKey(rel *relation) bool {
	for _, i := range rel.recKey {
		if !rel.cols[i].identity {
			return false
		}
	}
	return true
}

// dbzRecord appends one Debezium change record; keyRow is the tuple the
// key is taken from.
func (d *decoder) dbzRecord(rel *relation, op byte, src *dbzSource, before, after, fill, keyRow *tuple, headers []sdk.Header) {
	s := d.s
	a := &s.arena
	start := a.begin()
	buf := append(a.buf, `{"before":`...)
	if before == nil {
		buf = append(buf, "null"...)
	} else {
		buf = s.enc.appendDbzTuple(buf, rel, before, nil)
	}
	buf = append(buf, `,"after":`...)
	if after == nil {
		buf = append(buf, "null"...)
	} else {
		buf = s.enc.appendDbzTuple(buf, rel, after, fill)
	}
	buf = append(buf, ',')
	buf = s.dbz.appendSource(buf, rel, src)
	buf = appendDbzTail(buf, d.dbzTx(rel, src.lsn), op, time.Now())
	payload, key := s.seal(buf, start, rel, keyRow, nil)
	d.msgs = append(d.msgs, sdk.Message{Key: key, Payload: payload, Headers: headers, Timestamp: d.commit})
}

// emitDbzTruncate writes a truncate record: no key, before and after null.
func (d *decoder) emitDbzTruncate(rel *relation, lsn pglogrepl.LSN) {
	s := d.s
	src := dbzSource{ts: d.commit, snapshot: "false", cdc: true, xid: d.xid, lsn: lsn, prevLSN: d.prevTx}
	buf := []byte(`{"before":null,"after":null,`)
	buf = s.dbz.appendSource(buf, rel, &src)
	buf = appendDbzTail(buf, d.dbzTx(rel, lsn), 't', time.Now())
	d.msgs = append(d.msgs, sdk.Message{Payload: buf, Timestamp: d.commit})
}

// dbzTx is the transaction block of the record being written, as
// Debezium's provide.transaction.metadata writes it: the ID is
// "txId:LSN" with the event's LSN (PostgresTransactionMonitor), the orders
// count from 1.
func (d *decoder) dbzTx(rel *relation, lsn pglogrepl.LSN) []byte {
	b := d.txBuf[:0]
	b = append(b, `{"id":"`...)
	b = strconv.AppendUint(b, uint64(d.xid), 10)
	b = append(b, ':')
	b = strconv.AppendUint(b, uint64(lsn), 10)
	b = append(b, `","total_order":`...)
	b = strconv.AppendInt(b, int64(d.txOrder), 10)
	b = append(b, `,"data_collection_order":`...)
	b = strconv.AppendInt(b, int64(d.txTables[rel.table]), 10)
	d.txBuf = append(b, '}')
	return d.txBuf
}

// rowSource says where a query result row comes from.
type rowSource uint8

const (
	rowSnapshot    rowSource = iota // the initial snapshot
	rowIncremental                  // an incremental snapshot chunk
	rowPolling                      // polling
)

// rowMessageDbz encodes a query result row as a Debezium read record (op
// r); txId and lsn are null, as in Debezium's incremental snapshots.
func (s *Source) rowMessageDbz(rel *relation, row [][]byte, skip int, from rowSource) sdk.Message {
	now := time.Now()
	src := dbzSource{ts: now, snapshot: "true"}
	switch from {
	case rowIncremental:
		src.snapshot = "incremental"
	case rowPolling:
		src.snapshot = "false"
	}
	a := &s.arena
	start := a.begin()
	buf := append(a.buf, `{"before":null,"after":`...)
	buf = append(buf, '{')
	buf = s.enc.appendRow(buf, rel, row, skip) // appendCol writes Debezium values
	buf = append(buf, "},"...)
	buf = s.dbz.appendSource(buf, rel, &src)
	buf = appendDbzTail(buf, nil, 'r', now)
	payload, key := s.seal(buf, start, rel, nil, row)
	return sdk.Message{Key: key, Payload: payload}
}
