package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"path"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// Audit is what the bucket holds for one sink, against what the topics
// hold.
type Audit struct {
	Objects, Records int
	// Missing and Twice count offsets below the end in no object and in
	// more than one; Markers counts .lost markers.
	Missing, Twice, Markers int64
	// First problems, for the message.
	Problems []string
}

// OK reports whether every offset is in exactly one object, with no marker.
func (a Audit) OK() bool { return a.Missing == 0 && a.Twice == 0 && a.Markers == 0 }

func (a Audit) String() string {
	return fmt.Sprintf("%d records in %d objects: %d missing, %d in two or more objects, %d .lost markers %v",
		a.Records, a.Objects, a.Missing, a.Twice, a.Markers, a.Problems)
}

// AuditBucket reads every object under prefix/<topic>/ and checks that
// each offset below ends[topic] is in exactly one (from each JSON line's
// offset metadata). It returns an error when the bucket cannot be read or
// holds a line without offset metadata.
func AuditBucket(srv *s3test.Server, prefix string, ends map[string]int64) (Audit, error) {
	var a Audit
	for topic, end := range ends {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		objs, err := srv.List(ctx, prefix+"/"+topic+"/")
		cancel()
		if err != nil {
			return a, fmt.Errorf("list %s/%s/: %v", prefix, topic, err)
		}
		seen := map[int64]int{}
		in := map[int64][]string{} // offset -> objects, kept for the first problems
		for _, o := range objs {
			if strings.HasSuffix(o.Key, ".lost") {
				a.Markers++
				continue
			}
			a.Objects++
			err := ReadOffsets(srv, o.Key, func(off int64) {
				seen[off]++
				if len(in[off]) < 4 {
					in[off] = append(in[off], path.Base(o.Key))
				}
				a.Records++
			})
			if err != nil {
				return a, err
			}
			if _, _, ok := ObjectRange(o.Key); !ok {
				a.Problems = append(a.Problems, "unexpected object name "+o.Key)
			}
		}
		var missing, twice int64
		first := int64(-1)
		for off := int64(0); off < end; off++ {
			switch {
			case seen[off] == 0:
				missing++
				if first < 0 {
					first = off
				}
			case seen[off] > 1:
				if twice == 0 {
					a.Problems = append(a.Problems, fmt.Sprintf("%s offset %d in %v", topic, off, in[off]))
				}
				twice++
			}
		}
		if missing > 0 || twice > 0 {
			a.Problems = append(a.Problems, fmt.Sprintf("%s: %d of %d missing (first %d), %d twice", topic, missing, end, first, twice))
		}
		a.Missing += missing
		a.Twice += twice
	}
	return a, nil
}

// AuditS3 is AuditBucket for a test: an error fails t.
func AuditS3(t testing.TB, srv *s3test.Server, prefix string, ends map[string]int64) Audit {
	t.Helper()
	a, err := AuditBucket(srv, prefix, ends)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// ReadOffsets reads the JSON-lines object key and calls each with the
// offset metadata of every line, in order. It returns an error when the
// object cannot be read or a line has no offset metadata.
func ReadOffsets(srv *s3test.Server, key string, each func(offset int64)) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	body, err := srv.Get(ctx, key)
	cancel()
	if err != nil {
		return fmt.Errorf("get %s: %v", key, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l struct {
			Offset *int64 `json:"offset"`
		}
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Offset == nil {
			return fmt.Errorf("object %s: line without offset metadata: %.100q", key, sc.Bytes())
		}
		each(*l.Offset)
	}
	return sc.Err()
}

// ObjectRange parses <partition>-<first>-<last>.<ext> from an object key
// the S3 sink wrote.
func ObjectRange(key string) (first, last int64, ok bool) {
	base, _, _ := strings.Cut(path.Base(key), ".")
	parts := strings.Split(base, "-")
	if len(parts) != 3 {
		return 0, 0, false
	}
	f, err1 := strconv.ParseInt(parts[1], 10, 64)
	l, err2 := strconv.ParseInt(parts[2], 10, 64)
	return f, l, err1 == nil && err2 == nil
}
