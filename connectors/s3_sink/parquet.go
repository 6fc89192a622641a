package s3sink

import (
	"fmt"
	"math/big"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	pqgzip "github.com/parquet-go/parquet-go/compress/gzip"
	pqsnappy "github.com/parquet-go/parquet-go/compress/snappy"
	pqzstd "github.com/parquet-go/parquet-go/compress/zstd"
)

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
	// avro is an Avro topic's record (parquet_avro), whose leaves take the
	// columns after cols (the metadata ones) up to width; nil for JSON.
	avro  *avroNode
	width int
}

// columns is the number of the layout's leaf columns.
func (l *pqLayout) columns() int {
	if l.avro != nil {
		return l.width
	}
	return len(l.cols)
}

// pathNode is one level of the payload paths: the column whose value is
// here (or -1) and the names below it.
type pathNode struct {
	col      int
	children map[string]*pathNode
}

// pqCodec returns the page codec of parquet_compression at
// compression_level.
func pqCodec(name string, l level) (compress.Codec, bool) {
	switch name {
	case "none":
		return &parquet.Uncompressed, true
	case "snappy":
		return pqSnappyCodecs[l], true
	case "gzip":
		return &pqgzip.Codec{Level: l.gzip()}, true
	case "zstd":
		return pqZstdCodecs[l], true
	}
	return nil, false
}

// pqSnappyCodecs are the snappy page codecs per compression_level.
// fastest is klauspost's EncodeSnappy, default EncodeSnappyBetter
// (parquet-go's own codec), best EncodeSnappyBest.
var pqSnappyCodecs = [...]*pqSnappy{{encode: s2.EncodeSnappy}, {encode: s2.EncodeSnappyBetter}, {encode: s2.EncodeSnappyBest}}

// pqSnappy is parquet-go's snappy codec with the encoder of the level:
// EncodeSnappyBetter took 40% of the sink's CPU on pages of random hex
// (which it cannot shrink), EncodeSnappy a fraction of that. All write
// standard snappy blocks, the same bytes for the same page.
type pqSnappy struct {
	pqsnappy.Codec // Decode, String, CompressionCodec
	encode         func(dst, src []byte) []byte
}

func (c *pqSnappy) Encode(dst, src []byte) ([]byte, error) {
	return c.encode(dst, src), nil
}

// pqZstdCodecs are the zstd page codecs per compression_level.
var pqZstdCodecs = [...]*pqZstd{{level: levelFastest}, {level: levelDefault}, {level: levelBest}}

// pqZstd is parquet-go's zstd codec with entropy coding of literals always
// on: at SpeedFastest and SpeedDefault klauspost's encoder otherwise stores
// a page without matches (random identifiers, hashes) uncompressed, where
// Huffman coding alone halves hex. One goroutine, no checksum, so a page
// gives the same bytes on every replay.
type pqZstd struct {
	pqzstd.Codec // Decode, String, CompressionCodec
	level        level
	encoders     sync.Pool
}

func (c *pqZstd) Encode(dst, src []byte) ([]byte, error) {
	e, _ := c.encoders.Get().(*zstd.Encoder)
	if e == nil {
		var err error
		e, err = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(c.level.zstd()),
			zstd.WithAllLitEntropyCompression(true), zstd.WithZeroFrames(true), zstd.WithEncoderCRC(false))
		if err != nil {
			return dst, err
		}
	}
	defer c.encoders.Put(e)
	return e.EncodeAll(src, dst[:0]), nil
}

// validate checks what the schema cannot state: the object settings and
// the role's keys (objectsettings.go, access.go), and that the parquet
// columns fit together and with the metadata columns (newPQLayout says how).
// Every other rule is the schema's, checked by the generated Load, or by
// Validate for a Config built in code.
func (o *options) validate() error {
	if err := o.Object.validate(o.Endpoint); err != nil {
		return err
	}
	if err := o.Role.validate(); err != nil {
		return err
	}
	if err := o.checkPartSize(); err != nil {
		return err
	}
	if err := o.checkIceberg(); err != nil {
		return err
	}
	if o.Format != formatParquet {
		return nil
	}
	_, err := newPQLayout(o)
	return err
}

// newPQLayout builds the layout from the options; its errors name the
// column by index.
func newPQLayout(o *options) (*pqLayout, error) {
	codec, ok := pqCodec(o.ParquetCodec, o.Level)
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
	for i := range l.cols {
		fields[i] = l.cols[i].field()
	}
	l.schema = recordSchema(fields)
	return l, nil
}

// field is the column as a field of the record, OPTIONAL or REQUIRED.
func (c *pqColumn) field() parquet.Field {
	node := c.node()
	if c.optional {
		node = parquet.Optional(node)
	} else {
		node = parquet.Required(node)
	}
	return &pqField{Node: node, name: c.name}
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
