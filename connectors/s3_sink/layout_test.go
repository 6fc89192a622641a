package s3sink

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// Tests of path_template's record placeholders and of the groups of files
// they make.

func TestRecordPlaceholders(t *testing.T) {
	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	// 18:45 UTC on 2 January is 00:15 on 3 January in Kolkata (UTC+5:30).
	ts := time.Date(2026, 1, 2, 18, 45, 7, 0, time.UTC)
	rec := &sdk.Record{
		Topic: "orders.eu", Partition: 3, Timestamp: ts, Key: []byte("cust/42"),
		Headers: []sdk.Header{{Key: "tenant", Value: []byte("acme corp")}, {Key: "tenant", Value: []byte("second")}},
		Payload: []byte(`{"region":"eu-west","customer":{"tier":"gold","n":12.5,"vip":true,"none":null,"obj":{},"esc":"a\u00e9\/b"},"empty":""}`),
	}
	for _, c := range []struct{ tmpl, want string }{
		{"dt={yyyy}-{MM}-{dd}/region={field:region}", "raw/dt=2026-01-03/region=eu-west/"},
		{"{topic}/{yyyy}/{MM}/{dd}/{HH}/{mm}", "raw/orders.eu/2026/01/03/00/15/"},
		{"{date}/{hour}", "raw/2026-01-03/00/"}, // the group's first record: the same here
		{"{field:customer.tier}/{field:customer.n}/{field:customer.vip}", "raw/gold/12.5/true/"},
		{"{field:customer.none}/{field:customer.obj}/{field:missing}/{field:region.x}/{field:empty}", "raw/none/none/none/none/none/"},
		{"{field:customer.esc}", "raw/a__b/"},
		{"{header:tenant}/{header:other}/{key}", "raw/acme_corp/none/cust_42/"},
		{"p={partition}/{field:.customer.tier.}", "raw/p=3/gold/"},
	} {
		l := newKeyLayout("raw", mustTemplate(t, c.tmpl), kolkata, "none")
		got, err := l.appendDir(nil, rec, ts)
		if err != nil || string(got) != c.want {
			t.Errorf("%s: %q, %v; want %q", c.tmpl, got, err, c.want)
		}
	}
	// {date} and {hour} are the group's (its first record's time), the
	// others each record's.
	l := newKeyLayout("", mustTemplate(t, "{date}T{hour}/{yyyy}-{MM}-{dd}T{HH}"), time.UTC, "x")
	got, _ := l.appendDir(nil, rec, ts.Add(-20*time.Hour))
	if want := "2026-01-01T22/2026-01-02T18/"; string(got) != want {
		t.Errorf("group and record times: %q, want %q", got, want)
	}
	// A record without a key, headers or a JSON payload.
	bare := &sdk.Record{Topic: "t", Timestamp: ts, Payload: []byte("not json")}
	l = newKeyLayout("", mustTemplate(t, "{key}/{header:h}/{field:a}"), nil, "__unknown")
	if got, _ := l.appendDir(nil, bare, ts); string(got) != "__unknown/__unknown/__unknown/" {
		t.Errorf("bare record: %q", got)
	}
	if !l.perRecord || newKeyLayout("", mustTemplate(t, "{topic}/{date}/{hour}"), nil, "x").perRecord {
		t.Error("perRecord: only record placeholders make groups of several files")
	}
}

// TestLayoutValidation: validate names the key and the bad value.
func TestLayoutValidation(t *testing.T) {
	for _, c := range []struct {
		raw  map[string]any
		want string
	}{
		{map[string]any{"path_template": "{topic}/{feild:region}"}, "path_template: template \"{topic}/{feild:region}\": unknown placeholder {feild:region} (did you mean {field}?)"},
		{map[string]any{"path_template": "{field}"}, "path_template: template \"{field}\": placeholder {field} needs a value after a colon, such as {field:name}"},
		{map[string]any{"path_template": "{yyy}"}, "did you mean {yyyy}?"},
		{map[string]any{"timezone": "Asia/Kolkatta"}, "timezone: timezone 'Asia/Kolkatta' is not an IANA time zone: use a name such as UTC, Europe/Berlin or Asia/Kolkata"},
		{map[string]any{"timezone": "Local"}, "timezone: timezone 'Local' is not an IANA time zone"},
		{map[string]any{"default_partition_value": "a/b"}, "default_partition_value: default_partition_value 'a/b' must be letters, digits"},
		{map[string]any{"default_partition_value": ".."}, "default_partition_value '..' must be"},
		{map[string]any{"max_open_files": 0}, "max_open_files: max_open_files (0) must be at least 1"},
	} {
		raw := map[string]any{"bucket": "picomq-archive", "region": "eu-west-1"}
		for k, v := range c.raw {
			raw[k] = v
		}
		_, err := s3sinkconfig.Load(raw, "", nil)
		if err != nil {
			err = confkit.ProblemsOf(err)
		} else {
			var cfg s3sinkconfig.Config
			cfg, _ = s3sinkconfig.Load(raw, "", nil)
			err = checkConfig(cfg)
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v; want %q", c.raw, err, c.want)
		}
	}
	raw := map[string]any{"bucket": "picomq-archive", "region": "eu-west-1", "timezone": "Asia/Kolkata",
		"path_template": "{topic}/dt={yyyy}-{MM}-{dd}/region={field:customer.region}/t={header:tenant}"}
	cfg, err := s3sinkconfig.Load(raw, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := checkConfig(cfg); err != nil {
		t.Fatal(err)
	}
	if o := fromConfig(cfg); o.MaxOpenFiles != 100 || o.DefaultPartition != "__unknown" {
		t.Fatalf("defaults: max_open_files %d, default_partition_value %q", o.MaxOpenFiles, o.DefaultPartition)
	}
}

var regions = []string{"eu", "us", "ap", "sa", "af", "", "null"}

// regionRecords returns n records of topic t whose payload has a region
// (missing or null for some), in runs of a few records, with timestamps 1 ms
// apart that cross midnight in Kolkata (18:30 UTC) at record n/2.
func regionRecords(n int) []sdk.Record {
	recs := records("t", 0, n)
	start := time.Date(2026, 9, 3, 18, 30, 0, 0, time.UTC).Add(-time.Duration(n/2) * time.Millisecond)
	for i := range recs {
		recs[i].Timestamp = start.Add(time.Duration(i) * time.Millisecond)
		reg := regions[(i/3+i*i)%len(regions)]
		switch reg {
		case "":
			recs[i].Payload = fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", i%29))
		case "null":
			recs[i].Payload = fmt.Appendf(nil, `{"n":%d,"region":null}`, i)
		default:
			recs[i].Payload = fmt.Appendf(nil, `{"n":%d,"region":"%s","pad":"%s"}`, i, reg, strings.Repeat("y", i%31))
		}
	}
	return recs
}

const hiveTemplate = "{topic}/dt={yyyy}-{MM}-{dd}/region={field:region}"

func hive(t *testing.T, mod func(*options)) func(*options) {
	return func(o *options) {
		o.PathTemplate = mustTemplate(t, hiveTemplate)
		o.TimeZone = "Asia/Kolkata"
		if mod != nil {
			mod(o)
		}
	}
}

// wantLaidOut checks the objects under prefix: every offset below n in
// exactly one object, each record in the object whose directory names its
// region and its date in Kolkata, and within the offsets its key names.
func wantLaidOut(t *testing.T, objs []object, n int) {
	t.Helper()
	kolkata, _ := time.LoadLocation("Asia/Kolkata")
	seen := map[int64]string{}
	for _, o := range objs {
		sc := bufio.NewScanner(bytes.NewReader(o.body))
		for sc.Scan() {
			var rec struct {
				Offset    int64
				Timestamp time.Time
				Payload   struct{ Region *string }
			}
			if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
				t.Fatalf("%s: %v", o.key, err)
			}
			region := "__unknown"
			if rec.Payload.Region != nil {
				region = *rec.Payload.Region
			}
			dir := fmt.Sprintf("t/dt=%s/region=%s/", rec.Timestamp.In(kolkata).Format("2006-01-02"), region)
			if !strings.HasPrefix(o.key, dir) || strings.Contains(o.key[len(dir):], "/") {
				t.Fatalf("offset %d (%s) is in %s, want it under %s", rec.Offset, rec.Timestamp, o.key, dir)
			}
			if rec.Offset < o.first || rec.Offset > o.last {
				t.Fatalf("offset %d in %s, outside its key's offsets", rec.Offset, o.key)
			}
			if k, dup := seen[rec.Offset]; dup {
				t.Fatalf("offset %d in %s and in %s", rec.Offset, k, o.key)
			}
			seen[rec.Offset] = o.key
		}
	}
	for off := int64(0); off < int64(n); off++ {
		if _, ok := seen[off]; !ok {
			t.Fatalf("offset %d missing; objects: %v", off, keysOf(objs))
		}
	}
}

// TestGroupReplayAfterCrash: with {field:region} and {yyyy}-{MM}-{dd} in
// Kolkata, a partition writes several files at once, cut together; crashes
// at several points, resumed from the latest or a lagging commit, give the
// same keys with the same bytes as a run without a crash.
func TestGroupReplayAfterCrash(t *testing.T) {
	srv := s3test.Start(t)
	const n = 400
	recs := regionRecords(n)
	for _, c := range []struct {
		name string
		mod  func(*options)
	}{
		{"size", func(o *options) { o.MaxFileSize = 1500 }},
		{"messages", func(o *options) { o.RotateByMessages, o.MaxMessages = true, 9 }},
		{"rotate_interval", func(o *options) { o.RotateInterval = 40 * time.Millisecond }},
		{"max_open_files", func(o *options) { o.MaxOpenFiles = 3 }},
		{"gzip", func(o *options) { o.MaxFileSize = 1500; o.Compression = compressGzip }},
	} {
		t.Run(c.name, func(t *testing.T) {
			mod := hive(t, c.mod)
			ref := openAt(t, srv, srv.Endpoint, c.name+"-ref", mod)
			feed(t, ref, recs, 17)
			if err := ref.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			want := readObjects(t, srv, c.name+"-ref/")
			wantLaidOut(t, want, n)
			if len(want) < 12 {
				t.Fatalf("only %d objects: %v", len(want), keysOf(want))
			}
			crashRuns(t, srv, c.name, mod, recs, want, func(got []object) { wantLaidOut(t, got, n) })
		})
	}
}

// TestGroupFoundInPart: a group cut by the wall clock (flush_interval)
// whose lead failed to upload while the other files landed; after a crash
// the replay, with no flush_interval, finds those files and cuts the
// group where they end, so no record lands in two objects.
func TestGroupFoundInPart(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	const n = 120
	recs := regionRecords(n)
	lead := fmt.Sprintf("/region=%s/", regions[0]) // record 0's region
	proxy.InjectMatching(func(r *http.Request) bool {
		return dataPut(r) && strings.Contains(r.URL.Path, lead) && !strings.HasSuffix(r.URL.Path, ".group")
	}, -1, xmlFault(503, "ServiceUnavailable", "down"))
	s := openAt(t, srv, proxy.URL, "g", hive(t, func(o *options) {
		o.RotateByMessages, o.MaxMessages = true, 1000
		o.FlushInterval = 20 * time.Millisecond
		o.MaxAttempts = 1
	}))
	feed(t, s, recs[:40], 40)
	sdktest.Eventually(t, 10*time.Second, func() error {
		if got := readObjects(t, srv, "g/"); len(got) < 4 {
			return fmt.Errorf("objects %v", keysOf(got))
		}
		return nil
	})
	if d, _ := durableOf(s, "t"); d != 0 {
		t.Fatalf("durable %d with the group's lead not uploaded", d)
	}
	marker := "g/t/dt=2026-09-03/region=eu/_00000-00000000000000000000-00000000000000000039.group"
	if _, err := srv.Get(context.Background(), marker); err != nil {
		t.Fatalf("the group's cut marker: %v; objects %v", err, keysOf(readObjects(t, srv, "g/")))
	}
	s.crash()
	proxy.Clear()
	s = openAt(t, srv, srv.Endpoint, "g", hive(t, func(o *options) { o.RotateByMessages, o.MaxMessages = true, 1000 }))
	feed(t, s, recs, 13)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readObjects(t, srv, "g/")
	wantLaidOut(t, got, n)
	if _, err := srv.Get(context.Background(), marker); err == nil {
		t.Fatal("the cut marker is still there after its lead was uploaded")
	}
	for _, o := range got {
		if o.first == 0 && o.last != 39 {
			t.Fatalf("the first group ends at %d in %s, want 39 as found in the bucket", o.last, o.key)
		}
	}
}

// TestGroupMemoryAndOpenFiles: max_open_files bounds a partition's files,
// the group is cut at the record that would open one more, and memory
// stays within max_buffer_size.
func TestGroupMemoryAndOpenFiles(t *testing.T) {
	srv := s3test.Start(t)
	const n = 400
	recs := records("t", 0, n)
	for i := range recs {
		recs[i].Payload = fmt.Appendf(nil, `{"n":%d,"region":"r%d","pad":"%s"}`, i, i%40, strings.Repeat("z", 900))
	}
	s := openAt(t, srv, srv.Endpoint, "m", func(o *options) {
		o.PathTemplate = mustTemplate(t, "{field:region}")
		o.MaxOpenFiles = 8
		o.MaxBufferSize = 1 << 20
		o.MaxFileSize = 1 << 20
	})
	feed(t, s, recs, 100)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s.peakHeld > 1<<20 {
		t.Fatalf("peak held %d, above max_buffer_size", s.peakHeld)
	}
	objs := readObjects(t, srv, "m/")
	groups := map[int64]int{}
	for _, o := range objs {
		groups[o.first]++
		if groups[o.first] > 8 {
			t.Fatalf("group %d has more than max_open_files files", o.first)
		}
	}
	// 40 regions in turn, 8 files a group: every group holds 8 records.
	for _, o := range objs {
		if o.last-o.first != 7 {
			t.Fatalf("%s: group of %d records, want 8", o.key, o.last-o.first+1)
		}
	}
	if len(objs) != n {
		t.Fatalf("%d objects, want %d", len(objs), n)
	}
}

// TestGroupsUploadSideBySide: the next group's files upload while a file
// of the group before is still on its way, once that group's marker is in
// the bucket. After a crash there, the replay (without the flush_interval
// that cut both groups) finds the first group in part by its marker and
// the second whole by its lead, and cuts and skips them as they are: every
// offset in exactly one object.
func TestGroupsUploadSideBySide(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	const n = 120
	recs := regionRecords(n)
	// The first group's file of region us (record 1's; the lead is record
	// 0's, of eu) hangs until the crash.
	proxy.InjectMatching(func(r *http.Request) bool {
		return dataPut(r) && strings.Contains(r.URL.Path, "/region=us/") &&
			strings.Contains(r.URL.Path, "-00000000000000000000-") && !strings.HasSuffix(r.URL.Path, ".group")
	}, 1, faultproxy.Fault{Delay: time.Minute})
	flushed := hive(t, func(o *options) {
		o.RotateByMessages, o.MaxMessages = true, 1000
		o.FlushInterval = 20 * time.Millisecond
	})
	s := openAt(t, srv, proxy.URL, "side", flushed)
	marker := "side/t/dt=2026-09-03/region=eu/_00000-00000000000000000000-00000000000000000039.group"
	feed(t, s, recs[:40], 40)
	sdktest.Eventually(t, 10*time.Second, func() error {
		_, err := srv.Get(context.Background(), marker)
		return err
	})
	feed(t, s, recs[40:80], 40)
	// The second group, 40-79, lands whole beside the hanging file.
	sdktest.Eventually(t, 10*time.Second, func() error {
		objs, err := srv.List(context.Background(), "side/")
		if err != nil {
			return err
		}
		var keys []string
		second, markers := 0, 0
		for _, o := range objs {
			keys = append(keys, o.Key)
			second += strings.Count(o.Key, "-00000000000000000040-00000000000000000079.jsonl")
			markers += strings.Count(o.Key, ".group")
			if strings.Contains(o.Key, "/region=us/00000-00000000000000000000-") {
				t.Fatalf("%s is in the bucket though its upload hangs", o.Key)
			}
		}
		if second < 4 || markers != 1 {
			return fmt.Errorf("%d files of 40-79 and %d markers in the bucket: %v", second, markers, keys)
		}
		return nil
	})
	if d, _ := durableOf(s, "t"); d != 0 {
		t.Fatalf("durable %d with a file of 0-39 not uploaded", d)
	}
	s.crash()
	proxy.Clear()
	s = openAt(t, srv, srv.Endpoint, "side", hive(t, func(o *options) { o.RotateByMessages, o.MaxMessages = true, 1000 }))
	feed(t, s, recs, 13)
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	got := readObjects(t, srv, "side/")
	wantLaidOut(t, got, n)
	for _, o := range got {
		if strings.HasSuffix(o.key, ".group") {
			t.Fatalf("marker %s left behind", o.key)
		}
		if g := [2]int64{o.first, o.last}; g != [2]int64{0, 39} && g != [2]int64{40, 79} && g != [2]int64{80, 119} {
			t.Fatalf("%s: want the groups 0-39 and 40-79 as the first run cut them, then 80-119", o.key)
		}
	}
}

// TestGroupMarkersCarrySettings: behind a proxy that refuses, as a bucket
// policy would, every PutObject without SSE-S3 and the tags, the cut
// markers of groups of files get through as the data files do.
func TestGroupMarkersCarrySettings(t *testing.T) {
	srv := s3test.Start(t)
	proxy := faultproxy.Start(t, srv.Endpoint)
	proxy.InjectMatching(func(r *http.Request) bool {
		return r.Method == http.MethodPut && (r.Header.Get("x-amz-server-side-encryption") != "AES256" || r.Header.Get("x-amz-tagging") != "team=lake")
	}, -1, faultproxy.Fault{Status: http.StatusForbidden, Body: []byte(fmt.Sprintf(s3Error, "AccessDenied", "policy"))})
	const n = 120
	s := openAt(t, srv, proxy.URL, "enc", hive(t, func(o *options) {
		o.RotateByMessages, o.MaxMessages = true, 7
		o.Object.SSE, o.Object.Tags = "AES256", map[string]string{"team": "lake"}
		o.MaxAttempts = 1
	}))
	feed(t, s, regionRecords(n), 13)
	// Bounded: a refused marker would leave the files after it waiting.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}
	wantLaidOut(t, readObjects(t, srv, "enc/"), n)
	markers := 0
	for _, e := range proxy.Log() {
		if e.Method == http.MethodPut && strings.HasSuffix(e.Path, ".group") {
			if e.Status != http.StatusOK {
				t.Fatalf("PUT %s: %d", e.Path, e.Status)
			}
			markers++
		}
	}
	if markers == 0 {
		t.Fatal("no group marker written")
	}
}
