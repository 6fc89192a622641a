// Package deadletter names what a dead-letter record carries. A record that
// can never be delivered (a sink rejected it, or a source record failed
// decode, transform or routing) is produced to its [[topics]] block's
// dead_letter_topic with its own key, payload and headers, plus the headers
// below, which say why and where it came from.
package deadletter

import (
	"strconv"
	"time"

	"github.com/picomq/pico-connectors/sdk"
)

// The headers of a dead-letter record.
const (
	HeaderError     = "picomq.dlq.error"     // the error, as text
	HeaderStage     = "picomq.dlq.stage"     // where it failed: one of the Stage values
	HeaderConnector = "picomq.dlq.connector" // the connector's key
	HeaderTopic     = "picomq.dlq.topic"     // the original topic (sinks), or the routed one when known (sources)
	HeaderPartition = "picomq.dlq.partition" // the original partition (sinks only)
	HeaderOffset    = "picomq.dlq.offset"    // the original offset (sinks only)
	HeaderTimestamp = "picomq.dlq.timestamp" // the record time, RFC 3339 with milliseconds, UTC
)

// Stage is where a record failed.
type Stage string

// The stages a record can fail at.
const (
	StageConsume   Stage = "consume"   // a sink's plugin rejected it
	StageDecode    Stage = "decode"    // a source record did not decode under its schema
	StageTransform Stage = "transform" // a transform failed on it
	StageRoute     Stage = "route"     // a source record could not be routed and had no fallback
)

// Origin says where a dead-letter record came from.
type Origin struct {
	Connector string
	Stage     Stage
	// Topic, Partition and Offset are the original position of a sink's
	// record. For a source record Topic is the destination when known and
	// Offset is negative (there is no position yet).
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
}

// Headers returns the record's own headers followed by the dead-letter
// headers for origin and err.
func Headers(own []sdk.Header, o Origin, err error) []sdk.Header {
	out := make([]sdk.Header, 0, len(own)+7)
	out = append(out, own...)
	add := func(k, v string) { out = append(out, sdk.Header{Key: k, Value: []byte(v)}) }
	msg := "unknown error"
	if err != nil {
		msg = err.Error()
	}
	add(HeaderError, msg)
	add(HeaderStage, string(o.Stage))
	add(HeaderConnector, o.Connector)
	if o.Topic != "" {
		add(HeaderTopic, o.Topic)
	}
	if o.Offset >= 0 {
		add(HeaderPartition, strconv.FormatInt(int64(o.Partition), 10))
		add(HeaderOffset, strconv.FormatInt(o.Offset, 10))
	}
	if !o.Timestamp.IsZero() {
		add(HeaderTimestamp, o.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"))
	}
	return out
}
