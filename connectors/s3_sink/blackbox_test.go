package s3sink_test

// Black-box proof of delivery = "exactly_once" (issue 11): the real
// pico-connectors binary, a broker in its own process, versitygw and an
// external kcat producer that keeps writing while the runtime is killed.
// Nothing here reaches into the sink: the verdict comes from listing the
// bucket, reading every object back and comparing it with the topic.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	s3sink "github.com/picomq/pico-connectors/connectors/s3_sink"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/faultproxy"
	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// brokerEnv turns the test binary into a broker process (see bbBroker):
// the broker outlives every runtime the tests kill, as a standalone
// PicoMQ does.
const brokerEnv = "PICO_S3_BLACKBOX_BROKER"

func init() {
	if os.Getenv(brokerEnv) == "" {
		return
	}
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(1)
	}
	fmt.Println("ready", b.Addr())
	stop := make(chan os.Signal, 2)
	signal.Notify(stop, syscall.SIGTERM, os.Interrupt)
	go func() { // the parent holds stdin: its end closes when it dies
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop <- syscall.SIGTERM
	}()
	<-stop
	b.Close()
	os.Exit(0)
}

// TestBlackbox builds the binary once and runs the three scenarios; -short
// kills fewer times and shortens the outage.
func TestBlackbox(t *testing.T) {
	kcat := needKcat(t)
	srv := s3test.Start(t)
	bin := runtimebin.Build(t)
	env := &bbEnv{bin: bin, kcat: kcat, srv: srv, broker: startBroker(t)}
	t.Run("SIGKILL", env.testKills)
	t.Run("Outage", env.testOutage)
	t.Run("Group", env.testGroup)
}

// needKcat returns kcat's path, the black-box tests' external producer,
// and skips the test without it (fails it in CI).
func needKcat(t *testing.T) string {
	kcat, err := exec.LookPath("kcat")
	if err != nil {
		msg := "kcat not found on PATH: the black-box tests produce with it; install it with: apt-get install kcat"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	return kcat
}

// bbEnv is what the scenarios share: one bucket, one broker process.
type bbEnv struct {
	bin, kcat string
	srv       *s3test.Server
	broker    string
}

// startBroker re-executes the test binary as a broker and returns its
// address.
func startBroker(t *testing.T) string {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), brokerEnv+"=1")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		stdin.Close()
		_ = cmd.Wait()
	})
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			line <- sc.Text()
		}
		close(line)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case l := <-line:
		addr, ok := strings.CutPrefix(l, "ready ")
		if !ok {
			t.Fatalf("broker process: %q", l)
		}
		return addr
	case <-time.After(30 * time.Second):
		t.Fatal("broker process did not start in 30 s")
	}
	return ""
}

func freeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// runtimeProc is one pico-connectors process and its folder.
type runtimeProc struct {
	t    *testing.T
	bin  string
	dir  string
	api  string
	cmd  *exec.Cmd
	out  *runtimebin.Output
	done chan struct{}
}

// newRuntime writes runtime.toml and the definition files (name -> body).
func (e *bbEnv) newRuntime(t *testing.T, defs map[string]string) *runtimeProc {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "connectors"), 0o755); err != nil {
		t.Fatal(err)
	}
	api := freeAddr(t)
	cfg := fmt.Sprintf(`shutdown_grace = "60s"
[broker]
bootstrap_servers = %q
[broker.properties]
"topic.metadata.refresh.interval.ms" = "1000"
[http]
address = %q
[log]
format = "json"
[state]
path = "state"
`, e.broker, api)
	if err := os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, body := range defs {
		if err := os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	r := &runtimeProc{t: t, bin: e.bin, dir: dir, api: api}
	t.Cleanup(r.kill)
	return r
}

// start runs the process and waits until its API answers.
func (r *runtimeProc) start() {
	r.t.Helper()
	r.cmd = exec.Command(r.bin, "run", "--config", filepath.Join(r.dir, "runtime.toml"))
	r.out = &runtimebin.Output{}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	if err := r.cmd.Start(); err != nil {
		r.t.Fatal(err)
	}
	done := make(chan struct{})
	r.done = done
	go func(c *exec.Cmd) { _ = c.Wait(); close(done) }(r.cmd)
	sdktest.Eventually(r.t, 30*time.Second, func() error {
		if !r.alive() {
			r.t.Fatalf("pico-connectors exited at start: %s\n%s", r.cmd.ProcessState, r.tail())
		}
		resp, err := http.Get("http://" + r.api + "/health")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	})
}

func (r *runtimeProc) alive() bool {
	if r.done == nil {
		return false
	}
	select {
	case <-r.done:
		return false
	default:
		return true
	}
}

func (r *runtimeProc) tail() string {
	s := r.out.String()
	if len(s) > 6000 {
		s = "..." + s[len(s)-6000:]
	}
	return s
}

// kill sends SIGKILL and waits until the process is gone.
func (r *runtimeProc) kill() {
	if r.alive() {
		_ = r.cmd.Process.Signal(syscall.SIGKILL)
		<-r.done
	}
}

// stop sends SIGTERM and fails the test unless the process exits 0.
func (r *runtimeProc) stop() {
	r.t.Helper()
	if !r.alive() {
		r.t.Fatalf("pico-connectors is not running at SIGTERM:\n%s", r.tail())
	}
	t0 := time.Now()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	defer func() { r.t.Logf("graceful stop took %s", time.Since(t0).Round(10*time.Millisecond)) }()
	select {
	case <-r.done:
	case <-time.After(90 * time.Second):
		r.kill()
		r.t.Fatalf("pico-connectors did not stop within 90 s of SIGTERM:\n%s", r.tail())
	}
	if !r.cmd.ProcessState.Success() {
		r.t.Fatalf("graceful stop: exit %s\n%s", r.cmd.ProcessState, r.tail())
	}
}

// sinkEntry is the part of GET /sinks/{key} the tests read.
type sinkEntry struct {
	Status    string `json:"status"`
	LastError string `json:"last_error"`
	Counters  struct {
		Consumed int64 `json:"records_consumed"`
	} `json:"counters"`
}

func (r *runtimeProc) sink(key string) (sinkEntry, error) {
	var e sinkEntry
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + r.api + "/sinks/" + key)
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e, fmt.Errorf("GET /sinks/%s: %s", key, resp.Status)
	}
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

// rss reads a field of /proc/<pid>/status (VmRSS, VmHWM) in bytes.
func (r *runtimeProc) rss(field string) int64 {
	kib, err := procstat.KiB(r.cmd.Process.Pid, field)
	if err != nil {
		r.t.Fatal(err)
	}
	return kib << 10
}

// producer is a kcat process writing one JSON line per record to a topic
// at a steady rate until halt.
type producer struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stop   chan struct{}
	wg     sync.WaitGroup
	out    runtimebin.Output
	exited chan struct{}
	err    error
}

// startProducer writes chunk records of about size bytes every interval.
func (e *bbEnv) startProducer(t *testing.T, topic string, size, chunk int, every time.Duration) *producer {
	p := &producer{stop: make(chan struct{}), exited: make(chan struct{})}
	p.cmd = exec.Command(e.kcat, "-P", "-b", e.broker, "-t", topic, "-X", "linger.ms=5")
	var err error
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
	pad := strings.Repeat("x", max(size-40, 1))
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := 0; ; {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			var b bytes.Buffer
			for i := 0; i < chunk; i++ {
				fmt.Fprintf(&b, `{"n":%d,"topic":%q,%s"pad":"%s"}`+"\n", n, topic, regionField(n), pad)
				n++
			}
			if _, err := p.stdin.Write(b.Bytes()); err != nil {
				return
			}
		}
	}()
	return p
}

// regionField is the region of record n, for the sinks that lay records
// out by it: ten values, and none in every thirteenth record.
func regionField(n int) string {
	if n%13 == 0 {
		return ""
	}
	return fmt.Sprintf(`"region":"r%d",`, n%10)
}

// halt stops writing and waits until kcat has delivered everything.
func (p *producer) halt(t *testing.T) {
	close(p.stop)
	p.wg.Wait()
	p.stdin.Close()
	<-p.exited
	if p.err != nil {
		t.Fatalf("kcat: %v\n%s", p.err, p.out.String())
	}
}

// check fails the test if kcat has exited.
func (p *producer) check(t *testing.T) {
	select {
	case <-p.exited:
		t.Fatalf("kcat exited while it should be writing: %v\n%s", p.err, p.out.String())
	default:
	}
}

// kafka is a franz-go admin client on the broker process.
func (e *bbEnv) admin(t *testing.T) *kadm.Client {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return kadm.NewClient(cl)
}

// ends returns the high watermark of partition 0 of each topic.
func ends(t *testing.T, adm *kadm.Client, topics ...string) map[string]int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, tp := range topics {
		if o, ok := res.Lookup(tp, 0); ok && o.Err == nil {
			out[tp] = o.Offset
		}
	}
	return out
}

// committed returns the sink's committed offset per topic (absent: none).
func committed(adm *kadm.Client, key string) (map[string]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := adm.FetchOffsets(ctx, "pico-connectors-"+key)
	if errors.Is(err, kerr.GroupIDNotFound) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	res.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Partition == 0 && o.At >= 0 {
			out[o.Topic] = o.At
		}
	})
	return out, nil
}

// committedOf returns the committed offsets of each sink of keys.
func committedOf(t *testing.T, adm *kadm.Client, keys []string) map[string]map[string]int64 {
	t.Helper()
	out := map[string]map[string]int64{}
	for _, key := range keys {
		c, err := committed(adm, key)
		if err != nil {
			t.Fatal(err)
		}
		out[key] = c
	}
	return out
}

// waitCommitted waits until the sink's commit is within slack records of
// want on every topic: past every file that rotated, the open one being
// uploaded only by the graceful stop.
func waitCommitted(t *testing.T, adm *kadm.Client, key string, want map[string]int64, slack int64, rs ...*runtimeProc) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		got, err := committed(adm, key)
		ok := err == nil
		for tp, n := range want {
			ok = ok && got[tp] > n-slack
		}
		if ok {
			return
		}
		for _, r := range rs {
			if !r.alive() {
				t.Fatalf("pico-connectors exited while sink %s caught up (committed %v, want %v):\n%s", key, got, want, r.tail())
			}
		}
		if time.Now().After(deadline) {
			var logs string
			for _, r := range rs {
				logs += r.tail()
			}
			t.Fatalf("sink %s: committed %v (%v), want %v after 90 s\n%s", key, got, err, want, logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// caughtUp waits until the sink has been handed every record between its
// commit at the start of the process (from) and end; the open files are then
// only in memory, for the graceful stop to upload.
func caughtUp(t *testing.T, r *runtimeProc, key string, from, end map[string]int64) {
	t.Helper()
	var want int64
	for tp, n := range end {
		want += n - from[tp]
	}
	sdktest.Eventually(t, 90*time.Second, func() error {
		if !r.alive() {
			t.Fatalf("pico-connectors exited while sink %s caught up:\n%s", key, r.tail())
		}
		s, err := r.sink(key)
		if err == nil && s.Counters.Consumed < want {
			err = fmt.Errorf("sink %s consumed %d records, want %d (status %s, %s)", key, s.Counters.Consumed, want, s.Status, s.LastError)
		}
		return err
	})
}

// wantCommitted checks that the sink committed every record below end: a
// graceful stop uploads every open file and commits before the exit.
func wantCommitted(t *testing.T, adm *kadm.Client, key string, end map[string]int64) {
	t.Helper()
	got, err := committed(adm, key)
	if err != nil {
		t.Fatal(err)
	}
	for tp, n := range end {
		if got[tp] != n {
			t.Errorf("after the graceful stop sink %s has committed %d on %s, want %d (every record)", key, got[tp], tp, n)
		}
	}
}

// readTopic returns every value of partition 0 of topic up to end, by offset.
func (e *bbEnv) readTopic(t *testing.T, topic string, end int64) [][]byte {
	out := make([][]byte, 0, end)
	if end == 0 {
		return out
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for int64(len(out)) < end {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %s: %d of %d records", topic, len(out), end)
		}
		for _, fe := range fs.Errors() {
			t.Fatalf("read %s: %v", topic, fe.Err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset == int64(len(out)) && r.Offset < end {
				out = append(out, r.Value)
			}
		})
	}
	return out
}

// object is one data object as listed, with what its name says.
type object struct {
	Key         string
	ETag        string
	First, Last int64 // from the name
}

// nameRange parses <partition>-<first>-<last>.<ext>[.gz|.zst].
func nameRange(key string) (first, last int64, err error) {
	base, _, _ := strings.Cut(path.Base(key), ".")
	parts := strings.Split(base, "-")
	if len(parts) == 3 {
		first, err1 := strconv.ParseInt(parts[1], 10, 64)
		last, err2 := strconv.ParseInt(parts[2], 10, 64)
		if err1 == nil && err2 == nil {
			return first, last, nil
		}
	}
	return 0, 0, fmt.Errorf("object %s: name is not <partition>-<first offset>-<last offset>.<ext>", key)
}

// listObjects lists the data objects under prefix/ with their ETags, in
// key order. A .lost marker fails the test: exactly_once writes none.
func (e *bbEnv) listObjects(t *testing.T, prefix string) []object {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out []object
	p := s3.NewListObjectsV2Paginator(e.srv.Client, &s3.ListObjectsV2Input{Bucket: aws.String(e.srv.Bucket), Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("list %s/: %v", prefix, err)
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			if strings.HasSuffix(k, ".lost") {
				t.Errorf("exactly_once wrote a .lost marker: %s", k)
				continue
			}
			if strings.HasSuffix(k, ".group") || strings.Contains(k, "/"+stagingFolder+"/") {
				continue // the cut marker of a group of files, or a streamed file's staging object: not data
			}
			f, l, err := nameRange(k)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, object{Key: k, ETag: aws.ToString(o.ETag), First: f, Last: l})
		}
	}
	return out
}

// line is one JSON line of an object written with include_metadata.
type line struct {
	Offset    *int64          `json:"offset"`
	Timestamp string          `json:"timestamp"`
	Topic     string          `json:"topic"`
	Payload   json.RawMessage `json:"payload"`
}

// readObject gets an object and decodes it by its extension (.gz, .zst);
// the body must carry the matching magic bytes and Content-Encoding.
func (e *bbEnv) readObject(t *testing.T, key string) []line {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := e.srv.Client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(e.srv.Bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	body, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	enc := aws.ToString(out.ContentEncoding)
	switch {
	case strings.HasSuffix(key, ".gz"):
		if enc != "gzip" {
			t.Errorf("%s: Content-Encoding %q, want gzip", key, enc)
		}
		zr, err := gzip.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: not gzip: %v", key, err)
		}
		if body, err = io.ReadAll(zr); err != nil {
			t.Fatalf("%s: gzip: %v", key, err)
		}
	case strings.HasSuffix(key, ".zst"):
		if enc != "zstd" {
			t.Errorf("%s: Content-Encoding %q, want zstd", key, enc)
		}
		zr, err := zstd.NewReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: not zstd: %v", key, err)
		}
		body, err = io.ReadAll(zr)
		zr.Close()
		if err != nil {
			t.Fatalf("%s: zstd: %v", key, err)
		}
	case strings.HasSuffix(key, ".parquet"):
		// Read back with arrow-go; the payload is rebuilt from the columns
		// n, ptopic and pad of bbpq, after the metadata columns.
		var lines []line
		for _, r := range s3sink.ParquetRows(t, key, body) {
			off, err := strconv.ParseInt(r[0], 10, 64)
			if err != nil {
				t.Fatalf("%s: offset %q", key, r[0])
			}
			topic, _ := json.Marshal(r[6])
			pad, _ := json.Marshal(r[7])
			// region is no column of bbpq: kcat's text for n. The Avro
			// producer's records (bbavro) have none.
			n, err := strconv.Atoi(r[5])
			if err != nil {
				t.Fatalf("%s: n %q", key, r[5])
			}
			region := regionField(n)
			if r[2] == avroTopic {
				region = ""
			}
			payload := []byte(fmt.Sprintf(`{"n":%s,"topic":%s,%s"pad":%s}`, r[5], topic, region, pad))
			lines = append(lines, line{Offset: &off, Timestamp: r[1], Topic: r[2], Payload: payload})
		}
		return lines
	default:
		if body[0] == 0x1f || body[0] == 0x28 {
			t.Errorf("%s: compressed body without a compressed extension", key)
		}
	}
	var lines []line
	sc := bufio.NewScanner(bytes.NewReader(body))
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var l line
		if err := json.Unmarshal(sc.Bytes(), &l); err != nil || l.Offset == nil {
			t.Fatalf("%s: line without offset metadata: %.120q", key, sc.Bytes())
		}
		lines = append(lines, l)
	}
	return lines
}

// audit is what the bucket holds for one sink.
type audit struct {
	objects []object
	lines   map[string][]line // by object key
}

// audit lists the sink's objects, reads each back and checks, per topic,
// that every offset below end is in exactly one object with the payload
// the topic holds, and that each object's name states its first and last
// offset.
func (e *bbEnv) audit(t *testing.T, prefix string, end map[string]int64) audit {
	t.Helper()
	return e.auditLayout(t, prefix, end, nil)
}

// auditLayout is audit for a sink whose path_template reads the records:
// its objects are groups of files that name the group's offsets, and dir
// says which directory each record belongs in.
func (e *bbEnv) auditLayout(t *testing.T, prefix string, end map[string]int64, dir func(line) string) audit {
	t.Helper()
	a := audit{objects: e.listObjects(t, prefix), lines: map[string][]line{}}
	seen := map[string]map[int64][]string{}
	first := map[string]map[int64]line{} // the line of each offset in its first object
	var records int
	for _, o := range a.objects {
		ls := e.readObject(t, o.Key)
		a.lines[o.Key] = ls
		records += len(ls)
		if len(ls) == 0 {
			t.Errorf("%s: empty object", o.Key)
			continue
		}
		switch {
		case dir != nil:
			for _, l := range ls {
				if *l.Offset < o.First || *l.Offset > o.Last {
					t.Errorf("%s: name says its group holds offsets %d-%d, body holds %d", o.Key, o.First, o.Last, *l.Offset)
				}
				if want := prefix + "/" + dir(l); path.Dir(o.Key)+"/" != want {
					t.Errorf("offset %d (%s, %.60s) is in %s, want it in %s", *l.Offset, l.Timestamp, l.Payload, o.Key, want)
					break
				}
			}
		case *ls[0].Offset != o.First || *ls[len(ls)-1].Offset != o.Last || int64(len(ls)) != o.Last-o.First+1:
			t.Errorf("%s: name says offsets %d-%d, body holds %d records from %d to %d", o.Key, o.First, o.Last, len(ls), *ls[0].Offset, *ls[len(ls)-1].Offset)
		}
		for _, l := range ls {
			if seen[l.Topic] == nil {
				seen[l.Topic] = map[int64][]string{}
				first[l.Topic] = map[int64]line{}
			}
			if len(seen[l.Topic][*l.Offset]) == 0 {
				first[l.Topic][*l.Offset] = l
			}
			seen[l.Topic][*l.Offset] = append(seen[l.Topic][*l.Offset], o.Key)
		}
	}
	for topic, n := range end {
		values := e.readTopic(t, topic, n)
		if topic == avroTopic {
			for i, v := range values {
				values[i] = bbAvroJSON(t, v)
			}
		}
		var missing, twice, wrong int
		var firstMissing, firstTwice int64 = -1, -1
		for off := int64(0); off < n; off++ {
			keys := seen[topic][off]
			switch {
			case len(keys) == 0:
				missing++
				if firstMissing < 0 {
					firstMissing = off
				}
				continue
			case len(keys) > 1:
				twice++
				if firstTwice < 0 {
					firstTwice = off
					t.Errorf("%s offset %d is in %d objects: %v", topic, off, len(keys), keys)
				}
			}
			var want, got bytes.Buffer
			_ = json.Compact(&want, values[off])
			_ = json.Compact(&got, first[topic][off].Payload)
			if !bytes.Equal(want.Bytes(), got.Bytes()) {
				wrong++
				if wrong == 1 {
					t.Errorf("%s offset %d in %s: payload %.80s, the topic holds %.80s", topic, off, keys[0], got.String(), want.String())
				}
			}
		}
		extra := 0
		for off := range seen[topic] {
			if off >= n {
				extra++
			}
		}
		if missing > 0 || twice > 0 || wrong > 0 || extra > 0 {
			t.Errorf("sink %s, topic %s: %d records on the topic; %d missing (first %d), %d in two or more objects (first %d), %d with a wrong payload, %d past the end",
				prefix, topic, n, missing, firstMissing, twice, firstTwice, wrong, extra)
		} else {
			t.Logf("sink %s, topic %s: all %d offsets in exactly one object, payloads equal to the topic", prefix, topic, n)
		}
	}
	for topic := range seen {
		if _, ok := end[topic]; !ok {
			t.Errorf("sink %s wrote records of unexpected topic %s", prefix, topic)
		}
	}
	t.Logf("sink %s: %d objects, %d records", prefix, len(a.objects), records)
	return a
}

// covered returns the first offset, from 0, that no object name covers: the
// bucket holds every offset below it.
func covered(objs []object) int64 {
	sort.Slice(objs, func(i, j int) bool { return objs[i].First < objs[j].First })
	var next int64
	for _, o := range objs {
		if o.First > next {
			break
		}
		next = max(next, o.Last+1)
	}
	return next
}

// sinkDef is a sink definition on one topic (or pattern) writing under
// prefix key, with the given extra plugin_config lines.
func (e *bbEnv) sinkDef(key, topicLine, instance, extra string) string {
	props := `"session.timeout.ms" = "6000"`
	if instance != "" {
		// Static membership: a restarted runtime takes its old place in
		// the group at once instead of waiting for the session timeout.
		props += fmt.Sprintf(`, "group.instance.id" = %q`, instance)
	}
	return fmt.Sprintf(`type = "sink"
key = %q
path = "libpicomq_connector_s3_sink"
[[topics]]
%s
schema = "json"
batch_length = 200
poll_interval = "50ms"
properties = { %s }
[plugin_config]
bucket = %q
region = "us-east-1"
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = %q
path_template = "{topic}"
include_metadata = true
delivery = "exactly_once"
%s`, key, topicLine, props, e.srv.Bucket, e.srv.Endpoint, e.srv.AccessKey, e.srv.SecretKey, key, extra)
}

// testKills runs, in one runtime, sinks on one topic that kcat keeps
// writing to (size rotation with gzip, messages with zstd, rotate_interval
// by record time, size rotation with Parquet and zstd pages encoded by the
// upload workers, and three that lay records out by {field:region} and the
// date in Asia/Kolkata, several files per partition), one with
// flush_interval on a topic written in bursts (so idle files are uploaded
// by the wall clock and a kill can fall between that upload and its
// commit), and one writing Parquet from an Avro topic that a franz-go
// producer writes to; SIGKILLs the runtime at random points at least 20
// times, then stops it gracefully and audits the bucket.
func (e *bbEnv) testKills(t *testing.T) {
	const topic = "bb.kill"
	const perFile = 250
	interval := 400 * time.Millisecond
	sinks := map[string]string{
		"bbsize": `file_rotation = "size"
max_file_size = "24KiB"
compression = "gzip"
`,
		"bbmsg": fmt.Sprintf(`file_rotation = "messages"
max_messages_per_file = %d
compression = "zstd"
`, perFile),
		"bbtime": fmt.Sprintf(`file_rotation = "size"
max_file_size = "64MiB"
rotate_interval = %q
compression = "none"
`, interval),
		"bbpq": `file_rotation = "size"
max_file_size = "48KiB"
output_format = "parquet"
parquet_compression = "zstd"
parquet_row_group_size = "64KiB"
columns = [{ name = "n", type = "int64" }, { name = "ptopic", type = "string", path = "topic" }, { name = "pad", type = "string" }]
`,
	}
	// Data-lake layouts: several files per partition at once, by a
	// payload field and the local date of the record in Kolkata.
	const hive = `path_template = "{topic}/dt={yyyy}-{MM}-{dd}/region={field:region}"
timezone = "Asia/Kolkata"
`
	lake := map[string]string{
		"bblsize": hive + `file_rotation = "size"
max_file_size = "6KiB"
compression = "gzip"
`,
		"bblmsg": `path_template = "{topic}/{yyyy}/{MM}/{dd}/{field:region}"
timezone = "Asia/Kolkata"
file_rotation = "messages"
max_messages_per_file = 30
`,
		"bbltime": hive + fmt.Sprintf(`rotate_interval = %q
max_file_size = "64MiB"
max_open_files = 16
`, interval),
	}
	for key, extra := range lake {
		sinks[key] = extra
	}
	defs := map[string]string{}
	for key, extra := range sinks {
		def := e.sinkDef(key, fmt.Sprintf("topic = %q", topic), key+"-1", extra)
		if _, ok := lake[key]; ok {
			def = strings.Replace(def, "path_template = \"{topic}\"\n", "", 1)
		}
		defs[key+".toml"] = def
	}
	const flushTopic = "bb.flush"
	defs["bbflush.toml"] = e.sinkDef("bbflush", fmt.Sprintf("topic = %q", flushTopic), "bbflush-1", `file_rotation = "messages"
max_messages_per_file = 300
flush_interval = "300ms"
`)
	// Parquet from an Avro topic: the columns come from the topic's Avro
	// schema, the rows from the Avro binary.
	defs["bbavro.toml"] = strings.Replace(e.sinkDef("bbavro", fmt.Sprintf("topic = %q\navro_schema_json = %q", avroTopic, bbAvroSchema), "bbavro-1", `file_rotation = "size"
max_file_size = "48KiB"
output_format = "parquet"
parquet_compression = "zstd"
`), `schema = "json"`, `schema = "avro"`, 1)
	// side sinks: one topic each, apart from the four on topic
	side := map[string]string{"bbflush": flushTopic, "bbavro": avroTopic}
	r := e.newRuntime(t, defs)
	adm := e.admin(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 11))
	kills := 20
	if testing.Short() {
		kills = 10
	}
	t.Logf("seed %d: %d SIGKILLs, kcat writing ~2,500 records/s of 100 B to %s", seed, kills, topic)
	p := e.startProducer(t, topic, 100, 50, 20*time.Millisecond)
	pf := e.startProducer(t, flushTopic, 100, 200, 1200*time.Millisecond)
	pa := e.startAvroProducer(t, avroTopic, 100, 25, 20*time.Millisecond)

	etags := map[string]map[string]string{} // sink -> key -> first ETag seen
	for i := 0; i < kills; i++ {
		r.start()
		// A random point: sometimes while the sinks still join the group
		// and recover, mostly mid-stream, across rotations.
		time.Sleep(time.Duration(200+rng.IntN(2300)) * time.Millisecond)
		if !r.alive() {
			t.Fatalf("pico-connectors exited by itself before kill %d:\n%s", i+1, r.tail())
		}
		r.kill()
		var report []string
		for key := range sinks {
			objs, line := e.afterKill(t, adm, key, topic, i+1)
			report = append(report, line)
			firstETags(etags, key, objs)
		}
		for key, st := range side {
			objs, line := e.afterKill(t, adm, key, st, i+1)
			report = append(report, line)
			firstETags(etags, key, objs)
		}
		p.check(t)
		pf.check(t)
		pa.check(t)
		sort.Strings(report)
		t.Logf("SIGKILL %d/%d: %s", i+1, kills, strings.Join(report, "; "))
	}
	p.halt(t)
	pf.halt(t)
	pa.halt(t)
	end := ends(t, adm, topic)
	sideEnd := map[string]map[string]int64{}
	for key, st := range side {
		sideEnd[key] = ends(t, adm, st)
	}
	t.Logf("producers stopped: %d records on %s, %d on %s, %d on %s; restart, catch up, SIGTERM", end[topic], topic, sideEnd["bbflush"][flushTopic], flushTopic, sideEnd["bbavro"][avroTopic], avroTopic)
	from := committedOf(t, adm, slices.Collect(maps.Keys(sinks)))
	maps.Copy(from, committedOf(t, adm, slices.Collect(maps.Keys(side))))
	r.start()
	for key := range sinks {
		caughtUp(t, r, key, from[key], end)
	}
	for key := range side {
		caughtUp(t, r, key, from[key], sideEnd[key])
	}
	r.stop()
	for key := range sinks {
		wantCommitted(t, adm, key, end)
	}
	for key := range side {
		wantCommitted(t, adm, key, sideEnd[key])
		sameBytes(t, key, e.audit(t, key, sideEnd[key]), etags[key])
	}

	kolkata, err := time.LoadLocation("Asia/Kolkata")
	if err != nil {
		t.Fatal(err)
	}
	for key := range sinks {
		var dir func(line) string
		if _, ok := lake[key]; ok {
			dir = func(l line) string {
				var p struct{ Region *string }
				_ = json.Unmarshal(l.Payload, &p)
				region := "__unknown"
				if p.Region != nil {
					region = *p.Region
				}
				day := stamp(t, l).In(kolkata)
				if key == "bblmsg" {
					return fmt.Sprintf("%s/%s/%s/", topic, day.Format("2006/01/02"), region)
				}
				return fmt.Sprintf("%s/dt=%s/region=%s/", topic, day.Format("2006-01-02"), region)
			}
		}
		a := e.auditLayout(t, key, end, dir)
		sameBytes(t, key, a, etags[key])
		switch key {
		case "bbmsg":
			// Files start at the committed offset and rotate at the same
			// record on every replay: only the last file, closed by the
			// graceful stop, may be short.
			bad := &violations{t: t, what: "messages rotation moved after a kill"}
			for i, o := range a.objects {
				if n := o.Last - o.First + 1; (n != perFile && i != len(a.objects)-1) || o.First%perFile != 0 {
					bad.add("%s holds %d records from offset %d, want %d from a multiple of %d", o.Key, n, o.First, perFile, perFile)
				}
			}
			bad.report(len(a.objects))
		case "bbtime":
			// Record time: every file spans less than the interval, and the
			// next file starts at a record at least one interval after the
			// first record of this one.
			bad := &violations{t: t, what: "rotate_interval not kept in record time"}
			for i, o := range a.objects {
				ls := a.lines[o.Key]
				t0, t1 := stamp(t, ls[0]), stamp(t, ls[len(ls)-1])
				if t1.Sub(t0) >= interval {
					bad.add("%s spans %s of record time, rotate_interval is %s", o.Key, t1.Sub(t0), interval)
				}
				if i+1 < len(a.objects) {
					next := a.lines[a.objects[i+1].Key][0]
					if stamp(t, next).Sub(t0) < interval {
						bad.add("%s ends at offset %d though offset %d is only %s after its first record", o.Key, o.Last, *next.Offset, stamp(t, next).Sub(t0))
					}
				}
			}
			bad.report(len(a.objects))
		}
	}
}

// afterKill checks, after SIGKILL number kill, that sink key committed
// no offset of topic beyond what the bucket holds, and returns its
// objects and a line for the log.
func (e *bbEnv) afterKill(t *testing.T, adm *kadm.Client, key, topic string, kill int) ([]object, string) {
	t.Helper()
	c, err := committed(adm, key)
	if err != nil {
		t.Fatal(err)
	}
	objs := e.listObjects(t, key)
	in := covered(objs)
	if c[topic] > in {
		t.Errorf("kill %d: sink %s committed offset %d but the bucket holds only offsets below %d: a commit ran ahead of the upload", kill, key, c[topic], in)
	}
	return objs, fmt.Sprintf("%s committed %d, bucket holds 0..%d in %d objects", key, c[topic], in-1, len(objs))
}

// firstETags records the ETag of each of objs not seen before, by sink key.
func firstETags(etags map[string]map[string]string, key string, objs []object) {
	if etags[key] == nil {
		etags[key] = map[string]string{}
	}
	for _, o := range objs {
		if _, ok := etags[key][o.Key]; !ok {
			etags[key][o.Key] = o.ETag
		}
	}
}

// sameBytes checks same key, same bytes: an object rewritten by a replay
// after a kill has the ETag it had when first seen.
func sameBytes(t *testing.T, key string, a audit, first map[string]string) {
	rewritten := 0
	for _, o := range a.objects {
		if tag, ok := first[o.Key]; ok {
			rewritten++
			if tag != o.ETag {
				t.Errorf("%s: ETag %s at the end, %s after an earlier kill: a replay wrote different bytes", o.Key, o.ETag, tag)
			}
		}
	}
	t.Logf("sink %s: %d objects seen after a kill keep their ETag", key, rewritten)
}

// violations counts failed checks of one kind and reports the first few.
type violations struct {
	t     *testing.T
	what  string
	n     int
	first []string
}

func (v *violations) add(format string, args ...any) {
	v.n++
	if len(v.first) < 3 {
		v.first = append(v.first, fmt.Sprintf(format, args...))
	}
}

func (v *violations) report(of int) {
	v.t.Helper()
	if v.n > 0 {
		v.t.Errorf("%s: %d of %d objects, for example:\n  %s", v.what, v.n, of, strings.Join(v.first, "\n  "))
	}
}

func stamp(t *testing.T, l line) time.Time {
	ts, err := time.Parse(time.RFC3339Nano, l.Timestamp)
	if err != nil {
		t.Fatalf("offset %d: timestamp %q: %v", *l.Offset, l.Timestamp, err)
	}
	return ts
}

// testOutage puts a fault proxy in front of versitygw that fails every
// data upload for 30 s (10 s with -short) while kcat writes 1 KiB records,
// four times what the buffer bound holds, then lets uploads through.
func (e *bbEnv) testOutage(t *testing.T) {
	const key, topic = "bbout", "bb.outage"
	const bound = 8 << 20
	outage := 30 * time.Second
	if testing.Short() {
		outage = 10 * time.Second
	}
	proxy := faultproxy.Start(t, e.srv.Endpoint)
	def := e.sinkDef(key, fmt.Sprintf("topic = %q", topic), key+"-1", fmt.Sprintf(`file_rotation = "size"
max_file_size = "1MiB"
max_buffer_size = "%dMiB"
max_attempts = 2
retry_delay = "100ms"
`, bound>>20))
	def = strings.Replace(def, fmt.Sprintf("endpoint = %q", e.srv.Endpoint), fmt.Sprintf("endpoint = %q", proxy.URL), 1)
	// librdkafka's own prefetch queue, bounded so that it is part of the
	// stated base and not of the sink's buffer.
	def = strings.Replace(def, `properties = { `, `properties = { "queued.max.messages.kbytes" = "4096", `, 1)
	r := e.newRuntime(t, map[string]string{key + ".toml": def})
	adm := e.admin(t)
	r.start()
	waitRunning(t, r, key)
	p := e.startProducer(t, topic, 1024, 20, 20*time.Millisecond) // ~1 MB/s
	time.Sleep(3 * time.Second)
	base := r.rss("VmRSS")
	limit := base + 2*bound + 16<<20
	t.Logf("flowing: RSS %.1f MiB; limit = that + 2 x max_buffer_size (Go's heap goal at GOGC=100) + 16 MiB = %.1f MiB",
		float64(base)/(1<<20), float64(limit)/(1<<20))

	isData := func(q *http.Request) bool {
		return q.Method == http.MethodPut && strings.Contains(q.URL.Path, "/"+key+"/")
	}
	proxy.InjectMatching(isData, -1, faultproxy.Fault{Status: http.StatusServiceUnavailable,
		Body: []byte(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>ServiceUnavailable</Code><Message>injected outage</Message></Error>`)})
	t.Logf("inject: 503 ServiceUnavailable on every data PutObject for %s", outage)
	var sawError sinkEntry
	var peak int64
	type sample struct {
		at  time.Time
		rss int64
	}
	var trend []sample
	statuses := map[string]int{}
	deadline := time.Now().Add(outage)
	for time.Now().Before(deadline) {
		if !r.alive() {
			t.Fatalf("pico-connectors exited during the outage:\n%s", r.tail())
		}
		if s, err := r.sink(key); err == nil {
			statuses[s.Status]++
			if s.Status == "Error" && sawError.Status == "" {
				sawError = s
			}
		}
		rss := r.rss("VmRSS")
		if peak = max(peak, rss); len(trend) == 0 || time.Since(trend[len(trend)-1].at) >= 5*time.Second {
			trend = append(trend, sample{time.Now(), rss})
		}
		time.Sleep(100 * time.Millisecond)
	}
	proxy.Clear()
	p.halt(t)
	var rss []string
	for _, x := range trend {
		rss = append(rss, fmt.Sprintf("%.0f", float64(x.rss)/(1<<20)))
	}
	t.Logf("RSS every 5 s during the outage, MiB: %s", strings.Join(rss, " "))
	t.Logf("faults cleared, kcat stopped; statuses seen during the outage (100 ms samples): %v", statuses)
	if sawError.Status == "" {
		t.Errorf("status never went Error during a %s outage", outage)
	} else if !strings.Contains(sawError.LastError, "503") && !strings.Contains(sawError.LastError, "ServiceUnavailable") {
		t.Errorf("status Error, but last_error does not carry the S3 error: %q", sawError.LastError)
	} else {
		t.Logf("status Error with last_error %.160q", sawError.LastError)
	}
	sdktest.Eventually(t, 60*time.Second, func() error {
		s, err := r.sink(key)
		if err == nil && s.Status != "Running" {
			err = fmt.Errorf("status %s (%s)", s.Status, s.LastError)
		}
		return err
	})
	t.Logf("status Running again once uploads succeed")
	end := ends(t, adm, topic)
	// A file of 1 MiB holds about 930 of these records.
	waitCommitted(t, adm, key, end, 1000, r)
	// The bound is what the outage tests: while uploads fail the sink holds
	// at most max_buffer_size and the loop stops consuming. The catch-up
	// after it is ordinary work, reported but not held to the same limit.
	if peak > limit {
		t.Errorf("peak RSS during the outage %.1f MiB is over the limit %.1f MiB (base %.1f MiB, max_buffer_size %d MiB) while %.1f MB were written to the topic",
			float64(peak)/(1<<20), float64(limit)/(1<<20), float64(base)/(1<<20), bound>>20, float64(end[topic])*1.06e-3)
	} else {
		t.Logf("peak RSS during the outage %.1f MiB, within %.1f MiB, while %.1f MB were written to the topic; VmHWM after the catch-up %.1f MiB",
			float64(peak)/(1<<20), float64(limit)/(1<<20), float64(end[topic])*1.06e-3, float64(r.rss("VmHWM"))/(1<<20))
	}
	// Redelivered batches count again in records_consumed: a fresh process
	// tells when the sink has seen every record.
	r.stop()
	from, err := committed(adm, key)
	if err != nil {
		t.Fatal(err)
	}
	r.start()
	caughtUp(t, r, key, from, end)
	r.stop()
	wantCommitted(t, adm, key, end)
	e.audit(t, key, end)
}

// testGroup runs two runtimes with the same sink key, so one consumer
// group, over 8 topics with kcat writing to each; kills one, lets the
// other take over every partition, restarts the first and audits.
func (e *bbEnv) testGroup(t *testing.T) {
	const key, perFile = "bbgrp", 100
	extra := fmt.Sprintf("file_rotation = \"messages\"\nmax_messages_per_file = %d\n", perFile)
	def := e.sinkDef(key, `pattern = 'bb\.grp\..*'`, "", extra)
	end := e.runGroup(t, key, "bb.grp.", def, perFile)
	e.audit(t, key, end)
}

// runGroup runs two runtimes with the sink def (key), so one consumer
// group, over 8 topics topicPrefix0..7 with kcat writing to each; kills
// one, lets the other take over every partition, restarts the first,
// stops both and lets one catch up, and returns the topics' ends, every
// record below them committed. slack is how far behind a commit may stay
// while the sink runs (the records of an open file).
func (e *bbEnv) runGroup(t *testing.T, key, topicPrefix, def string, slack int64) map[string]int64 {
	var topics []string
	for i := 0; i < 8; i++ {
		topics = append(topics, fmt.Sprintf("%s%d", topicPrefix, i))
	}
	adm := e.admin(t)
	var ps []*producer
	for _, tp := range topics {
		ps = append(ps, e.startProducer(t, tp, 100, 10, 20*time.Millisecond)) // ~500 records/s each
	}
	sdktest.Eventually(t, 30*time.Second, func() error {
		if got := ends(t, adm, topics...); len(got) < len(topics) {
			return fmt.Errorf("%d of %d topics exist", len(got), len(topics))
		}
		return nil
	})
	a := e.newRuntime(t, map[string]string{key + ".toml": def})
	b := e.newRuntime(t, map[string]string{key + ".toml": def})
	a.start()
	b.start()
	// Both members hold partitions: every topic's commit moves.
	progress := func(what string) map[string]int64 {
		c0, err := committed(adm, key)
		if err != nil {
			t.Fatal(err)
		}
		sdktest.Eventually(t, 60*time.Second, func() error {
			c, err := committed(adm, key)
			if err != nil {
				return err
			}
			for _, tp := range topics {
				if c[tp] < c0[tp]+200 {
					return fmt.Errorf("%s: %s committed %d, was %d", what, tp, c[tp], c0[tp])
				}
			}
			return nil
		})
		c, _ := committed(adm, key)
		return c
	}
	progress("both runtimes")
	time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
	a.kill()
	c, _ := committed(adm, key)
	t.Logf("SIGKILL runtime A mid-stream; committed %v", c)
	progress("runtime B alone, after A's session timed out")
	t.Logf("runtime B took over every topic; restart A")
	a.start()
	time.Sleep(3 * time.Second)
	progress("A and B after A rejoined")
	for _, p := range ps {
		p.halt(t)
	}
	end := ends(t, adm, topics...)
	waitCommitted(t, adm, key, end, slack, a, b)
	a.stop()
	b.stop()
	// One runtime alone catches up with what the two stops handed over,
	// then stops and must have committed every record.
	from, err := committed(adm, key)
	if err != nil {
		t.Fatal(err)
	}
	a.start()
	caughtUp(t, a, key, from, end)
	a.stop()
	wantCommitted(t, adm, key, end)
	return end
}

// avroTopic is the Avro topic of testKills; bbAvroSchema its records: the
// JSON records kcat writes, as Avro (topic as ptopic: topic is a metadata
// column), so that readObject's Parquet read-back rebuilds the same payload
// from columns 5 to 7.
const (
	avroTopic    = "bb.avro"
	bbAvroSchema = `{"type":"record","name":"bb","fields":[{"name":"n","type":"long"},{"name":"ptopic","type":"string"},{"name":"pad","type":"string"}]}`
)

// appendBBAvro appends the Avro binary of record {n, topic, pad}: a long is
// a zig-zag varint, a string its length so encoded and its bytes.
func appendBBAvro(b []byte, n int64, topic, pad string) []byte {
	b = binary.AppendVarint(b, n)
	for _, s := range []string{topic, pad} {
		b = binary.AppendVarint(b, int64(len(s)))
		b = append(b, s...)
	}
	return b
}

// bbAvroJSON decodes a bb record from its Avro binary into the JSON payload
// that readObject rebuilds from its Parquet row.
func bbAvroJSON(t *testing.T, v []byte) []byte {
	n, k := binary.Varint(v)
	if k <= 0 {
		t.Fatalf("Avro record %x: bad long", v)
	}
	v = v[k:]
	var strs [2]string
	for i := range strs {
		l, k := binary.Varint(v)
		if k <= 0 || l < 0 || int64(len(v)-k) < l {
			t.Fatalf("Avro record: bad string %d", i)
		}
		strs[i], v = string(v[k:k+int(l)]), v[k+int(l):]
	}
	topic, _ := json.Marshal(strs[0])
	pad, _ := json.Marshal(strs[1])
	return fmt.Appendf(nil, `{"n":%d,"topic":%s,"pad":%s}`, n, topic, pad)
}

// avroProducer writes bb records in Avro binary to a topic through a
// franz-go client, chunk records every interval, until halt.
type avroProducer struct {
	cl   *kgo.Client
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	err  error
}

func (e *bbEnv) startAvroProducer(t *testing.T, topic string, size, chunk int, every time.Duration) *avroProducer {
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.broker), kgo.DefaultProduceTopic(topic), kgo.ProducerLinger(5*time.Millisecond), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	p := &avroProducer{cl: cl, stop: make(chan struct{}), done: make(chan struct{})}
	t.Cleanup(func() {
		select {
		case <-p.stop:
		default:
			close(p.stop)
		}
		<-p.done
		cl.Close()
	})
	pad := strings.Repeat("x", max(size-40, 1))
	go func() {
		defer close(p.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for n := int64(0); ; {
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
			for range chunk {
				cl.Produce(context.Background(), &kgo.Record{Value: appendBBAvro(nil, n, topic, pad)}, func(_ *kgo.Record, err error) {
					if err != nil {
						p.mu.Lock()
						p.err = err
						p.mu.Unlock()
					}
				})
				n++
			}
		}
	}()
	return p
}

// halt stops writing and waits until every record is delivered.
func (p *avroProducer) halt(t *testing.T) {
	close(p.stop)
	<-p.done
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := p.cl.Flush(ctx); err != nil {
		t.Fatalf("Avro producer: flush: %v", err)
	}
	p.check(t)
}

// check fails the test if a record could not be produced.
func (p *avroProducer) check(t *testing.T) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		t.Fatalf("Avro producer: %v", p.err)
	}
}
