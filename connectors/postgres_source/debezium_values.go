package postgressource

import (
	"encoding/base64"
	"encoding/binary"
	"math"
	"strconv"

	"github.com/picomq/pico-connectors/internal/jsonscan"
)

// Debezium's value conversions (record_format = "debezium"), one function
// a PostgreSQL type; debezium.go picks them by dbzKind.

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
