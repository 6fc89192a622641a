package sourceloop

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/picomq/pico-connectors/runtime/codec"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/route"
)

// Defaults of a [[topics]] block of a source.
const (
	DefaultBatchLength = 1000
	DefaultLingerTime  = "5ms"
)

// CheckTopics checks a source's [[topics]] blocks the way Run will use them
// and returns every problem at once (errors.Join), each naming
// topics[i].KEY. baseDir resolves a relative avro_schema_path.
func CheckTopics(topics []definition.Topics, baseDir string) error {
	_, err := compileBlocks(topics, baseDir)
	return err
}

type blockSpec struct {
	idx    int
	def    definition.Topics
	router *route.Router
	codec  *codec.Codec
	linger int // milliseconds
	batch  int
}

func compileBlocks(topics []definition.Topics, baseDir string) ([]blockSpec, error) {
	if len(topics) == 0 {
		return nil, errors.New("a source needs at least one [[topics]] block")
	}
	var errs []error
	out := make([]blockSpec, 0, len(topics))
	for i, t := range topics {
		bad := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("topics[%d].%s", i, fmt.Sprintf(format, args...)))
		}
		spec := blockSpec{idx: i, def: t, batch: t.BatchLength}
		r, err := route.Compile(t.Topic)
		if err != nil {
			errs = append(errs, fmt.Errorf("topics[%d].%v", i, err))
		}
		spec.router = r
		c, err := codec.New(codec.Options{Schema: t.Schema, AvroSchemaJSON: t.AvroSchemaJSON, AvroSchemaPath: t.AvroSchemaPath, BaseDir: baseDir})
		if err != nil {
			bad("schema: %v", err)
		}
		spec.codec = c
		if t.Pattern != "" {
			bad("pattern %q applies to sinks; a source names its destination with topic", t.Pattern)
		}
		if t.Partitions != 0 && t.Partitions != 1 {
			bad("partitions = %d: PicoMQ topics have one partition, so only 1 is accepted", t.Partitions)
		}
		if t.ReplicationFactor != 0 && t.ReplicationFactor != 1 {
			bad("replication_factor = %d: only 1 is accepted", t.ReplicationFactor)
		}
		switch {
		case t.BatchLength < 0 || t.BatchLength > definition.MaxBatchLength:
			bad("batch_length = %d: must be 1 to %d", t.BatchLength, definition.MaxBatchLength)
		case t.BatchLength == 0:
			spec.batch = DefaultBatchLength
		}
		linger := t.LingerTime
		if linger == "" {
			linger = DefaultLingerTime
		}
		d, err := confkit.ParseDuration(linger)
		if err != nil || d < 0 {
			bad("linger_time %q: want a duration such as \"5ms\" or \"1s\"", t.LingerTime)
		} else if d > definition.MaxLingerTime {
			bad("linger_time %q: use at most 15m (librdkafka's queue.buffering.max.ms bound)", t.LingerTime)
		} else {
			spec.linger = int(d.Milliseconds())
		}
		if err := checkProperties(fmt.Sprintf("topics[%d].properties", i), t.Properties); err != nil {
			errs = append(errs, err)
		}
		for _, k := range definition.ReservedProducer {
			if _, ok := t.Properties[k]; ok {
				bad("properties.%q is set by the runtime and cannot be overridden", k)
			}
		}
		out = append(out, spec)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return out, nil
}

// checkProperties refuses properties that would weaken the producers'
// acks=all and idempotence, naming each key.
func checkProperties(key string, props map[string]string) error {
	var errs []error
	for _, k := range slices.Sorted(maps.Keys(props)) {
		if msg := definition.WeakensProducer(k, props[k]); msg != "" {
			errs = append(errs, fmt.Errorf("%s.%q: %s", key, k, msg))
		}
	}
	return errors.Join(errs...)
}
