package postgressource

import (
	"encoding/base64"
	"encoding/binary"
	"math"
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

// appendDbzDecimal writes a numeric as decimal.handling.mode = string
// does: BigDecimal.toPlainString (the digits PostgreSQL gives), or the
// special value's name.
func appendDbzDecimal(buf, v []byte) []byte {
	switch string(v) {
	case "NaN":
		return append(buf, `"NAN"`...)
	case "Infinity":
		return append(buf, `"POSITIVE_INFINITY"`...)
	case "-Infinity":
		return append(buf, `"NEGATIVE_INFINITY"`...)
	}
	return jsonscan.AppendBytesString(buf, v)
}

// appendDbzMoney turns money's text form, which follows lc_monetary
// ("$1,234.50", "-$1.00", "($1.00)"), into the plain decimal Debezium's
// string mode writes ("1234.50"). It assumes '.' is the decimal point.
func appendDbzMoney(buf, v []byte) []byte {
	neg := false
	digits := make([]byte, 0, len(v))
	for _, c := range v {
		switch {
		case c >= '0' && c <= '9', c == '.':
			digits = append(digits, c)
		case c == '-' || c == '(':
			neg = true
		}
	}
	if len(digits) == 0 {
		return jsonscan.AppendBytesString(buf, v)
	}
	buf = append(buf, '"')
	if neg {
		buf = append(buf, '-')
	}
	buf = append(buf, digits...)
	return append(buf, '"')
}

// parseDate reads "YYYY-MM-DD" (four or more year digits) with an
// optional " BC" at the very end of v, returning how many bytes of v it
// used before any time part (BC is only taken at the end).
func parseDate(v []byte) (y, m, d int64, n int, ok bool) {
	i := 0
	for i < len(v) && v[i] >= '0' && v[i] <= '9' {
		y = y*10 + int64(v[i]-'0')
		i++
	}
	if i < 4 || i > 7 || i+6 > len(v) || v[i] != '-' || v[i+3] != '-' {
		return 0, 0, 0, 0, false
	}
	m, ok1 := two(v[i+1:])
	d, ok2 := two(v[i+4:])
	if !ok1 || !ok2 {
		return 0, 0, 0, 0, false
	}
	n = i + 6
	if len(v) >= 3 && string(v[len(v)-3:]) == " BC" {
		y = 1 - y // 1 BC is year 0
		if n == len(v)-3 {
			n = len(v)
		}
	}
	return y, m, d, n, true
}

func two(b []byte) (int64, bool) {
	if len(b) < 2 || b[0] < '0' || b[0] > '9' || b[1] < '0' || b[1] > '9' {
		return 0, false
	}
	return int64(b[0]-'0')*10 + int64(b[1]-'0'), true
}

// daysFromCivil is the number of days from 1970-01-01 to y-m-d in the
// proleptic Gregorian calendar (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// parseClock reads "HH:MM:SS[.ffffff]" into microseconds past midnight,
// returning how many bytes it used.
func parseClock(v []byte) (us int64, n int, ok bool) {
	if len(v) < 8 || v[2] != ':' || v[5] != ':' {
		return 0, 0, false
	}
	h, ok1 := two(v)
	mi, ok2 := two(v[3:])
	s, ok3 := two(v[6:])
	if !ok1 || !ok2 || !ok3 {
		return 0, 0, false
	}
	us = ((h*60+mi)*60 + s) * 1_000_000
	n = 8
	if n < len(v) && v[n] == '.' {
		n++
		scale := int64(100_000)
		start := n
		for n < len(v) && v[n] >= '0' && v[n] <= '9' {
			us += int64(v[n]-'0') * scale
			scale /= 10
			n++
		}
		if n == start || n-start > 6 {
			return 0, 0, false
		}
	}
	return us, n, true
}

// parseTimestamp reads "YYYY-MM-DD HH:MM:SS[.ffffff][ BC]" into
// microseconds since the epoch, taken as UTC, returning how many bytes it
// used before a zone offset.
func parseTimestamp(v []byte) (us int64, n int, ok bool) {
	bc := len(v) >= 3 && string(v[len(v)-3:]) == " BC"
	body := v
	if bc {
		body = v[:len(v)-3]
	}
	y, m, d, n, ok := parseDate(body)
	if !ok || n >= len(body) || body[n] != ' ' {
		return 0, 0, false
	}
	if bc {
		y = 1 - y
	}
	clock, k, ok := parseClock(body[n+1:])
	if !ok {
		return 0, 0, false
	}
	n += 1 + k
	if bc && n != len(body) {
		return 0, 0, false // a zone before " BC": not for the fast path
	}
	return daysFromCivil(y, m, d)*86_400_000_000 + clock, n, true
}

// appendDbzTimestamp writes a timestamp without time zone as epoch
// microseconds (MicroTimestamp), or milliseconds (Timestamp) for a
// precision of 0 to 3, as time.precision.mode = adaptive does.
func appendDbzTimestamp(buf, v []byte, prec int) ([]byte, bool) {
	switch string(v) {
	case "infinity":
		return append(buf, dbzPosInfinityTS...), true
	case "-infinity":
		return append(buf, dbzNegInfinityTS...), true
	}
	us, n, ok := parseTimestamp(v)
	if !ok || n != len(v) && !(len(v)-n == 3 && string(v[n:]) == " BC") {
		return buf, false
	}
	if prec >= 0 && prec <= 3 {
		ms := us / 1000
		if us%1000 < 0 {
			ms-- // floor, as Instant.toEpochMilli does
		}
		return strconv.AppendInt(buf, ms, 10), true
	}
	return strconv.AppendInt(buf, us, 10), true
}

// appendDbzTimestampTZ writes a timestamptz as ZonedTimestamp does: ISO
// 8601 in UTC, with exactly prec digits of fraction (6 when the column has
// no precision; none for precision 0). Infinity stays "infinity". Years
// outside 0001-9999 are left to the caller (the text form).
func appendDbzTimestampTZ(buf, v []byte, prec int) ([]byte, bool) {
	switch string(v) {
	case "infinity", "-infinity":
		return jsonscan.AppendBytesString(buf, v), true
	}
	us, n, ok := parseTimestamp(v)
	if !ok || n >= len(v) {
		return buf, false
	}
	off, ok := parseOffset(v[n:])
	if !ok {
		return buf, false
	}
	us -= off * 1_000_000
	days := floorDiv(us, 86_400_000_000)
	clock := us - days*86_400_000_000
	y, m, d := civilFromDays(days)
	if y < 1 || y > 9999 {
		return buf, false
	}
	if prec < 0 || prec > 6 {
		prec = 6
	}
	buf = append(buf, '"')
	buf = appendDigits(buf, y, 4)
	buf = append(buf, '-')
	buf = appendDigits(buf, m, 2)
	buf = append(buf, '-')
	buf = appendDigits(buf, d, 2)
	buf = append(buf, 'T')
	buf = appendClock(buf, clock, prec, false)
	return append(buf, 'Z', '"'), true
}

// appendClock appends HH:MM:SS and the fraction: exactly width digits, or
// with trim, the digits up to the last non-zero one (Java's ISO format).
func appendClock(buf []byte, us int64, width int, trim bool) []byte {
	sec := us / 1_000_000
	frac := us % 1_000_000
	buf = appendDigits(buf, sec/3600, 2)
	buf = append(buf, ':')
	buf = appendDigits(buf, sec/60%60, 2)
	buf = append(buf, ':')
	buf = appendDigits(buf, sec%60, 2)
	if trim {
		width = 6
		for width > 0 && frac%10 == 0 {
			frac /= 10
			width--
		}
		if width == 0 {
			return buf
		}
		return appendDigits(append(buf, '.'), frac, width)
	}
	if width == 0 {
		return buf
	}
	for i := width; i < 6; i++ {
		frac /= 10
	}
	return appendDigits(append(buf, '.'), frac, width)
}

func appendDigits(buf []byte, n int64, width int) []byte {
	var tmp [20]byte
	i := len(tmp)
	for n > 0 || i > len(tmp)-width {
		i--
		tmp[i] = byte('0' + n%10)
		n /= 10
	}
	return append(buf, tmp[i:]...)
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b < 0 {
		q--
	}
	return q
}

// civilFromDays is the inverse of daysFromCivil.
func civilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z
	if era < 0 {
		era -= 146096
	}
	era /= 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	m = mp + 3
	if m > 12 {
		m -= 12
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// parseOffset reads a zone offset "+HH", "-HH:MM" or "+HH:MM:SS" that
// makes up all of v, in seconds east of UTC.
func parseOffset(v []byte) (int64, bool) {
	if len(v) < 3 || v[0] != '+' && v[0] != '-' {
		return 0, false
	}
	h, ok := two(v[1:])
	if !ok {
		return 0, false
	}
	secs := h * 3600
	rest := v[3:]
	for _, mul := range []int64{60, 1} {
		if len(rest) == 0 {
			break
		}
		if len(rest) < 3 || rest[0] != ':' {
			return 0, false
		}
		x, ok := two(rest[1:])
		if !ok {
			return 0, false
		}
		secs += x * mul
		rest = rest[3:]
	}
	if len(rest) != 0 {
		return 0, false
	}
	if v[0] == '-' {
		secs = -secs
	}
	return secs, true
}

// appendDbzTimeTZ writes a timetz as ZonedTime does: the time in UTC in
// Java's ISO_OFFSET_TIME ("11:14:15.5Z").
func appendDbzTimeTZ(buf, v []byte) ([]byte, bool) {
	us, n, ok := parseClock(v)
	if !ok {
		return buf, false
	}
	off, ok := parseOffset(v[n:])
	if !ok {
		return buf, false
	}
	const day = 86_400_000_000
	us = ((us-off*1_000_000)%day + day) % day
	buf = append(buf, '"')
	buf = appendClock(buf, us, 0, true)
	return append(buf, 'Z', '"'), true
}

// parseISOInterval reads an interval in IntervalStyle iso_8601
// ("P1Y2M3DT4H5M6.5S", "P-1Y-2M", "PT0S") into microseconds as Debezium's
// MicroDuration.durationMicros computes them: a month is 365.25/12 days,
// in double precision, truncated.
func parseISOInterval(v []byte) (int64, bool) {
	if len(v) < 3 || v[0] != 'P' {
		return 0, false
	}
	var years, months, days, hours, minutes int64
	var seconds float64
	timePart := false
	i := 1
	for i < len(v) {
		if v[i] == 'T' {
			timePart = true
			i++
			continue
		}
		start := i
		if v[i] == '-' || v[i] == '+' {
			i++
		}
		for i < len(v) && (v[i] >= '0' && v[i] <= '9' || v[i] == '.') {
			i++
		}
		if i == start || i >= len(v) {
			return 0, false
		}
		num := string(v[start:i])
		unit := v[i]
		i++
		if unit == 'S' && timePart {
			f, err := strconv.ParseFloat(num, 64)
			if err != nil {
				return 0, false
			}
			seconds = f
			continue
		}
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil {
			return 0, false
		}
		switch {
		case unit == 'Y' && !timePart:
			years = n
		case unit == 'M' && !timePart:
			months = n
		case unit == 'D' && !timePart:
			days = n
		case unit == 'H' && timePart:
			hours = n
		case unit == 'M' && timePart:
			minutes = n
		default:
			return 0, false
		}
	}
	const daysPerMonth = 365.25 / 12
	nd := float64(years*12+months)*daysPerMonth + float64(days)
	ns := ((nd*24+float64(hours))*60+float64(minutes))*60 + seconds
	us := ns * 1e6
	if math.IsNaN(us) || us > math.MaxInt64 || us < math.MinInt64 {
		return 0, false
	}
	return int64(us), true
}

// appendDbzBits writes a bit string as Debezium's Bits: the bits read as a
// binary number, in little-endian bytes, as many as its highest set bit
// needs (none for zero), base64.
func appendDbzBits(buf, v []byte) ([]byte, bool) {
	var raw []byte
	for i := len(v) - 1; i >= 0; i-- {
		bit := len(v) - 1 - i
		switch v[i] {
		case '1':
			for len(raw) <= bit/8 {
				raw = append(raw, 0)
			}
			raw[bit/8] |= 1 << (bit % 8)
		case '0':
		default:
			return buf, false
		}
	}
	buf = append(buf, '"')
	buf = base64.StdEncoding.AppendEncode(buf, raw)
	return append(buf, '"'), true
}

// appendDbzPoint writes "(x,y)" as io.debezium.data.geometry.Point:
// {"x":x,"y":y,"wkb":base64 of the OGC Well-Known Binary point,"srid":null}.
func appendDbzPoint(buf, v []byte) ([]byte, bool) {
	if len(v) < 5 || v[0] != '(' || v[len(v)-1] != ')' {
		return buf, false
	}
	in := v[1 : len(v)-1]
	comma := indexByte(in, ',')
	if comma < 0 {
		return buf, false
	}
	xs, ys := in[:comma], in[comma+1:]
	x, err1 := strconv.ParseFloat(string(xs), 64)
	y, err2 := strconv.ParseFloat(string(ys), 64)
	if err1 != nil || err2 != nil || !isNumberLiteral(xs) || !isNumberLiteral(ys) {
		return buf, false
	}
	wkb := make([]byte, 21)
	wkb[0] = 1 // little endian
	binary.LittleEndian.PutUint32(wkb[1:], 1)
	binary.LittleEndian.PutUint64(wkb[5:], math.Float64bits(x))
	binary.LittleEndian.PutUint64(wkb[13:], math.Float64bits(y))
	buf = append(buf, `{"x":`...)
	buf = append(buf, xs...)
	buf = append(buf, `,"y":`...)
	buf = append(buf, ys...)
	buf = append(buf, `,"wkb":"`...)
	buf = base64.StdEncoding.AppendEncode(buf, wkb)
	return append(buf, `","srid":null}`...), true
}

// appendDbzArray turns the text form of an array into nested JSON arrays
// of the element's Debezium values.
func (e *encoder) appendDbzArray(buf []byte, t *dbzType, v []byte) ([]byte, bool) {
	if i := indexByte(v, '='); len(v) > 0 && v[0] == '[' && i > 0 {
		v = v[i+1:]
	}
	start := len(buf)
	p := dbzArrayParser{src: v, delim: t.delim}
	out, ok := p.parse(buf, e, t.elem)
	if !ok || p.pos != len(v) {
		return buf[:start], false
	}
	return out, true
}

type dbzArrayParser struct {
	src   []byte
	pos   int
	delim byte
	tmp   []byte
}

func (p *dbzArrayParser) parse(buf []byte, e *encoder, elem *dbzType) ([]byte, bool) {
	if p.pos >= len(p.src) || p.src[p.pos] != '{' {
		return buf, false
	}
	p.pos++
	buf = append(buf, '[')
	if p.pos < len(p.src) && p.src[p.pos] == '}' {
		p.pos++
		return append(buf, ']'), true
	}
	for first := true; ; first = false {
		if !first {
			buf = append(buf, ',')
		}
		if p.pos >= len(p.src) {
			return buf, false
		}
		switch c := p.src[p.pos]; {
		case c == '{':
			var ok bool
			if buf, ok = p.parse(buf, e, elem); !ok {
				return buf, false
			}
		case c == '"':
			p.pos++
			p.tmp = p.tmp[:0]
			for {
				if p.pos >= len(p.src) {
					return buf, false
				}
				c := p.src[p.pos]
				p.pos++
				if c == '\\' && p.pos < len(p.src) {
					p.tmp = append(p.tmp, p.src[p.pos])
					p.pos++
					continue
				}
				if c == '"' {
					break
				}
				p.tmp = append(p.tmp, c)
			}
			buf = e.appendDbz(buf, elem, p.tmp)
		default:
			s := p.pos
			for p.pos < len(p.src) && p.src[p.pos] != p.delim && p.src[p.pos] != '}' {
				p.pos++
			}
			item := p.src[s:p.pos]
			if len(item) == 4 && (string(item) == "NULL" || string(item) == "null") {
				buf = append(buf, "null"...)
			} else {
				buf = e.appendDbz(buf, elem, item)
			}
		}
		if p.pos >= len(p.src) {
			return buf, false
		}
		if p.src[p.pos] == '}' {
			p.pos++
			return append(buf, ']'), true
		}
		if p.src[p.pos] != p.delim {
			return buf, false
		}
		p.pos++
	}
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

// appendDbzRow appends a query result row as a JSON object.
func (e *encoder) appendDbzRow(buf []byte, rel *relation, vals [][]byte, skipIdx int) []byte {
	buf = append(buf, '{')
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
	a.buf = buf
	payload := a.end(start)
	var key []byte
	if len(rel.recKey) > 0 {
		start = a.begin()
		a.buf = s.enc.appendTupleKey(a.buf, rel, keyRow, rel.recKey)
		key = a.end(start)
	}
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
	buf = s.enc.appendDbzRow(buf, rel, row, skip)
	buf = append(buf, ',')
	buf = s.dbz.appendSource(buf, rel, &src)
	buf = appendDbzTail(buf, nil, 'r', now)
	a.buf = buf
	payload := a.end(start)
	var key []byte
	if len(rel.recKey) > 0 {
		start = a.begin()
		a.buf = s.enc.appendRowKey(a.buf, rel, row, rel.recKey)
		key = a.end(start)
	}
	return sdk.Message{Key: key, Payload: payload}
}
