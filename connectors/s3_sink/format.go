package s3sink

import (
	"encoding/base64"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// formatter appends records to a file buffer in the configured output
// format. It allocates nothing per record: every piece is appended
// straight into the buffer.
type formatter struct {
	format          format
	includeMetadata bool
	includeHeaders  bool

	// Cache of the last formatted second: "2006-01-02T15:04:05."
	lastSecond int64
	secondText []byte
}

func newFormatter(o *options) *formatter {
	return &formatter{
		format:          o.Format,
		includeMetadata: o.IncludeMetadata,
		includeHeaders:  o.IncludeHeaders,
		lastSecond:      -1 << 63,
		secondText:      make([]byte, 0, 32),
	}
}

// metaTail returns the part of every object of one topic and partition
// that follows the timestamp: ,"topic":"...","partition":N.
func metaTail(topic string, partition int32) []byte {
	b := append([]byte(nil), `,"topic":`...)
	b = jsonscan.AppendString(b, topic)
	b = append(b, `,"partition":`...)
	return strconv.AppendInt(b, int64(partition), 10)
}

// finish appends what closes a file: the closing bracket of json_array.
// The opening one is written with the first record.
func (f *formatter) finish(dst []byte) []byte {
	if f.format == formatJSONArray {
		return append(dst, ']')
	}
	return dst
}

// estimate returns an upper bound of the bytes appendRecord writes for rec,
// used to size the buffer so it never grows past max_file_size plus one
// record.
func (f *formatter) estimate(rec *sdk.Record, topicLen int) int {
	if f.format == formatRaw {
		return len(rec.Payload)
	}
	n := 2 + len(`"payload":`) + payloadBound(rec)
	if f.includeMetadata {
		n += 128 + 6*topicLen + base64Len(len(rec.Key))
	}
	if f.includeHeaders {
		n += 16
		for _, h := range rec.Headers {
			n += 8 + 6*len(h.Key) + max(6*len(h.Value), base64Len(len(h.Value)))
		}
	}
	return n
}

func base64Len(n int) int { return (n+2)/3*4 + 2 }

func payloadBound(rec *sdk.Record) int {
	switch rec.Schema {
	case sdk.SchemaText, sdk.SchemaProto:
		if len(rec.Payload) > 512 {
			// A large record is measured, so it does not reserve six
			// times its size.
			return jsonscan.StringLen(rec.Payload)
		}
		return 6*len(rec.Payload) + 2
	}
	return base64Len(len(rec.Payload)) + 4
}

// appendRecord appends one record. first tells whether it is the first
// record of the file; tail is metaTail of the record's topic and partition.
func (f *formatter) appendRecord(dst []byte, rec *sdk.Record, first bool, tail []byte) []byte {
	switch f.format {
	case formatRaw:
		return append(dst, rec.Payload...)
	case formatJSONArray:
		if first {
			dst = append(dst, '[')
		} else {
			dst = append(dst, ',')
		}
	}
	dst = append(dst, '{')
	if f.includeMetadata {
		dst = append(dst, `"offset":`...)
		dst = strconv.AppendInt(dst, rec.Offset, 10)
		dst = append(dst, `,"timestamp":"`...)
		dst = f.appendTimestamp(dst, rec.Timestamp)
		dst = append(dst, '"')
		dst = append(dst, tail...)
		if rec.Key != nil {
			dst = append(dst, `,"key":`...)
			dst = appendBase64(dst, rec.Key)
		}
		dst = append(dst, ',')
	}
	if f.includeHeaders && len(rec.Headers) > 0 {
		dst = appendHeaders(dst, rec.Headers)
		dst = append(dst, ',')
	}
	dst = append(dst, `"payload":`...)
	dst = appendPayload(dst, rec)
	dst = append(dst, '}')
	if f.format == formatJSONLines {
		dst = append(dst, '\n')
	}
	return dst
}

// appendHeaders appends "headers":{...}, names in order of first
// appearance. A name that appears once has its value; a name that appears
// more than once has an array of all its values, in record order. It takes
// time linear in the number of headers, and allocates nothing for a record
// of at most smallHeaders headers.
func appendHeaders(dst []byte, hs []sdk.Header) []byte {
	var nextBuf [smallHeaders]int32
	var laterBuf [smallHeaders]bool
	next, later := linkHeaders(hs, nextBuf[:0], laterBuf[:0])
	dst = append(dst, `"headers":{`...)
	for i := range hs {
		if later[i] {
			continue
		}
		if dst[len(dst)-1] != '{' {
			dst = append(dst, ',')
		}
		dst = jsonscan.AppendString(dst, hs[i].Key)
		dst = append(dst, ':')
		if next[i] < 0 {
			dst = appendHeaderValue(dst, hs[i].Value)
			continue
		}
		dst = append(dst, '[')
		dst = appendHeaderValue(dst, hs[i].Value)
		for j := next[i]; j >= 0; j = next[j] {
			dst = append(dst, ',')
			dst = appendHeaderValue(dst, hs[j].Value)
		}
		dst = append(dst, ']')
	}
	return append(dst, '}')
}

// smallHeaders is the number of headers up to which linkHeaders compares
// names pairwise (at most 120 comparisons, no allocation); past it, it
// indexes them in a map.
const smallHeaders = 16

// linkHeaders returns, for each header i, the index of the next header with
// its name (-1 for none) and whether an earlier header has its name. It
// appends to next and later, which have room for smallHeaders headers.
func linkHeaders(hs []sdk.Header, next []int32, later []bool) ([]int32, []bool) {
	for range hs {
		next = append(next, -1)
		later = append(later, false)
	}
	if len(hs) <= smallHeaders {
		for i := range hs {
			for j := i + 1; j < len(hs); j++ {
				if hs[j].Key == hs[i].Key {
					next[i], later[j] = int32(j), true
					break
				}
			}
		}
		return next, later
	}
	last := make(map[string]int32, len(hs))
	for i := range hs {
		if j, ok := last[hs[i].Key]; ok {
			next[j], later[i] = int32(i), true
		}
		last[hs[i].Key] = int32(i)
	}
	return next, later
}

// appendHeaderValue appends a UTF-8 value as a string, any other as base64.
func appendHeaderValue(dst, v []byte) []byte {
	if utf8.Valid(v) {
		return jsonscan.AppendBytesString(dst, v)
	}
	return appendBase64(dst, v)
}

// appendPayload converts the payload by the topic's schema:
//
//	json               the document, compacted (null when empty)
//	text, proto        a string
//	raw                the document if valid JSON, otherwise base64
//	flatbuffer, avro   base64
//
// A json payload is valid JSON: the runtime checked it and hands one that
// fails the check over as raw (sdk.Record). So it is compacted without
// a second check of its grammar, once it is found to be valid UTF-8, which
// the runtime's check leaves out; one that is not is written as base64,
// like raw.
func appendPayload(dst []byte, rec *sdk.Record) []byte {
	p := rec.Payload
	switch rec.Schema {
	case sdk.SchemaText, sdk.SchemaProto:
		return jsonscan.AppendBytesString(dst, p)
	case sdk.SchemaFlatBuffer, sdk.SchemaAvro:
		return appendBase64(dst, p)
	case sdk.SchemaJSON:
		if len(p) == 0 {
			return append(dst, "null"...)
		}
		if utf8.Valid(p) {
			return jsonscan.AppendStripped(dst, p)
		}
		return appendBase64(dst, p)
	}
	if out, ok := jsonscan.AppendCompact(dst, p); ok {
		return out
	}
	return appendBase64(dst, p)
}

// appendTimestamp appends t as RFC 3339 in UTC with milliseconds, such as
// 2026-09-03T21:15:04.118Z. The text up to the second is cached, since
// consecutive records mostly share it.
func (f *formatter) appendTimestamp(dst []byte, t time.Time) []byte {
	sec := t.Unix()
	if sec != f.lastSecond {
		f.lastSecond = sec
		f.secondText = t.UTC().AppendFormat(f.secondText[:0], "2006-01-02T15:04:05.")
	}
	dst = append(dst, f.secondText...)
	ms := t.Nanosecond() / 1e6
	return append(dst, byte('0'+ms/100), byte('0'+ms/10%10), byte('0'+ms%10), 'Z')
}

// appendBase64 appends b as a JSON string holding its standard base64.
func appendBase64(dst, b []byte) []byte {
	dst = append(dst, '"')
	dst = base64.StdEncoding.AppendEncode(dst, b)
	return append(dst, '"')
}
