package sourceloop

import (
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/route"
	"github.com/picomq/pico-connectors/sdk"
)

type outRecord struct {
	b   *block
	msg kafka.Message
}

// prepare decodes, transforms, routes and encodes every message once per
// block. A message that fails decode, transform or routing goes to the
// block's dead_letter_topic when it has one (dead counts those), and fails
// the batch otherwise.
func (l *loop) prepare(msgs []sdk.Message) (out []outRecord, dead int, err error) {
	if n := len(msgs) * len(l.blocks); cap(l.spare) >= n {
		out, l.spare = l.spare[:0], nil
	} else {
		out = make([]outRecord, 0, n)
	}
	var decodeT, transformT time.Duration
	for _, b := range l.blocks {
		fast := len(l.cfg.Transforms) == 0 && !b.router.NeedsValue()
		// topic points at the topic of the last record, shared by the
		// next records with the same one.
		var topic *string
		t0 := time.Now()
		for i := range msgs {
			m := &msgs[i]
			if m.Topic != "" {
				// The source's own topic: once, as is, through the first
				// block (sdk.Message.Topic).
				if b.idx == 0 {
					t := m.Topic
					out = append(out, outRecord{b: b, msg: kafka.Message{
						TopicPartition: kafka.TopicPartition{Topic: &t, Partition: kafka.PartitionAny},
						Key:            m.Key,
						Value:          m.Payload,
						Timestamp:      m.Timestamp,
						Headers:        kafkaHeaders(m.Headers),
					}})
				}
				continue
			}
			var (
				value   []byte
				key     = m.Key
				headers = m.Headers
				name    string
				stage   deadletter.Stage
				err     error
			)
			if fast {
				stage = deadletter.StageDecode
				value, err = b.codec.Wire(m.Payload)
				if err != nil {
					err = fmt.Errorf("schema %s: %w", b.codec.Schema(), err)
				} else {
					stage = deadletter.StageRoute
					name, err = b.router.Topic(route.Input{Key: key, Headers: headers})
				}
			} else {
				name, key, headers, value, stage, err = l.slowPath(b, m, &decodeT, &transformT)
			}
			if err != nil {
				err = fmt.Errorf("record %d of the batch, topics[%d]: %w", i, b.idx, err)
				if b.def.DeadLetterTopic == "" {
					return nil, 0, err
				}
				if name == "" {
					name = b.def.Topic.Literal
				}
				dl := b.def.DeadLetterTopic
				out = append(out, outRecord{b: b, msg: kafka.Message{
					TopicPartition: kafka.TopicPartition{Topic: &dl, Partition: kafka.PartitionAny},
					Key:            m.Key,
					Value:          m.Payload,
					Timestamp:      m.Timestamp,
					Headers:        kafkaHeaders(deadletter.Headers(m.Headers, deadletter.Origin{Connector: l.cfg.Key, Stage: stage, Topic: name, Offset: -1, Timestamp: m.Timestamp}, err)),
				}})
				l.log.Debug("record sent to the dead-letter topic", "dead_letter_topic", dl, "err", err)
				dead++
				continue
			}
			if topic == nil || *topic != name {
				topic = &name
			}
			out = append(out, outRecord{b: b, msg: kafka.Message{
				TopicPartition: kafka.TopicPartition{Topic: topic, Partition: kafka.PartitionAny},
				Key:            key,
				Value:          value,
				Timestamp:      m.Timestamp,
				Headers:        kafkaHeaders(headers),
			}})
		}
		if fast {
			decodeT += time.Since(t0)
		}
	}
	l.decodeH.Observe(decodeT.Seconds())
	if len(l.cfg.Transforms) > 0 {
		l.transformH.Observe(transformT.Seconds())
	}
	return out, dead, nil
}

// slowPath decodes m, runs the transforms, routes and encodes the result;
// on failure it says at which stage.
func (l *loop) slowPath(b *block, m *sdk.Message, decodeT, transformT *time.Duration) (topic string, key []byte, headers []sdk.Header, value []byte, stage deadletter.Stage, err error) {
	t0 := time.Now()
	v, err := b.codec.Decode(m.Payload)
	if err != nil {
		*decodeT += time.Since(t0)
		return "", nil, nil, nil, deadletter.StageDecode, fmt.Errorf("schema %s: %w", b.codec.Schema(), err)
	}
	t1 := time.Now()
	*decodeT += t1.Sub(t0)
	rec := &sdk.TransformRecord{Key: m.Key, Headers: append([]sdk.Header(nil), m.Headers...), Value: v}
	for ti, tr := range l.cfg.Transforms {
		if err := tr.Apply(rec); err != nil {
			*transformT += time.Since(t1)
			return "", nil, nil, nil, deadletter.StageTransform, fmt.Errorf("transform %d: %w", ti, err)
		}
	}
	t2 := time.Now()
	*transformT += t2.Sub(t1)
	defer func() { *decodeT += time.Since(t2) }()
	topic, err = b.router.Topic(route.Input{Key: rec.Key, Headers: rec.Headers, Value: rec.Value})
	if err != nil {
		return "", nil, nil, nil, deadletter.StageRoute, err
	}
	value, err = b.codec.Encode(rec.Value)
	if err != nil {
		// The value decoded, so a transform made it unencodable (or, with
		// none, the schema cannot carry it back).
		stage = deadletter.StageDecode
		if len(l.cfg.Transforms) > 0 {
			stage = deadletter.StageTransform
		}
		return topic, nil, nil, nil, stage, fmt.Errorf("schema %s: %w", b.codec.Schema(), err)
	}
	return topic, rec.Key, rec.Headers, value, "", nil
}

func kafkaHeaders(hs []sdk.Header) []kafka.Header {
	if len(hs) == 0 {
		return nil
	}
	out := make([]kafka.Header, len(hs))
	for j, h := range hs {
		out[j] = kafka.Header{Key: h.Key, Value: h.Value}
	}
	return out
}
