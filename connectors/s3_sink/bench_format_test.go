package s3sink

import (
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// benchRecords returns n records with 100-byte JSON payloads and keys.
func benchRecords(n, payloadSize int) []sdk.Record {
	out := make([]sdk.Record, n)
	base := time.Date(2026, 9, 3, 21, 15, 4, 0, time.UTC)
	for i := range out {
		p := fmt.Sprintf(`{"id":%d,"customer":"user-%d","total":%d.5,"currency":"EUR","items":[1,2,3],"note":"`, i, i%1000, i%977)
		p += strings.Repeat("x", max(0, payloadSize-2-len(p))) + `"}`
		out[i] = sdk.Record{Topic: "orders.eu", Offset: int64(1000 + i), Timestamp: base.Add(time.Duration(i) * 37 * time.Microsecond),
			Key: []byte(fmt.Sprintf("user-%d", i%1000)), Payload: []byte(p), Schema: sdk.SchemaJSON}
	}
	return out
}

// jsonRecord is the same object, for encoding/json.
type jsonRecord struct {
	Offset    int64           `json:"offset"`
	Timestamp string          `json:"timestamp"`
	Topic     string          `json:"topic"`
	Partition int32           `json:"partition"`
	Key       []byte          `json:"key,omitempty"`
	Payload   json.RawMessage `json:"payload"`
}

// jsonRecordDecoded carries the payload decoded, as a parse-and-reserialise
// formatter would.
type jsonRecordDecoded struct {
	Offset    int64  `json:"offset"`
	Timestamp string `json:"timestamp"`
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Key       []byte `json:"key,omitempty"`
	Payload   any    `json:"payload"`
}

const benchN = 4096

func benchSink(b *testing.B) {
	recs := benchRecords(benchN, 100)
	o := defaultOptions()
	f := newFormatter(&o)
	tail := metaTail("orders.eu", 0)
	buf := make([]byte, 0, 8<<20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if len(buf) > 7<<20 {
			buf = buf[:0]
		}
		buf = f.appendRecord(buf, &recs[i%benchN], false, tail)
	}
	b.SetBytes(int64(len(recs[0].Payload)))
}

func benchEncodingJSON(b *testing.B) {
	recs := benchRecords(benchN, 100)
	buf := make([]byte, 0, 8<<20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := &recs[i%benchN]
		if len(buf) > 7<<20 {
			buf = buf[:0]
		}
		out, err := json.Marshal(jsonRecord{Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			Topic: r.Topic, Partition: r.Partition, Key: r.Key, Payload: r.Payload})
		if err != nil {
			b.Fatal(err)
		}
		buf = append(append(buf, out...), '\n')
	}
	b.SetBytes(int64(len(recs[0].Payload)))
}

func benchEncodingJSONDecoded(b *testing.B) {
	recs := benchRecords(benchN, 100)
	buf := make([]byte, 0, 8<<20)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r := &recs[i%benchN]
		if len(buf) > 7<<20 {
			buf = buf[:0]
		}
		var payload any
		if err := json.Unmarshal(r.Payload, &payload); err != nil {
			b.Fatal(err)
		}
		out, err := json.Marshal(jsonRecordDecoded{Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
			Topic: r.Topic, Partition: r.Partition, Key: r.Key, Payload: payload})
		if err != nil {
			b.Fatal(err)
		}
		buf = append(append(buf, out...), '\n')
	}
	b.SetBytes(int64(len(recs[0].Payload)))
}

// BenchmarkFormat formats json_lines with metadata on 100-byte JSON
// payloads: the sink's formatter, encoding/json with the payload as a
// RawMessage, and encoding/json with the payload decoded and re-encoded.
func BenchmarkFormat(b *testing.B) {
	b.Run("sink", benchSink)
	b.Run("encoding_json", benchEncodingJSON)
	b.Run("encoding_json_decoded", benchEncodingJSONDecoded)
}

// BenchmarkFormatRatio formats the same records with the sink's formatter
// and with encoding/json in one run, interleaved, and reports records/s,
// allocations per record and the speed-up (target: at least 4x).
func BenchmarkFormatRatio(b *testing.B) {
	recs := benchRecords(benchN, 100)
	o := defaultOptions()
	f := newFormatter(&o)
	tail := metaTail("orders.eu", 0)
	buf := make([]byte, 0, 8<<20)
	var sinkNs, rawNs, decNs time.Duration
	var sinkAllocs uint64
	var ms runtime.MemStats
	for i := 0; i < b.N; i++ {
		runtime.ReadMemStats(&ms)
		before := ms.Mallocs
		start := time.Now()
		buf = buf[:0]
		for j := range recs {
			buf = f.appendRecord(buf, &recs[j], false, tail)
		}
		sinkNs += time.Since(start)
		runtime.ReadMemStats(&ms)
		sinkAllocs += ms.Mallocs - before

		start = time.Now()
		buf = buf[:0]
		for j := range recs {
			r := &recs[j]
			out, _ := json.Marshal(jsonRecord{Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
				Topic: r.Topic, Partition: r.Partition, Key: r.Key, Payload: r.Payload})
			buf = append(append(buf, out...), '\n')
		}
		rawNs += time.Since(start)

		start = time.Now()
		buf = buf[:0]
		for j := range recs {
			r := &recs[j]
			var payload any
			_ = json.Unmarshal(r.Payload, &payload)
			out, _ := json.Marshal(jsonRecordDecoded{Offset: r.Offset, Timestamp: r.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00"),
				Topic: r.Topic, Partition: r.Partition, Key: r.Key, Payload: payload})
			buf = append(append(buf, out...), '\n')
		}
		decNs += time.Since(start)
	}
	n := float64(b.N * benchN)
	b.ReportMetric(n/sinkNs.Seconds(), "sink_rec/s")
	b.ReportMetric(float64(sinkAllocs)/n, "sink_allocs/rec")
	b.ReportMetric(n/rawNs.Seconds(), "encjson_rec/s")
	b.ReportMetric(float64(rawNs)/float64(sinkNs), "x_vs_encjson")
	b.ReportMetric(float64(decNs)/float64(sinkNs), "x_vs_encjson_decoded")
}

// BenchmarkCompactValid compacts valid JSON payloads of 100 B and 1 KiB,
// written compact and with a space after each colon and comma (as
// Python's json.dumps writes them), with the checking compactor
// (jsonscan.AppendCompact, for raw payloads) and with jsonscan.AppendStripped (for json
// payloads, which the runtime has checked).
func BenchmarkCompactValid(b *testing.B) {
	for _, size := range []int{100, 1024} {
		recs := benchRecords(64, size)
		for _, spaced := range []bool{false, true} {
			payloads := make([][]byte, len(recs))
			for i, r := range recs {
				payloads[i] = r.Payload
				if spaced {
					payloads[i] = []byte(strings.NewReplacer(`,"`, `, "`, `":`, `": `).Replace(string(r.Payload)))
				}
			}
			name := fmt.Sprintf("%dB", size)
			if spaced {
				name += "_spaced"
			}
			for _, f := range []struct {
				name string
				fn   func(dst, src []byte) []byte
			}{
				{"appendCompactJSON", func(dst, src []byte) []byte { out, _ := jsonscan.AppendCompact(dst, src); return out }},
				{"appendStripped", jsonscan.AppendStripped},
			} {
				b.Run(name+"/"+f.name, func(b *testing.B) {
					buf := make([]byte, 0, 4096)
					b.SetBytes(int64(len(payloads[0])))
					i := 0
					for b.Loop() {
						buf = f.fn(buf[:0], payloads[i%len(payloads)])
						i++
					}
				})
			}
		}
	}
}

// manyHeaders returns n headers: every tenth name is used twice (once
// early, once late), the others once, so grouping must look across the
// whole list.
func manyHeaders(n int) []sdk.Header {
	hs := make([]sdk.Header, n)
	for i := range hs {
		name := i
		if i%10 == 9 {
			name = i - n/2
		}
		hs[i] = sdk.Header{Key: fmt.Sprintf("h-%d", name), Value: []byte("v")}
	}
	return hs
}

// BenchmarkHeadersScale formats one record with 10k headers and one with
// 100k (include_headers) in each iteration and reports the ratio of their
// times: about 10 when formatting is linear in the number of headers, about
// 100 when it is quadratic (it was: 80k headers took 18.7 s).
func BenchmarkHeadersScale(b *testing.B) {
	o := defaultOptions()
	o.IncludeHeaders = true
	f := newFormatter(&o)
	small, large := rec(sdk.SchemaJSON, `{"id":7}`), rec(sdk.SchemaJSON, `{"id":7}`)
	small.Headers, large.Headers = manyHeaders(10_000), manyHeaders(100_000)
	tail := metaTail(small.Topic, 0)
	buf := make([]byte, 0, 8<<20)
	var smallNs, largeNs time.Duration
	for b.Loop() {
		start := time.Now()
		buf = f.appendRecord(buf[:0], &small, false, tail)
		smallNs += time.Since(start)
		start = time.Now()
		buf = f.appendRecord(buf[:0], &large, false, tail)
		largeNs += time.Since(start)
	}
	b.ReportMetric(float64(largeNs)/float64(smallNs), "x_100k_vs_10k")
	b.ReportMetric(float64(largeNs.Nanoseconds())/float64(b.N)/100_000, "ns/header_100k")
}
