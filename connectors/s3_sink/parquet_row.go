package s3sink

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"

	"github.com/parquet-go/parquet-go"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// A record's Parquet row: the payload's JSON object is walked with the
// module's one JSON scanner and each column's value converted.

// pqRow is the scratch space of one record's row.
type pqRow struct {
	raw  [][]byte // per column: the JSON value found at its path, nil when absent
	row  parquet.Row
	size int    // rowBytes(row)
	buf  []byte // converted bytes (unescaped strings, decimals, base64)
	offs []int  // per column: where its bytes start in buf, -1 when none, inPayload for raw's
	avro avroWalk
}

// inPayload in pqRow.offs: the column's bytes are raw's, inside the payload.
const inPayload = -2

// jsonRow converts rec's JSON payload into r.row (row).
func (l *pqLayout) jsonRow(r *pqRow, rec *sdk.Record) (int, error) {
	n := len(l.cols)
	if cap(r.raw) < n {
		r.raw = make([][]byte, n)
		r.offs = make([]int, n)
		r.row = make(parquet.Row, n)
	}
	r.raw, r.offs, r.row = r.raw[:n], r.offs[:n], r.row[:n]
	clear(r.raw)
	r.buf = r.buf[:0]
	if rec.Schema == sdk.SchemaAvro || rec.Schema == sdk.SchemaFlatBuffer || rec.Schema == sdk.SchemaProto {
		return 0, fmt.Errorf("the topic's schema is %s: parquet columns are read from JSON payloads only", rec.Schema)
	}
	if err := l.find(r, rec.Payload); err != nil {
		return 0, err
	}
	// Convert into buf first (it may grow), then build the values, which
	// point into it.
	type conv struct {
		kind parquet.Kind
		i    int64
		f    float64
		b    bool
	}
	var vals [64]conv
	var cv []conv
	if n <= len(vals) {
		cv = vals[:n]
	} else {
		cv = make([]conv, n)
	}
	for i := range l.cols {
		c := &l.cols[i]
		r.offs[i] = -1
		v := &cv[i]
		if c.meta != metaNone {
			v.i, r.offs[i] = r.appendMeta(c.meta, rec)
			v.kind = 1
			continue
		}
		raw := r.raw[i]
		if raw == nil || string(raw) == "null" {
			if !c.optional {
				if raw == nil {
					return 0, fmt.Errorf("column %s (%s): payload field %s is missing and the column is not optional", c.name, c.typeName(), c.path)
				}
				return 0, fmt.Errorf("column %s (%s): payload field %s is null and the column is not optional", c.name, c.typeName(), c.path)
			}
			v.kind = 0
			continue
		}
		v.kind = 1
		var err error
		switch c.typ {
		case colString:
			if len(raw) >= 2 && raw[0] == '"' && bytes.IndexByte(raw, '\\') < 0 {
				// No escapes: the value is the payload's own bytes.
				r.raw[i], r.offs[i] = raw[1:len(raw)-1], inPayload
				break
			}
			r.offs[i] = len(r.buf)
			r.buf, err = appendJSONString(r.buf, raw)
		case colInt64:
			v.i, err = jsonInt(raw)
		case colDouble:
			v.f, err = jsonFloat(raw)
		case colBoolean:
			switch string(raw) {
			case "true":
				v.b = true
			case "false":
			default:
				err = fmt.Errorf("not true or false")
			}
		case colTimestampMs, colTimestampUs:
			v.i, err = jsonTimestamp(raw, c.typ == colTimestampUs)
		case colDate:
			v.i, err = jsonDate(raw)
		case colDecimal:
			if c.flba > 0 {
				r.offs[i] = len(r.buf)
			}
			r.buf, v.i, err = appendDecimal(r.buf, raw, c)
		case colBytes:
			r.offs[i] = len(r.buf)
			r.buf, err = r.base64(raw)
		case colJSON:
			r.offs[i] = len(r.buf)
			var ok bool
			if r.buf, ok = jsonscan.AppendCompact(r.buf, raw); !ok {
				err = fmt.Errorf("not valid JSON")
			}
		}
		if err != nil {
			return 0, fmt.Errorf("column %s (%s): payload field %s = %s: %v", c.name, c.typeName(), c.path, clip(raw), err)
		}
	}
	// The values, now that buf no longer moves.
	for i := range l.cols {
		c := &l.cols[i]
		v := &cv[i]
		def := 0
		if c.optional {
			def = 1
		}
		if v.kind == 0 {
			r.row[i] = parquet.NullValue().Level(0, 0, i)
			continue
		}
		var pv parquet.Value
		switch {
		case r.offs[i] == inPayload:
			pv = parquet.ByteArrayValue(r.raw[i])
		case r.offs[i] >= 0:
			end := len(r.buf)
			for j := i + 1; j < n; j++ {
				if r.offs[j] >= 0 {
					end = r.offs[j]
					break
				}
			}
			b := r.buf[r.offs[i]:end:end]
			switch {
			case c.typ == colDecimal && c.flba > 0:
				pv = parquet.FixedLenByteArrayValue(b)
			default:
				pv = parquet.ByteArrayValue(b)
			}
		case c.meta == metaKey || c.meta == metaHeaders:
			r.row[i] = parquet.NullValue().Level(0, 0, i)
			continue
		case c.typ == colDouble:
			pv = parquet.DoubleValue(v.f)
		case c.typ == colBoolean:
			pv = parquet.BooleanValue(v.b)
		case c.typ == colInt32 || c.typ == colDate || (c.typ == colDecimal && c.precision <= 9):
			pv = parquet.Int32Value(int32(v.i))
		default:
			pv = parquet.Int64Value(v.i)
		}
		r.row[i] = pv.Level(0, def, i)
	}
	r.size = rowBytes(r.row)
	return r.size, nil
}

// appendMeta returns the value of a metadata column: the integer of
// offset, timestamp and partition; for topic, key and headers, where its
// bytes start in r.buf, appended there, or -1 when it is null.
func (r *pqRow) appendMeta(m metaCol, rec *sdk.Record) (int64, int) {
	start := len(r.buf)
	switch m {
	case metaOffset:
		return rec.Offset, -1
	case metaTimestamp:
		return rec.Timestamp.UnixMilli(), -1
	case metaPartition:
		return int64(rec.Partition), -1
	case metaTopic:
		r.buf = append(r.buf, rec.Topic...)
	case metaKey:
		if rec.Key == nil {
			return 0, -1
		}
		r.buf = append(r.buf, rec.Key...)
	case metaHeaders:
		if len(rec.Headers) == 0 {
			return 0, -1
		}
		// appendHeaders writes "headers":{...}: keep the object.
		r.buf = appendHeaders(r.buf, rec.Headers)
		r.buf = append(r.buf[:start], r.buf[start+len(`"headers":`):]...)
	}
	return 0, start
}

// clip shortens a value for an error message.
func clip(b []byte) string {
	if len(b) > 64 {
		return string(b[:61]) + "..."
	}
	return string(b)
}

// find walks the payload's JSON object and keeps, for each payload column,
// the raw JSON value at its path.
func (l *pqLayout) find(r *pqRow, payload []byte) error {
	i := jsonscan.SkipSpace(payload, 0)
	if i >= len(payload) || payload[i] != '{' {
		return fmt.Errorf("the payload is not a JSON object")
	}
	if end, ok := findIn(payload, i, l.paths, r.raw); !ok {
		if end >= len(payload) {
			return fmt.Errorf("the payload is not valid JSON: unexpected end")
		}
		return fmt.Errorf("the payload is not valid JSON: unexpected %q at byte %d", payload[end], end)
	}
	return nil
}

// findIn reads the object at b[i] with the JSON scanner, keeping the
// values of n's children in raw, and returns the index after it; on false,
// the index where it is not valid JSON.
func findIn(b []byte, i int, n *pathNode, raw [][]byte) (int, bool) {
	i = jsonscan.SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		start := i
		end, ok := jsonscan.SkipString(b, i)
		if !ok {
			return end, false
		}
		key := b[start+1 : end-1]
		i = jsonscan.SkipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return i, false
		}
		i = jsonscan.SkipSpace(b, i+1)
		var child *pathNode
		if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(b[start:end], &k) == nil {
				child = n.children[k]
			}
		} else {
			child = n.children[string(key)]
		}
		vstart := i
		if child != nil && child.children != nil && i < len(b) && b[i] == '{' {
			i, ok = findIn(b, i, child, raw)
		} else {
			i, ok = jsonscan.SkipValue(b, i)
		}
		if !ok {
			return i, false
		}
		if child != nil && child.col >= 0 {
			raw[child.col] = b[vstart:i]
		}
		i = jsonscan.SkipSpace(b, i)
		if i >= len(b) {
			return i, false
		}
		switch b[i] {
		case ',':
			i = jsonscan.SkipSpace(b, i+1)
		case '}':
			return i + 1, true
		default:
			return i, false
		}
	}
}

// appendJSONString appends the text of a JSON string.
func appendJSONString(dst, raw []byte) ([]byte, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return dst, fmt.Errorf("not a string")
	}
	body := raw[1 : len(raw)-1]
	if bytes.IndexByte(body, '\\') < 0 {
		return append(dst, body...), nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return dst, fmt.Errorf("not a valid string")
	}
	return append(dst, s...), nil
}

func jsonInt(raw []byte) (int64, error) {
	if !isNumberStart(raw) {
		return 0, fmt.Errorf("not an integer")
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err == nil {
		return n, nil
	}
	f, ferr := strconv.ParseFloat(string(raw), 64)
	if ferr == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53 {
		return int64(f), nil
	}
	return 0, fmt.Errorf("not an integer within int64")
}

func jsonFloat(raw []byte) (float64, error) {
	if !isNumberStart(raw) {
		return 0, fmt.Errorf("not a number")
	}
	f, err := strconv.ParseFloat(string(raw), 64)
	if err != nil {
		return 0, fmt.Errorf("not a number within double")
	}
	return f, nil
}

func (r *pqRow) base64(raw []byte) ([]byte, error) {
	s, err := jsonText(raw)
	if err != nil {
		return r.buf, fmt.Errorf("not a base64 string")
	}
	start := len(r.buf)
	dst, err := base64.StdEncoding.AppendDecode(r.buf, []byte(s))
	if err != nil {
		return r.buf[:start], fmt.Errorf("not a base64 string (standard alphabet, padded)")
	}
	return dst, nil
}

// appendDecimal converts a JSON number or numeric string to the unscaled
// integer of the column: in n for precision up to 18, otherwise appended
// to dst as a big-endian two's complement of the column's width. Its cost
// does not grow with the exponent: 1e999999 is refused as quickly as 1e3.
func appendDecimal(dst, raw []byte, c *pqColumn) ([]byte, int64, error) {
	text := raw
	if len(raw) >= 2 && raw[0] == '"' {
		text = raw[1 : len(raw)-1]
	}
	neg, digits, pow, ok := parseDecimal(text)
	if !ok {
		return dst, 0, fmt.Errorf("not a number: use decimal digits with an optional sign, point and exponent, such as -12.50 or 1.25e3")
	}
	// The value is digits × 10^pow, digits without leading or trailing
	// zeros (empty for zero).
	if len(digits) > 0 && pow < -int64(c.scale) {
		return dst, 0, fmt.Errorf("more than %d digits after the point", c.scale)
	}
	if len(digits) > 0 && int64(len(digits))+pow > int64(c.precision-c.scale) {
		return dst, 0, fmt.Errorf("more than %d digits (precision %d, scale %d)", c.precision, c.precision, c.scale)
	}
	// At most precision (38) digits from here on.
	u := new(big.Int)
	if len(digits) > 0 {
		u.SetString(string(digits), 10)
		u.Mul(u, new(big.Int).Exp(big.NewInt(10), big.NewInt(pow+int64(c.scale)), nil))
		if neg {
			u.Neg(u)
		}
	}
	if c.flba == 0 {
		return dst, u.Int64(), nil
	}
	// Two's complement, big-endian, c.flba bytes.
	if u.Sign() < 0 {
		u.Add(u, new(big.Int).Lsh(big.NewInt(1), uint(8*c.flba)))
	}
	start := len(dst)
	dst = append(dst, make([]byte, c.flba)...)
	u.FillBytes(dst[start:])
	return dst, 0, nil
}

// maxExponent is where parseDecimal stops reading an exponent's digits: a
// larger one moves every digit out of any decimal column all the same.
const maxExponent = 1 << 40

// parseDecimal reads [+-]digits[.digits][(e|E)[+-]digits], with at least
// one digit before the exponent, as sign × digits × 10^pow, where digits
// has neither leading nor trailing zeros (and is empty for zero).
func parseDecimal(text []byte) (neg bool, digits []byte, pow int64, ok bool) {
	i := 0
	if i < len(text) && (text[i] == '-' || text[i] == '+') {
		neg = text[i] == '-'
		i++
	}
	var mantissa []byte
	seen, fracDigits := false, int64(0)
	for ; i < len(text) && (isDigit(text[i]) || text[i] == '.'); i++ {
		if text[i] == '.' {
			if seen {
				return false, nil, 0, false
			}
			seen = true
			continue
		}
		mantissa = append(mantissa, text[i])
		if seen {
			fracDigits++
		}
	}
	if len(mantissa) == 0 {
		return false, nil, 0, false
	}
	var exp int64
	if i < len(text) && (text[i] == 'e' || text[i] == 'E') {
		i++
		expNeg := false
		if i < len(text) && (text[i] == '-' || text[i] == '+') {
			expNeg = text[i] == '-'
			i++
		}
		start := i
		for ; i < len(text) && isDigit(text[i]); i++ {
			if exp < maxExponent {
				exp = exp*10 + int64(text[i]-'0')
			}
		}
		if i == start {
			return false, nil, 0, false
		}
		if expNeg {
			exp = -exp
		}
	}
	if i != len(text) {
		return false, nil, 0, false
	}
	for len(mantissa) > 0 && mantissa[0] == '0' {
		mantissa = mantissa[1:]
	}
	pow = exp - fracDigits
	for len(mantissa) > 0 && mantissa[len(mantissa)-1] == '0' {
		mantissa = mantissa[:len(mantissa)-1]
		pow++
	}
	return neg, mantissa, pow, true
}

// A serialized row is uvarint(number of values), then per value: its kind
// (pqKind*), repetition level, definition level, uvarint(column index),
// and its bytes (none for a null or a boolean, 4 for INT32 and FLOAT, 8
// for INT64 and DOUBLE, uvarint(length) and the bytes for a byte array). A row of
// no values marks the start of a new row group.

const (
	pqKindNull = iota
	pqKindFalse
	pqKindTrue
	pqKindInt32
	pqKindInt64
	pqKindDouble
	pqKindBytes
	pqKindFixed
	pqKindFloat
)

// rowBytes is the serialized size of row, an upper bound.
func rowBytes(row parquet.Row) int {
	n := binary.MaxVarintLen32
	for _, v := range row {
		n += 3 + binary.MaxVarintLen32 + 8
		if k := v.Kind(); !v.IsNull() && (k == parquet.ByteArray || k == parquet.FixedLenByteArray) {
			n += binary.MaxVarintLen32 + len(v.ByteArray())
		}
	}
	return n
}

// appendRow serializes row.
func appendRow(dst []byte, row parquet.Row) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(row)))
	for _, v := range row {
		kind := byte(pqKindNull)
		if !v.IsNull() {
			switch v.Kind() {
			case parquet.Boolean:
				kind = pqKindFalse
				if v.Boolean() {
					kind = pqKindTrue
				}
			case parquet.Int32:
				kind = pqKindInt32
			case parquet.Int64:
				kind = pqKindInt64
			case parquet.Double:
				kind = pqKindDouble
			case parquet.Float:
				kind = pqKindFloat
			case parquet.FixedLenByteArray:
				kind = pqKindFixed
			default:
				kind = pqKindBytes
			}
		}
		dst = append(dst, kind, byte(v.RepetitionLevel()), byte(v.DefinitionLevel()))
		dst = binary.AppendUvarint(dst, uint64(v.Column()))
		switch kind {
		case pqKindInt32:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v.Int32()))
		case pqKindFloat:
			dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(v.Float()))
		case pqKindInt64:
			dst = binary.LittleEndian.AppendUint64(dst, uint64(v.Int64()))
		case pqKindDouble:
			dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(v.Double()))
		case pqKindBytes, pqKindFixed:
			b := v.ByteArray()
			dst = binary.AppendUvarint(dst, uint64(len(b)))
			dst = append(dst, b...)
		}
	}
	return dst
}

// errDamagedRow is a serialized row readRow cannot read: a bug.
var errDamagedRow = errors.New("s3 sink: a serialized parquet row is damaged")

// readRow reads the serialized row at b[i:] into row, whose byte values
// point into b, and returns the index after it; zero values mark the start
// of a row group.
func readRow(b []byte, i int, row parquet.Row) (parquet.Row, int, error) {
	n, k := binary.Uvarint(b[i:])
	if k <= 0 {
		return row, i, errDamagedRow
	}
	i += k
	for range n {
		if i+3 > len(b) {
			return row, i, errDamagedRow
		}
		kind, rep, def := b[i], int(b[i+1]), int(b[i+2])
		col, k := binary.Uvarint(b[i+3:])
		if k <= 0 {
			return row, i, errDamagedRow
		}
		i += 3 + k
		var v parquet.Value
		switch kind {
		case pqKindNull:
			v = parquet.NullValue()
		case pqKindFalse, pqKindTrue:
			v = parquet.BooleanValue(kind == pqKindTrue)
		case pqKindInt32, pqKindFloat, pqKindInt64, pqKindDouble:
			size := 4
			if kind == pqKindInt64 || kind == pqKindDouble {
				size = 8
			}
			if i+size > len(b) {
				return row, i, errDamagedRow
			}
			x := b[i : i+size]
			i += size
			switch kind {
			case pqKindInt32:
				v = parquet.Int32Value(int32(binary.LittleEndian.Uint32(x)))
			case pqKindFloat:
				v = parquet.FloatValue(math.Float32frombits(binary.LittleEndian.Uint32(x)))
			case pqKindInt64:
				v = parquet.Int64Value(int64(binary.LittleEndian.Uint64(x)))
			default:
				v = parquet.DoubleValue(math.Float64frombits(binary.LittleEndian.Uint64(x)))
			}
		case pqKindBytes, pqKindFixed:
			l, k := binary.Uvarint(b[i:])
			if k <= 0 || uint64(len(b)-i-k) < l {
				return row, i, errDamagedRow
			}
			i += k
			data := b[i : i+int(l) : i+int(l)]
			v = parquet.ByteArrayValue(data)
			if kind == pqKindFixed {
				v = parquet.FixedLenByteArrayValue(data)
			}
			i += int(l)
		default:
			return row, i, errDamagedRow
		}
		row = append(row, v.Level(rep, def, int(col)))
	}
	return row, i, nil
}
