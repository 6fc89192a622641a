package broker

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Record is one record read back from a topic by ReadTopic.
type Record struct {
	Offset  int64
	Key     []byte
	Value   []byte
	Headers map[string]string
}

// ReadTopic reads every record of partition 0 of topic, from the log start
// to the high watermark at the time of the call (ReadPartition).
func (b *Broker) ReadTopic(ctx context.Context, topic string) ([]Record, error) {
	end := b.HighWatermark(topic)
	if end < 0 {
		return nil, fmt.Errorf("topic %q does not exist", topic)
	}
	return ReadPartition(ctx, topic, end, b.clientOpts()...)
}

// ReadPartition reads the records of partition 0 of topic from the log
// start up to end (not included), without transaction markers
// (read_uncommitted: an aborted transaction's records are in), with a
// franz-go client made from opts: the seed brokers and any login. It is
// meant for tests, the demo and drivers (such as those that read the broker
// of a runtime they run as a subprocess): it is independent of librdkafka.
func ReadPartition(ctx context.Context, topic string, end int64, opts ...kgo.Opt) ([]Record, error) {
	if end <= 0 {
		return nil, nil
	}
	cl, err := kgo.NewClient(append(opts[:len(opts):len(opts)],
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(64<<20),
		// A transaction's commit marker may be the last offset: kept, so
		// that the read sees it and ends, and left out of the result.
		kgo.KeepControlRecords(),
	)...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []Record
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("read %s: %d of %d records: %w", topic, len(out), end, err)
		}
		for _, e := range fs.Errors() {
			return out, fmt.Errorf("read %s: %w", topic, e.Err)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end {
				done = true
				return
			}
			if r.Offset == end-1 {
				done = true
			}
			if r.Attrs.IsControl() {
				return
			}
			rec := Record{Offset: r.Offset, Key: r.Key, Value: r.Value}
			if len(r.Headers) > 0 {
				rec.Headers = map[string]string{}
				for _, h := range r.Headers {
					rec.Headers[h.Key] = string(h.Value)
				}
			}
			out = append(out, rec)
		})
		if done {
			return out, nil
		}
	}
}
