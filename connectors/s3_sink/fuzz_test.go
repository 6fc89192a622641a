package s3sink

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// FuzzObjectKey parses an arbitrary path_template and renders an object key
// from an arbitrary topic, prefix, partition, offsets and time. It must
// never panic; a rendered key ends in <partition>-<first>-<last>.<ext>, has
// no empty path segment from the template, and what a placeholder put in
// it is sanitised (only ASCII letters, digits, '.', '_' and '-').
func FuzzObjectKey(f *testing.F) {
	f.Add("{topic}/{date}/{hour}", "orders.eu", "raw", int32(0), int64(1000), int64(1999), int64(1756934104118))
	f.Add("{topic_segment[-1]}/{topic_segment[0]}/{partition}", "a.b.c", "/raw/", int32(7), int64(0), int64(0), int64(0))
	f.Add("{topic_segment[5]}", "a.b", "", int32(0), int64(1), int64(2), int64(-62135596800000))
	f.Add("x/{timestamp}//{topic}/", "ünïcode topic/with slashes", "p", int32(-1), int64(-5), int64(9223372036854775807), int64(253402300799999))
	f.Add("{topic", "t", "", int32(0), int64(0), int64(0), int64(0))
	f.Add("}{", "t", "", int32(0), int64(0), int64(0), int64(0))
	f.Add("{topic_segment[x]}", "t", "", int32(0), int64(0), int64(0), int64(0))
	f.Add("{topic_segment[-9223372036854775808]}", "t", "", int32(0), int64(0), int64(0), int64(0))
	f.Add("", "\xff\xfe", "", int32(0), int64(0), int64(0), int64(0))
	f.Fuzz(func(t *testing.T, tmpl, topic, prefix string, partition int32, first, last, ms int64) {
		pt, err := parsePathTemplate(tmpl)
		if err != nil {
			return
		}
		info := fileInfo{Topic: topic, Partition: partition, FirstOffset: first, LastOffset: last, FirstTime: time.UnixMilli(ms)}
		key, err := objectKey(trimPrefix(prefix), pt, info, "jsonl")
		if err != nil {
			if !strings.Contains(err.Error(), "topic_segment") {
				t.Fatalf("unexpected error %v", err)
			}
			return
		}
		tailWant := string(appendPadded(nil, int64(partition), 5)) + "-" + string(appendPadded(nil, first, 20)) + "-" + string(appendPadded(nil, last, 20)) + ".jsonl"
		if !strings.HasSuffix(key, tailWant) {
			t.Fatalf("key %q does not end with %q", key, tailWant)
		}
		dir := strings.TrimSuffix(key, tailWant)
		if p := trimPrefix(prefix); p != "" {
			dir = strings.TrimPrefix(dir, p+"/")
		}
		if strings.Contains(dir, "//") || strings.HasPrefix(dir, "/") {
			t.Fatalf("key %q has an empty path segment", key)
		}
		// A template of placeholders only renders sanitised text.
		literal := false
		for _, p := range pt.Parts {
			if p.Name == "" {
				literal = true
			}
		}
		if !literal {
			for i := 0; i < len(dir); i++ {
				if dir[i] != '/' && !keepByte(dir[i]) {
					t.Fatalf("key %q: byte %q at %d is not sanitised", key, dir[i], i)
				}
			}
		}
		if utf8.ValidString(tmpl) && utf8.ValidString(prefix) && !utf8.ValidString(key) {
			t.Fatalf("key %q is not UTF-8 though template and prefix are", key)
		}
	})
}
