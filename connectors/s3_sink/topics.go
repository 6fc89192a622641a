package s3sink

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/picomq/pico-connectors/sdk"
)

// What SetTopics learnt of the [[topics]] blocks: each block's Parquet
// layout when it is Avro (parquet_avro), and the reader of path_template's
// {field:...} parts of its records (keys_avro).

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

// avroFields reads the {field:...} parts of Avro records (payloadFields),
// each with its topic's avroKey; key is the last record's, ok whether it
// decoded.
type avroFields struct {
	topics *avroTopics
	walk   avroWalk
	key    *avroKey
	ok     bool
}

// read walks rec's Avro binary with its topic's schema, when rec is Avro
// and SetTopics gave one, up to the last field a path reads (what follows
// is not checked).
func (f *avroFields) read(rec *sdk.Record) bool {
	f.key = f.topics.key(rec)
	if f.key == nil {
		return false
	}
	f.walk.reset(f.key.width, rec.Payload)
	_, err := f.walk.record(f.key.root, 0, 0, 0)
	f.ok = err == nil
	return true
}

// appendField appends the text of part i's value: a string's or bytes'
// value, an enum's symbol, a number's or a boolean's text; nothing when
// it is null, a record, array or map, or the payload did not decode.
func (f *avroFields) appendField(dst []byte, i int) []byte {
	c := f.key.cols[i]
	if !f.ok || c < 0 || len(f.walk.cols[c]) == 0 {
		return dst
	}
	v := f.walk.cols[c][0]
	switch v.Kind() {
	case parquet.ByteArray, parquet.FixedLenByteArray:
		return append(dst, v.ByteArray()...)
	case parquet.Boolean:
		return strconv.AppendBool(dst, v.Boolean())
	case parquet.Int32:
		return strconv.AppendInt(dst, int64(v.Int32()), 10)
	case parquet.Int64:
		return strconv.AppendInt(dst, v.Int64(), 10)
	case parquet.Float:
		return strconv.AppendFloat(dst, float64(v.Float()), 'g', -1, 32)
	case parquet.Double:
		return strconv.AppendFloat(dst, v.Double(), 'g', -1, 64)
	}
	return dst // a null
}

// key returns the reader of rec's fields when rec is Avro and its topic's
// block is Avro; nil otherwise.
func (at *avroTopics) key(rec *sdk.Record) *avroKey {
	if rec.Schema != sdk.SchemaAvro {
		return nil
	}
	if b := at.block(rec.Topic); b != nil {
		return b.key
	}
	return nil
}

// fieldTime returns the time of part i's value (payloadFields): a
// timestamp or date by its unit, a long as epoch milliseconds, a string
// parsed as the parquet columns parse an RFC 3339 time; false when it is
// null, not a time or the payload did not decode.
func (f *avroFields) fieldTime(i int) (time.Time, bool) {
	c := f.key.cols[i]
	if !f.ok || c < 0 || len(f.walk.cols[c]) == 0 {
		return time.Time{}, false
	}
	v := f.walk.cols[c][0]
	switch v.Kind() {
	case parquet.ByteArray:
		t, err := time.Parse(timestampForm.layout, string(v.ByteArray()))
		return t, err == nil
	case parquet.Int32:
		return unitDays.at(int64(v.Int32())), f.key.units[i] == unitDays
	case parquet.Int64:
		return f.key.units[i].at(v.Int64()), true
	}
	return time.Time{}, false // a null
}
