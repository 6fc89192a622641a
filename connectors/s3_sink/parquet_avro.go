package s3sink

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/hamba/avro/v2"
	"github.com/parquet-go/parquet-go"

	"github.com/picomq/pico-connectors/sdk"
)

// Parquet from Avro topics: without columns, an Avro topic's Parquet
// schema is its Avro schema's (avroNode says how each type maps), and
// parquet_avro_row walks each record's Avro binary into its row. With
// columns, they pick and rename the record's top-level fields.

// avroKind is the Avro type of a node, its union with null aside.
type avroKind int

const (
	avNull avroKind = iota
	avBoolean
	avInt
	avLong
	avFloat
	avDouble
	avBytes
	avString
	avFixed
	avEnum
	avRecord
	avArray
	avMap
)

// avroNode is one Avro type of a topic's schema as a Parquet node, with
// the levels its values take.
type avroNode struct {
	kind avroKind
	path string // the field's dotted path, for messages
	// null is the union branch of null when the type is a union of null
	// and one other type (branch), -1 when it is no union.
	null, branch int
	// def is the definition level of a value present here: its optional
	// and repeated ancestors, and itself.
	def int
	// rep is the repetition level of the elements of an array or map.
	rep int
	// col is a leaf's column; first and end are the leaf columns under
	// the node (for a null, which sets every one of them).
	col, first, end int
	size            int      // fixed: its length
	symbols         [][]byte // enum
	fields          []*avroNode
	// keep (a record's fields): the index of each field in fields, in the
	// file's column order, -1 for a field columns leaves out (root only).
	keep []int
	elem *avroNode // array items, map values
	key  *avroNode // map keys
	pq   parquet.Node
}

// avroTopic is one [[topics]] block: its topic or pattern, its schema,
// its Parquet layout when it is Avro (nil otherwise: the configured
// columns) and the reader of path_template's {field:...} parts when it is
// Avro (nil otherwise).
type avroTopic struct {
	topic  string
	re     *regexp.Regexp
	schema sdk.Schema
	layout *pqLayout
	key    *avroKey
}

// avroTopics is what SetTopics learnt: the blocks in order, and the block
// of each topic seen, by name (nil: no block names it). Consume and the
// upload workers look topics up.
type avroTopics struct {
	blocks []avroTopic
	mu     sync.Mutex
	byName map[string]*avroTopic
}

// newAvroTopics checks the blocks against the configuration and builds
// what their Avro schemas give: with output_format = parquet (base, the
// metadata columns and the configured columns, not nil) the layouts of the
// Avro blocks, a block that is not Avro needing base's columns; with a
// {field:...} in path_template (key.readsFields), the Avro blocks' field
// readers, a block that is neither JSON nor Avro being refused.
func newAvroTopics(base *pqLayout, o *options, key *keyLayout, topics []sdk.TopicSchema) (*avroTopics, error) {
	at := &avroTopics{byName: map[string]*avroTopic{}}
	var errs []string
	for _, t := range topics {
		b := avroTopic{topic: t.Topic, schema: t.Schema}
		if t.Pattern {
			var err error
			if b.re, err = regexp.Compile(t.Topic); err != nil {
				errs = append(errs, fmt.Sprintf("topics[%d].pattern: %v", t.Block, err))
				continue
			}
		}
		if key.readsFields {
			switch t.Schema {
			case sdk.SchemaJSON:
			case sdk.SchemaAvro:
				k, err := newAvroKey(key, t.AvroSchema)
				if err != nil {
					errs = append(errs, fmt.Sprintf("topics[%d] (%s): %v", t.Block, t.Topic, err))
					continue
				}
				b.key = k
			default:
				errs = append(errs, fmt.Sprintf("topics[%d] (%s) has schema = %q: path_template '%s' reads %s from the payload, which only a json or avro topic has; give the topic schema = \"json\" or \"avro\", or take {field:...} out of path_template", t.Block, t.Topic, t.Schema, key.tmpl.Source, key.firstField()))
				continue
			}
		}
		if base == nil {
			// Without Parquet, nothing more to build.
		} else if t.Schema == sdk.SchemaAvro {
			l, err := newAvroLayout(base, o, t.AvroSchema)
			if err != nil {
				errs = append(errs, fmt.Sprintf("topics[%d] (%s): %v", t.Block, t.Topic, err))
				continue
			}
			b.layout = l
		} else if len(o.Columns) == 0 {
			errs = append(errs, fmt.Sprintf("topics[%d] (%s) has schema = %q: output_format = \"parquet\" takes a JSON topic's columns from [[plugin_config.columns]], and none are listed; list them, or give the topic schema = \"avro\" and its Avro schema", t.Block, t.Topic, t.Schema))
		}
		at.blocks = append(at.blocks, b)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return at, nil
}

// block returns topic's first block, nil when no block names it: blocks
// are matched in order, as the runtime does.
func (at *avroTopics) block(topic string) *avroTopic {
	at.mu.Lock()
	defer at.mu.Unlock()
	if b, ok := at.byName[topic]; ok {
		return b
	}
	var found *avroTopic
	for i := range at.blocks {
		b := &at.blocks[i]
		if (b.re == nil && b.topic == topic) || (b.re != nil && b.re.MatchString(topic)) {
			found = b
			break
		}
	}
	at.byName[topic] = found
	return found
}

// layout returns the layout of topic's first block when it is Avro, nil
// otherwise.
func (at *avroTopics) layout(topic string) *pqLayout {
	if b := at.block(topic); b != nil {
		return b.layout
	}
	return nil
}

// newAvroLayout builds the layout of an Avro schema: base's metadata
// columns, then the record's fields, or those columns picks.
func newAvroLayout(base *pqLayout, o *options, text string) (*pqLayout, error) {
	root, err := avroRecordNode(text, `output_format = "parquet"`)
	if err != nil {
		return nil, err
	}
	l := &pqLayout{codec: base.codec, avro: root}
	for _, c := range base.cols {
		if c.meta != metaNone {
			l.cols = append(l.cols, c)
		}
	}
	byName := map[string]int{}
	for i, f := range root.fields {
		byName[f.path] = i
	}
	names := make([]string, 0, len(root.fields))
	if len(o.Columns) == 0 {
		for i, f := range root.fields {
			root.keep = append(root.keep, i)
			names = append(names, f.path)
		}
	} else {
		for i, c := range o.Columns {
			path := c.Path
			if path == "" {
				path = c.Name
			}
			fi, ok := byName[path]
			if !ok {
				if strings.Contains(path, ".") {
					return nil, fmt.Errorf("columns[%d].path '%s': for an Avro topic a column names a top-level field of the record, not a nested one", i, path)
				}
				return nil, fmt.Errorf("columns[%d].path '%s' is not a field of the Avro record (its fields: %s)", i, path, strings.Join(fieldNames(root), ", "))
			}
			for j, k := range root.keep {
				if k == fi {
					return nil, fmt.Errorf("columns[%d].path '%s' is the field of columns[%d] too; an Avro field goes to one column", i, path, j)
				}
			}
			root.keep = append(root.keep, fi)
			names = append(names, c.Name)
		}
	}
	// The kept fields' leaves take the columns after the metadata ones, in
	// the file's order; the others keep -1 (their values are skipped).
	col := len(l.cols)
	for _, f := range root.fields {
		unnumber(f)
	}
	for _, fi := range root.keep {
		col = number(root.fields[fi], col)
	}
	l.width = col
	fields := make([]parquet.Field, 0, len(l.cols)+len(root.keep))
	seen := map[string]bool{}
	for i := range l.cols {
		fields = append(fields, l.cols[i].field())
		seen[l.cols[i].name] = true
	}
	for j, fi := range root.keep {
		if seen[names[j]] {
			return nil, fmt.Errorf("the field or column %s is also a metadata column (include_metadata or include_headers); rename it with a column", names[j])
		}
		seen[names[j]] = true
		fields = append(fields, &pqField{Node: root.fields[fi].pq, name: names[j]})
	}
	l.schema = recordSchema(fields)
	return l, nil
}

// avroRecordNode parses an Avro schema's text into its node tree; the
// schema must be a record, which what (the key that reads it) needs.
func avroRecordNode(text, what string) (*avroNode, error) {
	s, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		return nil, fmt.Errorf("not a valid Avro schema: %v", err)
	}
	if _, ok := s.(*avro.RecordSchema); !ok {
		return nil, fmt.Errorf("the Avro schema is a %s, not a record: %s needs a record", s.Type(), what)
	}
	b := &avroBuilder{seen: map[string]bool{}}
	return b.node(s, "", 0, 0)
}

func fieldNames(r *avroNode) []string {
	out := make([]string, len(r.fields))
	for i, f := range r.fields {
		out[i] = f.path
	}
	return out
}

// unnumber marks n's leaves as left out.
func unnumber(n *avroNode) {
	n.col, n.first, n.end = -1, 0, 0
	for _, f := range n.fields {
		unnumber(f)
	}
	if n.key != nil {
		unnumber(n.key)
	}
	if n.elem != nil {
		unnumber(n.elem)
	}
}

// number gives n's leaves the columns from col on, in Parquet's order
// (a map's key before its value), and returns the next column.
func number(n *avroNode, col int) int {
	n.first = col
	switch n.kind {
	case avRecord:
		for _, f := range n.fields {
			col = number(f, col)
		}
	case avArray:
		col = number(n.elem, col)
	case avMap:
		col = number(n.key, col)
		col = number(n.elem, col)
	default:
		n.col = col
		col++
	}
	n.end = col
	return col
}

// avroBuilder turns an Avro schema into avroNodes; seen holds the records
// being built, to refuse a recursive one.
type avroBuilder struct {
	seen map[string]bool
}

// node builds the node of s at path, under def optional or repeated
// ancestors and rep repeated ones.
func (b *avroBuilder) node(s avro.Schema, path string, def, rep int) (*avroNode, error) {
	n := &avroNode{path: path, null: -1}
	if u, ok := s.(*avro.UnionSchema); ok {
		types := u.Types()
		if !u.Nullable() || len(types) != 2 {
			return nil, fmt.Errorf("field %s is a union of %s: only a union of null and one other type maps to a Parquet column (an optional one)", orRoot(path), unionNames(types))
		}
		n.null, n.branch = u.Indices()
		s = types[n.branch]
		def++
	}
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	n.def = def
	var pq parquet.Node
	logical := ""
	var dec *avro.DecimalLogicalSchema
	if ls, ok := s.(avro.LogicalTypeSchema); ok && ls.Logical() != nil {
		logical = string(ls.Logical().Type())
		dec, _ = ls.Logical().(*avro.DecimalLogicalSchema)
	}
	switch t := s.(type) {
	case *avro.RecordSchema:
		name := t.FullName()
		if b.seen[name] {
			return nil, fmt.Errorf("field %s: the record %s contains itself, which a Parquet schema cannot", orRoot(path), name)
		}
		b.seen[name] = true
		defer delete(b.seen, name)
		n.kind = avRecord
		fields := make([]parquet.Field, 0, len(t.Fields()))
		group := parquet.Group{}
		for _, f := range t.Fields() {
			c, err := b.node(f.Type(), join(path, f.Name()), def, rep)
			if err != nil {
				return nil, err
			}
			n.fields = append(n.fields, c)
			fields = append(fields, &pqField{Node: c.pq, name: f.Name()})
			group[f.Name()] = c.pq
		}
		if len(n.fields) == 0 {
			return nil, fmt.Errorf("field %s: the record %s has no fields, which a Parquet group cannot", orRoot(path), name)
		}
		pq = &orderedGroup{Group: group, fields: fields}
	case *avro.ArraySchema:
		n.kind, n.rep = avArray, rep+1
		e, err := b.node(t.Items(), path+"[]", def+1, rep+1)
		if err != nil {
			return nil, err
		}
		n.elem = e
		pq = parquet.List(e.pq)
	case *avro.MapSchema:
		n.kind, n.rep = avMap, rep+1
		n.key = &avroNode{kind: avString, path: path + ".key", null: -1, def: def + 1, pq: parquet.String()}
		v, err := b.node(t.Values(), path+"{}", def+1, rep+1)
		if err != nil {
			return nil, err
		}
		n.elem = v
		pq = parquet.Map(parquet.String(), v.pq)
	case *avro.EnumSchema:
		n.kind = avEnum
		for _, sym := range t.Symbols() {
			n.symbols = append(n.symbols, []byte(sym))
		}
		pq = parquet.String()
	case *avro.FixedSchema:
		n.kind, n.size = avFixed, t.Size()
		pq = parquet.Leaf(parquet.FixedLenByteArrayType(t.Size()))
		if dec != nil {
			pq = parquet.Decimal(dec.Scale(), dec.Precision(), parquet.FixedLenByteArrayType(t.Size()))
		}
	case *avro.NullSchema:
		n.kind, pq = avNull, parquet.Leaf(parquet.NullType)
	case *avro.PrimitiveSchema:
		switch t.Type() {
		case avro.Boolean:
			n.kind, pq = avBoolean, parquet.Leaf(parquet.BooleanType)
		case avro.Int:
			n.kind, pq = avInt, parquet.Leaf(parquet.Int32Type)
			switch avro.LogicalType(logical) {
			case avro.Date:
				pq = parquet.Date()
			case avro.TimeMillis:
				pq = parquet.Time(parquet.Millisecond)
			}
		case avro.Long:
			n.kind, pq = avLong, parquet.Leaf(parquet.Int64Type)
			switch avro.LogicalType(logical) {
			case avro.TimeMicros:
				pq = parquet.Time(parquet.Microsecond)
			case avro.TimestampMillis:
				pq = parquet.Timestamp(parquet.Millisecond)
			case avro.TimestampMicros:
				pq = parquet.Timestamp(parquet.Microsecond)
			case avro.LocalTimestampMillis:
				pq = parquet.TimestampAdjusted(parquet.Millisecond, false)
			case avro.LocalTimestampMicros:
				pq = parquet.TimestampAdjusted(parquet.Microsecond, false)
			}
		case avro.Float:
			n.kind, pq = avFloat, parquet.Leaf(parquet.FloatType)
		case avro.Double:
			n.kind, pq = avDouble, parquet.Leaf(parquet.DoubleType)
		case avro.Bytes:
			n.kind, pq = avBytes, parquet.Leaf(parquet.ByteArrayType)
			if dec != nil {
				pq = parquet.Decimal(dec.Scale(), dec.Precision(), parquet.ByteArrayType)
			}
		case avro.String:
			n.kind, pq = avString, parquet.String()
		}
	}
	if pq == nil {
		return nil, fmt.Errorf("field %s: the Avro type %s has no Parquet mapping", orRoot(path), s.Type())
	}
	if n.kind == avNull {
		// A null is always null: an optional column of Parquet's null type.
		n.def = def
		n.pq = parquet.Optional(pq)
		return n, nil
	}
	if n.null >= 0 {
		n.pq = parquet.Optional(pq)
	} else {
		n.pq = parquet.Required(pq)
	}
	return n, nil
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orRoot(path string) string {
	if path == "" {
		return "(the record)"
	}
	return path
}

func unionNames(types avro.Schemas) string {
	names := make([]string, len(types))
	for i, t := range types {
		names[i] = string(t.Type())
	}
	return strings.Join(names, ", ")
}
