package sinkloop

import (
	"errors"
	"fmt"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/codec"
	"github.com/picomq/pico-connectors/runtime/deadletter"
	"github.com/picomq/pico-connectors/runtime/transform"
	"github.com/picomq/pico-connectors/sdk"
)

// topicInfo is what the loop knows of a topic: the first block that
// matches it.
type topicInfo struct {
	schema sdk.Schema
	sub    *subscription // nil when no block matches (never, with a sane broker)
}

func (l *loop) topic(topic string) topicInfo {
	if ti, ok := l.topics.Load(topic); ok {
		return ti.(topicInfo)
	}
	ti := topicInfo{schema: sdk.SchemaRaw}
	for i := range l.plan.subs {
		if s := &l.plan.subs[i]; s.matches(topic) {
			ti = topicInfo{schema: s.schema, sub: s}
			break
		}
	}
	l.topics.Store(topic, ti)
	return ti
}

// record builds the sdk.Record of a message of topic as consumed;
// prepare checks and transforms it later, off the poll loop.
func record(m *kafka.Message, topic string, schema sdk.Schema) sdk.Record {
	r := sdk.Record{
		Topic:     topic,
		Partition: m.TopicPartition.Partition,
		Offset:    int64(m.TopicPartition.Offset),
		Timestamp: m.Timestamp,
		Key:       m.Key,
		Payload:   m.Value,
		Schema:    schema,
	}
	if len(m.Headers) > 0 {
		r.Headers = make([]sdk.Header, len(m.Headers))
		for i, h := range m.Headers {
			r.Headers[i] = sdk.Header{Key: h.Key, Value: h.Value}
		}
	}
	return r
}

// prepare returns the records the plugin sees, and those bound for a
// dead-letter topic, from a batch as consumed. It checks each payload
// against its schema once (json must parse, text must be UTF-8) and runs
// the transforms. A payload that does not match goes to the block's
// dead_letter_topic (stage decode) or, without one, is handed over as raw
// and untransformed, with a warning. A transform error sends the record to
// the dead_letter_topic (stage transform) or, without one, fails the
// batch. batch itself is never modified: a failed batch is prepared again
// when it is redelivered.
func (l *loop) prepare(batch []sdk.Record) (out []sdk.Record, dead []deadLetter, err error) {
	t0 := time.Now()
	out = batch
	copied := false
	edit := func(i int) {
		if !copied {
			out = append(make([]sdk.Record, 0, len(batch)), batch[:i]...)
			copied = true
		}
	}
	transforms := len(l.cfg.Transforms) > 0
	var info topicInfo
	for i := range batch {
		r := batch[i]
		if i == 0 || r.Topic != batch[i-1].Topic {
			info = l.topic(r.Topic) // records come in runs of one topic
		}
		dlq := ""
		if info.sub != nil {
			dlq = info.sub.dlq
		}
		canTransform := transforms && info.sub != nil && info.sub.codec != nil
		var decoded any
		var derr error
		if canTransform {
			decoded, derr = info.sub.codec.Decode(r.Payload)
		} else if !codec.ValidSinkPayload(r.Schema, r.Payload) {
			derr = fmt.Errorf("payload is not valid %s", r.Schema)
		}
		if derr != nil {
			edit(i)
			if dlq != "" {
				dead = append(dead, deadLetter{topic: dlq, rec: r, stage: deadletter.StageDecode, err: derr})
				continue
			}
			l.log.Warn("payload does not match the topic's schema; handing it over as raw", "topic", r.Topic, "offset", r.Offset, "schema", r.Schema, "err", derr)
			r.Schema = sdk.SchemaRaw
			out = append(out, r)
			continue
		}
		if !canTransform {
			if copied {
				out = append(out, r)
			}
			continue
		}
		edit(i)
		tr := &sdk.TransformRecord{Key: r.Key, Headers: append([]sdk.Header(nil), r.Headers...), Value: decoded}
		if terr := transform.ApplyAll(l.cfg.Transforms, tr); terr != nil {
			if dlq != "" {
				dead = append(dead, deadLetter{topic: dlq, rec: r, stage: deadletter.StageTransform, err: terr})
				continue
			}
			return nil, nil, fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, terr)
		}
		payload, eerr := info.sub.codec.Encode(tr.Value)
		if eerr != nil {
			eerr = fmt.Errorf("encode the transformed record as %s: %w", r.Schema, eerr)
			if dlq != "" {
				dead = append(dead, deadLetter{topic: dlq, rec: r, stage: deadletter.StageTransform, err: eerr})
				continue
			}
			return nil, nil, fmt.Errorf("record %s/%d@%d: %w", r.Topic, r.Partition, r.Offset, eerr)
		}
		r.Key, r.Headers, r.Payload = tr.Key, tr.Headers, payload
		out = append(out, r)
	}
	if transforms {
		l.transformH.Observe(time.Since(t0).Seconds())
	}
	return out, dead, nil
}

// rejected turns a *sdk.Rejected from Consume into dead letters when
// every rejected record's block has a dead_letter_topic; otherwise it
// returns the error, and the batch fails, with the rejected records that
// have nowhere to go (a DeferredSink's commits must stop below them).
func (l *loop) rejected(err error) ([]deadLetter, []sdk.Record, error) {
	var rej *sdk.Rejected
	if !errors.As(err, &rej) || len(rej.Records) == 0 {
		return nil, nil, err
	}
	dead := make([]deadLetter, 0, len(rej.Records))
	for _, r := range rej.Records {
		info := l.topic(r.Record.Topic)
		if info.sub == nil || info.sub.dlq == "" {
			held := make([]sdk.Record, len(rej.Records))
			for i, r := range rej.Records {
				held[i] = r.Record
			}
			return nil, held, fmt.Errorf("%w (the [[topics]] block of %q has no dead_letter_topic: commits stop before the rejected record; set dead_letter_topic to move past it)", err, r.Record.Topic)
		}
		dead = append(dead, deadLetter{topic: info.sub.dlq, rec: r.Record, stage: deadletter.StageConsume, err: r.Err})
	}
	return dead, nil, nil
}
