package sinkloop

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/picomq/pico-connectors/runtime/codec"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

// Defaults of a sink's [[topics]] block.
const (
	DefaultBatchLength  = 1000
	DefaultPollInterval = "100ms"
)

// subscription is one [[topics]] block as the loop uses it.
type subscription struct {
	idx    int
	name   string         // what librdkafka subscribes to
	re     *regexp.Regexp // nil for a literal
	schema sdk.Schema
	codec  *codec.Codec // nil when it could not be built (CheckTopics reports why)
	dlq    string       // dead_letter_topic, "" for none
}

func (s *subscription) matches(topic string) bool {
	if s.re == nil {
		return s.name == topic
	}
	return s.re.MatchString(topic)
}

type plan struct {
	subs     []subscription
	batch    int
	interval time.Duration
	dlq      bool // some block has a dead_letter_topic
}

// CheckTopics checks a sink's [[topics]] blocks the way Run will use them
// and returns every problem at once (errors.Join), each naming
// topics[i].KEY. baseDir resolves a relative avro_schema_path. Besides each
// block's own keys it refuses blocks whose batch_length or poll_interval
// differ (one sink batches all its topics alike) and a dead_letter_topic
// that the sink itself consumes, through any of its blocks.
func CheckTopics(topics []definition.Topics, baseDir string) error {
	_, err := compile(topics, baseDir)
	return err
}

// SetTopics hands a sink that implements sdk.TopicSchemas its [[topics]]
// blocks, as Run does before Open, and returns its error; other sinks are
// left alone. The blocks must have passed CheckTopics.
func SetTopics(sink sdk.Sink, topics []definition.Topics, baseDir string) error {
	ts, ok := sink.(sdk.TopicSchemas)
	if !ok {
		return nil
	}
	p, err := compile(topics, baseDir)
	if err != nil {
		return err
	}
	return ts.SetTopics(p.schemas())
}

// schemas lists the plan's blocks as a sink sees them.
func (p *plan) schemas() []sdk.TopicSchema {
	out := make([]sdk.TopicSchema, len(p.subs))
	for i, s := range p.subs {
		out[i] = sdk.TopicSchema{Block: s.idx, Topic: s.name, Pattern: s.re != nil, Schema: s.schema}
		if s.codec != nil {
			out[i].AvroSchema = s.codec.AvroText()
		}
	}
	return out
}

func compile(topics []definition.Topics, baseDir string) (plan, error) {
	var p plan
	if len(topics) == 0 {
		return p, errors.New("a sink needs at least one [[topics]] block with a pattern or a topic")
	}
	var errs []error
	batches := make([]int, len(topics))
	intervals := make([]time.Duration, len(topics))
	for i, t := range topics {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("topics[%d].%s", i, fmt.Sprintf(format, args...)))
		}
		schema := t.Schema
		if schema == "" {
			schema = string(sdk.SchemaJSON)
		}
		sub := subscription{idx: i, schema: sdk.Schema(schema), dlq: t.DeadLetterTopic}
		c, err := codec.New(codec.Options{Schema: schema, AvroSchemaJSON: t.AvroSchemaJSON, AvroSchemaPath: t.AvroSchemaPath, BaseDir: baseDir})
		if err != nil {
			bad("schema: %v", err)
		}
		sub.codec = c
		if err := t.CheckSinkTarget(fmt.Sprintf("topics[%d]", i)); err != nil {
			errs = append(errs, err)
		} else if t.Pattern != "" {
			pat := t.Pattern
			if !strings.HasPrefix(pat, "^") {
				pat = "^" + pat
			}
			// CheckSinkTarget compiled t.Pattern; "^" before it changes nothing.
			sub.name, sub.re = pat, regexp.MustCompile(pat)
		} else {
			sub.name = t.Topic.Literal
		}
		batches[i] = t.BatchLength
		if t.BatchLength < 0 || t.BatchLength > definition.MaxBatchLength {
			bad("batch_length = %d: must be 1 to %d", t.BatchLength, definition.MaxBatchLength)
		}
		if batches[i] == 0 {
			batches[i] = DefaultBatchLength
		}
		iv := t.PollInterval
		if iv == "" {
			iv = DefaultPollInterval
		}
		d, err := confkit.ParseDuration(iv)
		if err != nil || d <= 0 {
			bad("poll_interval %q: want a duration above zero, such as \"100ms\"", t.PollInterval)
		}
		intervals[i] = d
		if t.Partitions > 1 {
			bad("partitions = %d: only 1 is accepted", t.Partitions)
		}
		for _, k := range definition.ReservedConsumer {
			if _, ok := t.Properties[k]; ok {
				bad("properties.%q is set by the runtime and cannot be overridden", k)
			}
		}
		if t.DeadLetterTopic != "" {
			p.dlq = true // the definition loader checks the name
		}
		p.subs = append(p.subs, sub)
	}
	dflt := func(set bool) string {
		if set {
			return ""
		}
		return " (the default)"
	}
	for i := 1; i < len(topics); i++ {
		if batches[i] != batches[0] {
			errs = append(errs, fmt.Errorf("topics[%d].batch_length = %d%s differs from topics[0].batch_length = %d%s: one sink batches all its [[topics]] blocks alike; give every block the same batch_length, or run one sink per block",
				i, batches[i], dflt(topics[i].BatchLength != 0), batches[0], dflt(topics[0].BatchLength != 0)))
		}
		if intervals[i] != intervals[0] && intervals[i] > 0 && intervals[0] > 0 {
			errs = append(errs, fmt.Errorf("topics[%d].poll_interval = %s%s differs from topics[0].poll_interval = %s%s: one sink batches all its [[topics]] blocks alike; give every block the same poll_interval, or run one sink per block",
				i, intervals[i], dflt(topics[i].PollInterval != ""), intervals[0], dflt(topics[0].PollInterval != "")))
		}
	}
	for i, s := range p.subs {
		if s.dlq == "" {
			continue
		}
		for j := range p.subs {
			if p.subs[j].name != "" && p.subs[j].matches(s.dlq) {
				errs = append(errs, fmt.Errorf("topics[%d].dead_letter_topic %q is consumed by this sink (topics[%d] matches it): it would read its own dead letters; pick a topic outside the sink's patterns and topics",
					i, s.dlq, j))
			}
		}
	}
	if len(errs) > 0 {
		return p, errors.Join(errs...)
	}
	p.batch, p.interval = batches[0], intervals[0]
	return p, nil
}
