package s3sink

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// Parquet output: each open file has a parquet.Writer that writes straight
// into the file's chunks. Rows are buffered by the writer until the row
// group is flushed; the raw size of the buffered rows is counted in the
// sink's held bytes, so max_buffer_size bounds them as well. A row group is
// flushed when its raw size reaches a target worked out from the file's
// encoded size so far, and the file closes once its encoded size reaches
// max_file_size. Every decision depends only on the records and the
// configuration, and the writer is set up with fixed settings (no wall
// clock, a fixed created_by), so a replay writes the same bytes.

// colType is the type of a parquet column.
type colType int

const (
	colString colType = iota
	colInt64
	colDouble
	colBoolean
	colTimestampMs
	colTimestampUs
	colDate
	colDecimal
	colBytes
	colJSON
	colInt32 // the partition metadata column
)

var colTypeNames = map[string]colType{
	"string": colString, "int64": colInt64, "double": colDouble, "boolean": colBoolean,
	"timestamp_ms": colTimestampMs, "timestamp_us": colTimestampUs, "date": colDate,
	"decimal": colDecimal, "bytes": colBytes, "json": colJSON,
}

// columnSpec is one entry of columns, as configured.
type columnSpec struct {
	Name      string
	Type      string
	Path      string // dotted; empty means the name
	Optional  bool
	Precision int
	Scale     int
}

// metaCol says which record field a metadata column takes.
type metaCol int

const (
	metaNone metaCol = iota
	metaOffset
	metaTimestamp
	metaTopic
	metaPartition
	metaKey
	metaHeaders
)

// pqColumn is one column of the file's schema.
type pqColumn struct {
	name      string
	typ       colType
	path      string // as configured, for messages
	optional  bool
	precision int
	scale     int
	meta      metaCol
	flba      int // FIXED_LEN_BYTE_ARRAY length of a wide decimal
}

// pqLayout is the schema of the parquet files of one sink, and how a
// record's payload maps onto it.
type pqLayout struct {
	cols   []pqColumn
	schema *parquet.Schema
	codec  compress.Codec
	paths  *pathNode // the payload columns' paths
}

// pathNode is one level of the payload paths: the column whose value is
// here (or -1) and the names below it.
type pathNode struct {
	col      int
	children map[string]*pathNode
}

// pqCodecs are the codecs of parquet_compression.
var pqCodecs = map[string]compress.Codec{
	"none":   &parquet.Uncompressed,
	"snappy": &parquet.Snappy,
	"gzip":   &parquet.Gzip,
	// SpeedBetterCompression: at SpeedDefault, klauspost's encoder stores
	// a page without matches (random identifiers, hashes) uncompressed,
	// where this level still entropy-codes it, about 2:1 for hex.
	"zstd": &pqzstd.Codec{Level: pqzstd.SpeedBetterCompression, Concurrency: 1},
}

// newPQLayout builds the layout from the options; its errors name the
// column by index.
func newPQLayout(o *options) (*pqLayout, error) {
	codec, ok := pqCodecs[o.ParquetCodec]
	if !ok {
		return nil, fmt.Errorf("parquet_compression '%s' is not supported: use none, snappy, gzip or zstd", o.ParquetCodec)
	}
	l := &pqLayout{codec: codec, paths: &pathNode{col: -1}}
	if o.IncludeMetadata {
		l.cols = append(l.cols,
			pqColumn{name: "offset", typ: colInt64, meta: metaOffset},
			pqColumn{name: "timestamp", typ: colTimestampMs, meta: metaTimestamp},
			pqColumn{name: "topic", typ: colString, meta: metaTopic},
			pqColumn{name: "partition", typ: colInt32, meta: metaPartition},
			pqColumn{name: "key", typ: colBytes, optional: true, meta: metaKey})
	}
	if o.IncludeHeaders {
		l.cols = append(l.cols, pqColumn{name: "headers", typ: colJSON, optional: true, meta: metaHeaders})
	}
	if len(o.Columns) == 0 {
		return nil, fmt.Errorf("output_format is 'parquet' but no columns are listed: add [[plugin_config.columns]] blocks with name and type")
	}
	seen := map[string]string{}
	for i, c := range l.cols {
		seen[c.name] = fmt.Sprintf("a metadata column (include_metadata or include_headers, column %d)", i)
	}
	for i, c := range o.Columns {
		at := fmt.Sprintf("columns[%d]", i)
		if c.Name == "" {
			return nil, fmt.Errorf("%s.name is required", at)
		}
		if prev, dup := seen[c.Name]; dup {
			return nil, fmt.Errorf("%s.name: %s is already used by %s; rename the column", at, c.Name, prev)
		}
		seen[c.Name] = at + ".name"
		typ, ok := colTypeNames[c.Type]
		if !ok {
			return nil, fmt.Errorf("%s.type: '%s' is not a column type; use string, int64, double, boolean, timestamp_ms, timestamp_us, date, decimal, bytes or json", at, c.Type)
		}
		col := pqColumn{name: c.Name, typ: typ, path: c.Path, optional: c.Optional, precision: c.Precision, scale: c.Scale}
		if col.path == "" {
			col.path = c.Name
		}
		if typ == colDecimal {
			if c.Precision < 1 || c.Precision > 38 {
				return nil, fmt.Errorf("%s.precision (%d) must be 1 to 38 for a decimal column", at, c.Precision)
			}
			if c.Scale < 0 || c.Scale > c.Precision {
				return nil, fmt.Errorf("%s.scale (%d) must be 0 to precision (%d)", at, c.Scale, c.Precision)
			}
			if c.Precision > 18 {
				col.flba = decimalBytes(c.Precision)
			}
		}
		n := l.paths
		for _, seg := range strings.Split(col.path, ".") {
			if seg == "" {
				return nil, fmt.Errorf("%s.path '%s' has an empty segment: write field names separated by single dots", at, c.Path)
			}
			if n.col >= 0 {
				return nil, fmt.Errorf("%s.path '%s' is inside the path of column %s, which holds a whole value", at, col.path, l.cols[n.col].name)
			}
			if n.children == nil {
				n.children = map[string]*pathNode{}
			}
			next := n.children[seg]
			if next == nil {
				next = &pathNode{col: -1}
				n.children[seg] = next
			}
			n = next
		}
		if n.col >= 0 || n.children != nil {
			return nil, fmt.Errorf("%s.path '%s' overlaps the path of another column", at, col.path)
		}
		n.col = len(l.cols)
		l.cols = append(l.cols, col)
	}
	fields := make([]parquet.Field, len(l.cols))
	group := parquet.Group{}
	for i, c := range l.cols {
		node := c.node()
		if c.optional {
			node = parquet.Optional(node)
		} else {
			node = parquet.Required(node)
		}
		fields[i] = &pqField{Node: node, name: c.name}
		group[c.name] = node
	}
	l.schema = parquet.NewSchema("record", &orderedGroup{Group: group, fields: fields})
	return l, nil
}

// decimalBytes is the shortest two's complement that holds precision digits.
func decimalBytes(precision int) int {
	limit := new(big.Int).Exp(big.NewInt(10), big.NewInt(int64(precision)), nil)
	n := 1
	for new(big.Int).Lsh(big.NewInt(1), uint(8*n-1)).Cmp(limit) < 0 {
		n++
	}
	return n
}

func (c *pqColumn) node() parquet.Node {
	switch c.typ {
	case colString:
		return parquet.String()
	case colInt64:
		return parquet.Leaf(parquet.Int64Type)
	case colInt32:
		return parquet.Int(32)
	case colDouble:
		return parquet.Leaf(parquet.DoubleType)
	case colBoolean:
		return parquet.Leaf(parquet.BooleanType)
	case colTimestampMs:
		return parquet.Timestamp(parquet.Millisecond)
	case colTimestampUs:
		return parquet.Timestamp(parquet.Microsecond)
	case colDate:
		return parquet.Date()
	case colDecimal:
		switch {
		case c.precision <= 9:
			return parquet.Decimal(c.scale, c.precision, parquet.Int32Type)
		case c.precision <= 18:
			return parquet.Decimal(c.scale, c.precision, parquet.Int64Type)
		}
		return parquet.Decimal(c.scale, c.precision, parquet.FixedLenByteArrayType(c.flba))
	case colJSON:
		return parquet.JSON()
	}
	return parquet.Leaf(parquet.ByteArrayType)
}

// orderedGroup is a parquet group whose columns keep the configured order
// (parquet.Group sorts them by name).
type orderedGroup struct {
	parquet.Group
	fields []parquet.Field
}

func (g *orderedGroup) Fields() []parquet.Field { return g.fields }
func (g *orderedGroup) String() string          { return "record" }

type pqField struct {
	parquet.Node
	name string
}

func (f *pqField) Name() string                      { return f.name }
func (f *pqField) Value(reflect.Value) reflect.Value { return reflect.Value{} }

// pqRow is the scratch space of one record's row.
type pqRow struct {
	raw  [][]byte // per column: the JSON value found at its path, nil when absent
	row  parquet.Row
	buf  []byte // converted bytes (unescaped strings, decimals, base64)
	offs []int  // per column: where its bytes start in buf, -1 when none
}

// row converts rec into r.row. It returns the raw size the row adds to the
// open row group, or the reason the record does not fit the columns.
func (l *pqLayout) row(r *pqRow, rec *sdk.Record) (int, error) {
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
	size := 0
	for i := range l.cols {
		c := &l.cols[i]
		r.offs[i] = -1
		v := &cv[i]
		if c.meta != metaNone {
			switch c.meta {
			case metaOffset:
				v.i = rec.Offset
			case metaTimestamp:
				v.i = rec.Timestamp.UnixMilli()
			case metaPartition:
				v.i = int64(rec.Partition)
			case metaTopic:
				r.offs[i] = len(r.buf)
				r.buf = append(r.buf, rec.Topic...)
			case metaKey:
				if rec.Key != nil {
					r.offs[i] = len(r.buf)
					r.buf = append(r.buf, rec.Key...)
				}
			case metaHeaders:
				if len(rec.Headers) > 0 {
					// appendHeaders writes "headers":{...}: keep the object.
					start := len(r.buf)
					r.offs[i] = start
					r.buf = appendHeaders(r.buf, rec.Headers)
					r.buf = append(r.buf[:start], r.buf[start+len(`"headers":`):]...)
				}
			}
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
			v.i, err = r.timestamp(raw, c.typ == colTimestampUs)
		case colDate:
			v.i, err = r.date(raw)
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
			size += 2
			continue
		}
		var pv parquet.Value
		switch {
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
			size += len(b) + 4
		case c.meta == metaKey || c.meta == metaHeaders:
			r.row[i] = parquet.NullValue().Level(0, 0, i)
			size += 2
			continue
		case c.typ == colDouble:
			pv = parquet.DoubleValue(v.f)
			size += 8
		case c.typ == colBoolean:
			pv = parquet.BooleanValue(v.b)
			size++
		case c.typ == colInt32 || c.typ == colDate || (c.typ == colDecimal && c.precision <= 9):
			pv = parquet.Int32Value(int32(v.i))
			size += 4
		default:
			pv = parquet.Int64Value(v.i)
			size += 8
		}
		r.row[i] = pv.Level(0, def, i)
	}
	return size + 8, nil
}

func (c *pqColumn) typeName() string {
	for name, t := range colTypeNames {
		if t == c.typ {
			if t == colDecimal {
				return fmt.Sprintf("decimal(%d,%d)", c.precision, c.scale)
			}
			return name
		}
	}
	return "int32"
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

func isNumberStart(raw []byte) bool {
	return len(raw) > 0 && (raw[0] == '-' || isDigit(raw[0]))
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

// timestamp reads an RFC 3339 string or an integer of the column's unit.
func (r *pqRow) timestamp(raw []byte, micros bool) (int64, error) {
	if isNumberStart(raw) {
		n, err := strconv.ParseInt(string(raw), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("not an integer within int64")
		}
		return n, nil
	}
	s, err := r.text(raw)
	if err != nil {
		return 0, fmt.Errorf("neither an RFC 3339 string nor an integer")
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return 0, fmt.Errorf("not an RFC 3339 time such as 2026-09-03T21:15:04.118Z")
	}
	if micros {
		return t.UnixMicro(), nil
	}
	return t.UnixMilli(), nil
}

func (r *pqRow) date(raw []byte) (int64, error) {
	if isNumberStart(raw) {
		n, err := strconv.ParseInt(string(raw), 10, 32)
		if err != nil {
			return 0, fmt.Errorf("not an integer within int32")
		}
		return n, nil
	}
	s, err := r.text(raw)
	if err != nil {
		return 0, fmt.Errorf("neither a YYYY-MM-DD string nor an integer")
	}
	t, err := time.Parse(time.DateOnly, s)
	if err != nil {
		return 0, fmt.Errorf("not a date such as 2026-09-03")
	}
	days := t.Unix() / 86400
	if days < math.MinInt32 || days > math.MaxInt32 {
		return 0, fmt.Errorf("out of the range of a date")
	}
	return days, nil
}

// text returns a JSON string's text, unescaped.
func (r *pqRow) text(raw []byte) (string, error) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", fmt.Errorf("not a string")
	}
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw[1 : len(raw)-1]), nil
	}
	var s string
	err := json.Unmarshal(raw, &s)
	return s, err
}

func (r *pqRow) base64(raw []byte) ([]byte, error) {
	s, err := r.text(raw)
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

// pqPageBuffer is the raw size of a column's page buffer. A writer holds
// about pqWriterBytes per column whatever it holds, counted in the sink's
// held bytes while its file is open (measured: 12 KiB per column at 16 KiB
// pages, 36 KiB at 64 KiB).
const (
	pqPageBuffer  = 32 << 10
	pqWriterBytes = pqPageBuffer/2 + 4<<10
)

// writerBytes is what one parquet writer holds.
func (s *Sink) writerBytes() int { return len(s.pq.cols) * pqWriterBytes }

// pqFooterBound is room kept for a file's footer when checking it against
// the single PutObject limit.
const pqFooterBound = 1 << 20

// pqFile is the parquet writer of one open file.
type pqFile struct {
	w   *parquet.Writer
	out *pqOut
	// pending is the raw size of the rows in the open row group, counted
	// in the sink's held bytes; target is the raw size at which the row
	// group is flushed; flushed is the raw size of the flushed row groups.
	pending, target, flushed int64
}

// pqOut writes the encoded file into the open file's chunks. It runs with
// the sink's lock held.
type pqOut struct {
	s  *Sink
	fb *fileBuffer
}

func (o *pqOut) Write(b []byte) (int, error) {
	fb, s := o.fb, o.s
	n := len(b)
	for len(b) > 0 {
		last := len(fb.chunks) - 1
		if last < 0 || len(fb.chunks[last]) == cap(fb.chunks[last]) {
			c := s.pool.get(len(fb.chunks), 1)
			s.grow(cap(c))
			fb.chunks = append(fb.chunks, c)
			last++
		}
		c := &fb.chunks[last]
		k := min(len(b), cap(*c)-len(*c))
		*c = append(*c, b[:k]...)
		b = b[k:]
	}
	fb.size += int64(n)
	return n, nil
}

// openParquet starts the parquet writer of fb. Always a new one: a
// writer reused through Reset does not write the same bytes as a new one
// (parquet-go v0.32.0), and a replay must.
func (s *Sink) openParquet(fb *fileBuffer) {
	out := &pqOut{s: s, fb: fb}
	w := parquet.NewWriter(out, s.pq.schema,
		parquet.Compression(s.pq.codec),
		parquet.CreatedBy("pico-connectors s3_sink", "1", "parquet-go v0.32.0"),
		parquet.WriteBufferSize(0),
		parquet.PageBufferSize(pqPageBuffer))
	s.grow(s.writerBytes())
	fb.pq = &pqFile{w: w, out: out, target: s.rowGroupTarget(0, 0)}
}

// rowGroupTarget is the raw size of the next row group of a file that has
// enc encoded bytes from flushed raw bytes: what should bring the file to
// max_file_size at the compression seen so far, between a sixteenth of
// max_file_size and max_file_size (and half of max_buffer_size).
func (s *Sink) rowGroupTarget(enc, flushed int64) int64 {
	limit := min(s.opts.MaxFileSize, max(s.opts.MaxBufferSize/2, 1))
	floor := min(max(s.opts.MaxFileSize/16, 4<<10), limit)
	if enc <= 0 || flushed <= 0 {
		return limit
	}
	want := float64(s.opts.MaxFileSize-enc) * float64(flushed) / float64(enc)
	return min(max(int64(want), floor), limit)
}

// appendParquet writes the converted row of rec (s.row, size raw bytes)
// into p's open file, starting the file when it has none. The row waits
// for room under max_buffer_size.
func (s *Sink) appendParquet(p *partition, rec *sdk.Record, size int) error {
	for {
		opening := p.open.count == 0
		need := size
		if opening {
			need += s.writerBytes()
		}
		if err := s.room(p, need); err != nil {
			return err
		}
		if opening || p.open.count > 0 {
			break
		}
		// room closed p's file early: its next file needs a writer too.
	}
	fb := &p.open
	if fb.count == 0 {
		dir, err := s.dirOf(rec)
		if err != nil {
			return err
		}
		s.openParquet(fb)
		fb.dir = dir
		fb.first = rec.Offset
		fb.firstTime = rec.Timestamp
		s.open++
		s.m.openFiles.Set(float64(s.open))
	}
	pf := fb.pq
	if _, err := pf.w.WriteRows([]parquet.Row{s.row.row}); err != nil {
		return fmt.Errorf("s3 sink: writing record %s/%d@%d to its parquet file: %w", rec.Topic, rec.Partition, rec.Offset, err)
	}
	s.grow(size)
	pf.pending += int64(size)
	fb.count++
	fb.last = rec.Offset
	p.next = rec.Offset + 1
	if pf.pending >= pf.target {
		// The row group's reservation passes to its encoded bytes, which
		// the flush writes into chunks (and counts); room for one more
		// chunk first, which they may start. The wait may close the file
		// (the largest at the bound), the row group with it.
		if err := s.room(p, s.pool.capFor(len(fb.chunks), 1)); err != nil {
			return err
		}
		if fb.pq != pf {
			return nil
		}
		s.grow(-int(pf.pending))
		pf.flushed += pf.pending
		pf.pending = 0
		if err := pf.w.Flush(); err != nil {
			return fmt.Errorf("s3 sink: flushing a parquet row group of %s/%d: %w", p.topic, p.partition, err)
		}
		pf.target = s.rowGroupTarget(fb.size, pf.flushed)
	}
	return nil
}

// finishParquet writes the last row group and the footer of fb. The
// reservations of its rows and its writer pass to the encoded bytes first.
func (s *Sink) finishParquet(fb *fileBuffer) {
	pf := fb.pq
	s.dropParquet(fb)
	if err := pf.w.Close(); err != nil {
		// Writes into chunks never fail; the writer itself has no other
		// reason to.
		s.log.Error("S3 sink could not finish a parquet file", "error", err)
	}
}

// dropParquet lets go of fb's writer and its held row group.
func (s *Sink) dropParquet(fb *fileBuffer) {
	pf := fb.pq
	if pf == nil {
		return
	}
	s.grow(-int(pf.pending) - s.writerBytes())
	pf.pending = 0
	fb.pq = nil
}

func isDigit(b byte) bool { return b >= '0' && b <= '9' }
