// Package fleet runs a fleet of pico-connectors processes for the tests,
// the reliability scenario and the bench: the real binary (built by
// runtimebin), a broker in its own process (a runtime with a persistent
// embedded broker and no connectors, which outlives every runtime the
// caller kills), an S3 sink definition, a producer that counts what the
// broker acknowledged, and an audit of the bucket.
//
// Every helper returns its errors, for programs (pico-reliability,
// pico-bench); the forms that take a testing.TB (New, StartBroker,
// Runtime.Start, StartProducer, WaitCommitted, WaitOwner, AuditS3,
// ReadCommitted, CountField, Checkpoints) call them and fail the test on
// an error.
package fleet

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/jackc/pgx/v5"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/runtime/status"
)

// freeAddr returns a 127.0.0.1 address with a free port.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// Options describe one runtime's folder.
type Options struct {
	// Bootstrap is the broker list; empty starts the runtime's embedded
	// broker on a free address, kept in the folder's broker-data.
	Bootstrap string
	// ID is runtime.id; empty leaves the default (HOSTNAME-PORT).
	ID string
	// Top are top-level keys written before the first table (mode = ...).
	Top string
	// Extra is appended to runtime.toml (mode, [fleet], [state], ...). A
	// [state] section is added (path = "state") when Extra has none.
	Extra string
	// Defs are the definition files, name -> content.
	Defs map[string]string
	// Env is added to the process environment.
	Env []string
}

// Runtime is one pico-connectors folder and the process running it (one at
// a time; Start again after Kill or Term).
type Runtime struct {
	// Dir is the folder with runtime.toml and connectors/.
	Dir string
	// API is host:port of the HTTP API.
	API string
	// ID is the runtime.id given in Options (may be empty).
	ID string
	// Addr is the embedded broker's address when Options.Bootstrap was
	// empty.
	Addr string

	t    testing.TB // set by New, for Start
	bin  string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *runtimebin.Output
	past strings.Builder // what earlier processes wrote
	done chan struct{}
}

// NewRuntime writes the folder of a runtime into dir, which must exist;
// Run runs it. The caller kills it when done.
func NewRuntime(dir, bin string, o Options) (*Runtime, error) {
	if err := os.MkdirAll(filepath.Join(dir, "connectors"), 0o755); err != nil {
		return nil, err
	}
	api, err := freeAddr()
	if err != nil {
		return nil, err
	}
	r := &Runtime{Dir: dir, API: api, ID: o.ID, bin: bin, env: o.Env}
	var b strings.Builder
	b.WriteString("shutdown_grace = \"30s\"\n")
	if o.Top != "" {
		b.WriteString(o.Top + "\n")
	}
	if o.ID != "" {
		fmt.Fprintf(&b, "id = %q\n", o.ID)
	}
	b.WriteString("[broker]\n")
	if o.Bootstrap != "" {
		fmt.Fprintf(&b, "bootstrap_servers = %q\n", o.Bootstrap)
	} else {
		// The embedded broker keeps its data in broker-data, the default
		// of broker.data_dir, beside runtime.toml.
		if r.Addr, err = freeAddr(); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "embedded_address = %q\n", r.Addr)
	}
	fmt.Fprintf(&b, "[broker.properties]\n\"topic.metadata.refresh.interval.ms\" = \"1000\"\n[http]\naddress = %q\n[log]\nformat = \"json\"\n%s\n", r.API, o.Extra)
	if !strings.Contains(o.Extra, "[state]") {
		b.WriteString("[state]\npath = \"state\"\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	for name, body := range o.Defs {
		if err := os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// New is NewRuntime for a test, in a folder of t.TempDir; Start runs it.
// The process is killed at cleanup.
func New(t testing.TB, bin string, o Options) *Runtime {
	t.Helper()
	r, err := NewRuntime(t.TempDir(), bin, o)
	if err != nil {
		t.Fatal(err)
	}
	r.t = t
	t.Cleanup(r.Kill)
	return r
}

// NewBroker starts, in dir, a runtime with no connectors whose embedded
// broker keeps its data in its folder, and returns it; Addr is the broker.
func NewBroker(dir, bin string) (*Runtime, error) {
	b, err := NewRuntime(dir, bin, Options{})
	if err != nil {
		return nil, err
	}
	return b, b.Run()
}

// StartBroker is NewBroker for a test, killed at cleanup.
func StartBroker(t testing.TB, bin string) *Runtime {
	t.Helper()
	b := New(t, bin, Options{})
	b.Start()
	return b
}

// Run runs the process and waits until GET /health answers.
func (r *Runtime) Run() error {
	cmd := exec.Command(r.bin, "run", "--config", filepath.Join(r.Dir, "runtime.toml"))
	cmd.Env = append(os.Environ(), r.env...)
	out := &runtimebin.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	if r.out != nil {
		r.past.WriteString(r.out.String())
	}
	r.cmd, r.out, r.done = cmd, out, done
	r.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	c := http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get("http://" + r.API + "/health")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if !r.Alive() {
			return fmt.Errorf("pico-connectors (%s) exited at start: %s\n%s", r.Dir, cmd.ProcessState, r.Tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pico-connectors API %s not up after 60 s\n%s", r.API, r.Tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Start is Run for a runtime made by New: an error fails its test.
func (r *Runtime) Start() {
	if r.t == nil {
		panic("fleet: Start is for a runtime made by New(t, ...); call Run")
	}
	r.t.Helper()
	if err := r.Run(); err != nil {
		r.t.Fatal(err)
	}
}

// PID is the id of the running process (0 before Run).
func (r *Runtime) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Alive reports whether the process runs (a stopped one counts).
func (r *Runtime) Alive() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Tail returns the last lines the process wrote.
func (r *Runtime) Tail() string {
	r.mu.Lock()
	out := r.out
	r.mu.Unlock()
	if out == nil {
		return ""
	}
	s := out.String()
	if len(s) > 6000 {
		s = "..." + s[len(s)-6000:]
	}
	return s
}

// Output returns everything the processes of this runtime wrote, the
// earlier ones first.
func (r *Runtime) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		return ""
	}
	return r.past.String() + r.out.String()
}

func (r *Runtime) signal(s syscall.Signal) {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if cmd != nil && r.Alive() {
		_ = cmd.Process.Signal(s)
	}
}

// Kill sends SIGKILL (after SIGCONT is not needed: SIGKILL ends a stopped
// process too) and waits until the process is gone.
func (r *Runtime) Kill() {
	if !r.Alive() {
		return
	}
	r.signal(syscall.SIGKILL)
	<-r.done
}

// Pause sends SIGSTOP: the process stays in memory, answers nothing, and
// its broker sessions time out.
func (r *Runtime) Pause() { r.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT after Pause.
func (r *Runtime) Resume() { r.signal(syscall.SIGCONT) }

// Term sends SIGTERM and waits up to limit for a clean exit; after limit it
// kills the process and returns an error, as it does for a non-zero exit.
func (r *Runtime) Term(limit time.Duration) error {
	if !r.Alive() {
		return fmt.Errorf("pico-connectors (%s) is not running", r.Dir)
	}
	r.signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(limit):
		r.Kill()
		return fmt.Errorf("pico-connectors (%s) did not stop within %s of SIGTERM\n%s", r.Dir, limit, r.Tail())
	}
	if !r.cmd.ProcessState.Success() {
		return fmt.Errorf("pico-connectors (%s): exit %s\n%s", r.Dir, r.cmd.ProcessState, r.Tail())
	}
	return nil
}

// Entry is what GET /sources/{key} and /sinks/{key} return.
type Entry struct {
	Status    string         `json:"status"`
	LastError string         `json:"last_error"`
	Counters  status.Figures `json:"counters"`
	Placement struct {
		Owner      string   `json:"owner"`
		Partitions []string `json:"partitions"`
		Generation int64    `json:"generation"`
	} `json:"placement"`
}

// Entry reads GET /{kind}s/{key} (kind "source" or "sink").
func (r *Runtime) Entry(kind, key string) (Entry, error) {
	var e Entry
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + r.API + "/" + kind + "s/" + key)
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e, fmt.Errorf("GET /%ss/%s: %s", kind, key, resp.Status)
	}
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

// WaitEntry reads Entry until cond holds for it, for up to limit, and
// returns the last entry read and whether cond held.
func (r *Runtime) WaitEntry(kind, key string, limit time.Duration, cond func(Entry) bool) (Entry, bool) {
	deadline := time.Now().Add(limit)
	var e Entry
	for time.Now().Before(deadline) {
		var err error
		e, err = r.Entry(kind, key)
		if err == nil && cond(e) {
			return e, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return e, false
}

// S3SinkDef is an S3 sink definition (delivery = "exactly_once", JSON
// lines with metadata, files of perFile records under key/<topic>/) over
// the topics matching pattern. props, when not empty, is the block's
// properties table body (`"session.timeout.ms" = "6000"`); extra is
// appended to [plugin_config].
func S3SinkDef(key, pattern string, srv *s3test.Server, perFile int, props, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = %q
path = "libpicomq_connector_s3_sink"
[[topics]]
pattern = %q
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
file_rotation = "messages"
max_messages_per_file = %d
include_metadata = true
delivery = "exactly_once"
%s`, key, pattern, props, srv.Bucket, srv.Endpoint, srv.AccessKey, srv.SecretKey, key, perFile, extra)
}

// Producer writes small JSON records to topics in a loop and counts, per
// topic, the records the broker acknowledged: the offsets below Acked are
// the ones a sink owes.
type Producer struct {
	cl    *kgo.Client
	stop  chan struct{}
	wg    sync.WaitGroup
	acked map[string]*atomic.Int64
}

// NewProducer writes chunk records to each topic every interval until
// Halt.
func NewProducer(addr string, topics []string, chunk int, every time.Duration) (*Producer, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return nil, err
	}
	p := &Producer{cl: cl, stop: make(chan struct{}), acked: map[string]*atomic.Int64{}}
	for _, topic := range topics {
		n := &atomic.Int64{}
		p.acked[topic] = n
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			pad := strings.Repeat("p", 40)
			for {
				select {
				case <-p.stop:
					return
				case <-time.After(every):
				}
				recs := make([]*kgo.Record, chunk)
				for i := range recs {
					recs[i] = &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, `{"n":%d,"pad":%q}`, n.Load()+int64(i), pad)}
				}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				res := cl.ProduceSync(ctx, recs...)
				cancel()
				// Count up to the highest acknowledged offset + 1: the
				// offsets of a topic written by this producer alone.
				for _, r := range res {
					if r.Err == nil && r.Record.Offset+1 > n.Load() {
						n.Store(r.Record.Offset + 1)
					}
				}
			}
		}()
	}
	return p, nil
}

// StartProducer is NewProducer for a test: an error fails t.
func StartProducer(t testing.TB, addr string, topics []string, chunk int, every time.Duration) *Producer {
	t.Helper()
	p, err := NewProducer(addr, topics, chunk, every)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// Acked returns, per topic, the number of offsets acknowledged so far.
func (p *Producer) Acked() map[string]int64 {
	out := map[string]int64{}
	for t, n := range p.acked {
		out[t] = n.Load()
	}
	return out
}

// Halt stops writing and returns Acked.
func (p *Producer) Halt() map[string]int64 {
	select {
	case <-p.stop:
	default:
		close(p.stop)
	}
	p.wg.Wait()
	p.cl.Close()
	return p.Acked()
}

// Committed returns a group's committed offsets by topic (partition 0).
func Committed(addr, group string) (map[string]int64, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	res.Each(func(o kadm.OffsetResponse) {
		if o.Err == nil && o.Partition == 0 {
			out[o.Topic] = o.At
		}
	})
	return out, nil
}

// AwaitCommitted waits until the group's commit of every topic in want is
// at least its value; after limit it returns an error naming what is
// behind.
func AwaitCommitted(addr, group string, want map[string]int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		got, err := Committed(addr, group)
		behind := map[string]string{}
		for tp, n := range want {
			if err != nil || got[tp] < n {
				behind[tp] = fmt.Sprintf("%d of %d", got[tp], n)
			}
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("group %s after %s: commits behind %v (err %v)", group, limit, behind, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// WaitCommitted is AwaitCommitted for a test: an error fails t.
func WaitCommitted(t testing.TB, addr, group string, want map[string]int64, limit time.Duration) {
	t.Helper()
	if err := AwaitCommitted(addr, group, want, limit); err != nil {
		t.Fatal(err)
	}
}

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
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			body, err := srv.Get(ctx, o.Key)
			cancel()
			if err != nil {
				return a, fmt.Errorf("get %s: %v", o.Key, err)
			}
			sc := bufio.NewScanner(bytes.NewReader(body))
			sc.Buffer(make([]byte, 1<<20), 64<<20)
			for sc.Scan() {
				var l struct {
					Offset *int64 `json:"offset"`
				}
				if json.Unmarshal(sc.Bytes(), &l) != nil || l.Offset == nil {
					return a, fmt.Errorf("object %s: line without offset metadata: %.100q", o.Key, sc.Bytes())
				}
				seen[*l.Offset]++
				if len(in[*l.Offset]) < 4 {
					in[*l.Offset] = append(in[*l.Offset], path.Base(o.Key))
				}
				a.Records++
			}
			if _, _, ok := nameRange(o.Key); !ok {
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

// nameRange parses <partition>-<first>-<last>.<ext> from an object key.
func nameRange(key string) (first, last int64, ok bool) {
	base, _, _ := strings.Cut(path.Base(key), ".")
	parts := strings.Split(base, "-")
	if len(parts) != 3 {
		return 0, 0, false
	}
	f, err1 := strconv.ParseInt(parts[1], 10, 64)
	l, err2 := strconv.ParseInt(parts[2], 10, 64)
	return f, l, err1 == nil && err2 == nil
}

// ReadTopic returns the values of every committed record of partition 0
// of topic, in offset order, read with isolation.level = read_committed:
// what a transaction aborted, or a fenced producer wrote, is not there.
func ReadTopic(addr, topic string) ([][]byte, error) {
	c, err := kafka.NewConsumer(&kafka.ConfigMap{"bootstrap.servers": addr, "group.id": "fleet-reader", "isolation.level": "read_committed",
		"enable.partition.eof": true, "enable.auto.commit": false, "go.logs.channel.enable": true})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	if err := c.Assign([]kafka.TopicPartition{{Topic: &topic, Partition: 0, Offset: kafka.OffsetBeginning}}); err != nil {
		return nil, err
	}
	var out [][]byte
	for deadline := time.Now().Add(120 * time.Second); time.Now().Before(deadline); {
		switch e := c.Poll(100).(type) {
		case *kafka.Message:
			out = append(out, e.Value)
		case kafka.PartitionEOF:
			return out, nil
		}
	}
	return nil, fmt.Errorf("read %s: no end after 120 s (%d records)", topic, len(out))
}

// ReadCommitted is ReadTopic for a test: an error fails t.
func ReadCommitted(t testing.TB, addr, topic string) [][]byte {
	t.Helper()
	out, err := ReadTopic(addr, topic)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// PGWriter inserts rows (id, note) with increasing ids into a table in
// small transactions until Halt, reconnecting after errors.
type PGWriter struct {
	dsn, table string
	rows       int
	written    atomic.Int64 // highest id committed
	stop       chan struct{}
	wg         sync.WaitGroup
}

// StartPGWriter writes rows transactions of rows rows every pause.
func StartPGWriter(dsn, table string, rows int, pause time.Duration) *PGWriter {
	w := &PGWriter{dsn: dsn, table: table, rows: rows, stop: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(pause):
			}
			if conn == nil {
				c, err := pgx.Connect(context.Background(), w.dsn)
				if err != nil {
					continue
				}
				conn = c
			}
			from := w.written.Load() + 1
			to := from + int64(w.rows) - 1
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := conn.Exec(ctx, `INSERT INTO `+w.table+` SELECT g, 'row ' || g FROM generate_series($1::bigint, $2::bigint) g ON CONFLICT DO NOTHING`, from, to)
			cancel()
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			w.written.Store(to)
		}
	}()
	return w
}

// Written is the highest id committed so far.
func (w *PGWriter) Written() int64 { return w.written.Load() }

// Halt stops writing and returns Written.
func (w *PGWriter) Halt() int64 {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	return w.written.Load()
}

// Owner returns the runtime of rts that runs source key: its API shows
// status Running and placement.owner its own ID. Runtimes in skip, and
// those not running, are left out; nil when none does.
func Owner(rts []*Runtime, key string, skip ...*Runtime) *Runtime {
	for _, r := range rts {
		if !r.Alive() || slices.Contains(skip, r) {
			continue
		}
		if en, err := r.Entry("source", key); err == nil && en.Status == "Running" && en.Placement.Owner == r.ID {
			return r
		}
	}
	return nil
}

// AwaitOwner waits up to limit for Owner to find one, and returns an
// error with what each runtime shows when none does.
func AwaitOwner(rts []*Runtime, key string, limit time.Duration, skip ...*Runtime) (*Runtime, error) {
	deadline := time.Now().Add(limit)
	for {
		if r := Owner(rts, key, skip...); r != nil {
			return r, nil
		}
		if time.Now().After(deadline) {
			var views []string
			for _, r := range rts {
				en, err := r.Entry("source", key)
				views = append(views, fmt.Sprintf("%s alive=%v: %s owner=%q err=%v %s", r.ID, r.Alive(), en.Status, en.Placement.Owner, err, en.LastError))
			}
			return nil, fmt.Errorf("no runtime runs source %s after %s: %v", key, limit, views)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitOwner is AwaitOwner for a test: an error fails t.
func WaitOwner(t testing.TB, rts []*Runtime, key string, limit time.Duration, skip ...*Runtime) *Runtime {
	t.Helper()
	r, err := AwaitOwner(rts, key, limit, skip...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// ReadCheckpoints reads the committed checkpoints of source key from the
// broker state store (topic pico-connectors.state.KEY, read_committed) and
// checks, with pos giving each one's position, that they never go
// backwards. It returns them, and an error naming the first that does, or
// saying why they could not be read.
func ReadCheckpoints(addr, key string, pos func(blob []byte) (uint64, error)) ([][]byte, error) {
	cps, err := ReadTopic(addr, "pico-connectors.state."+key)
	if err != nil {
		return nil, err
	}
	return inOrder(key, cps, pos)
}

// Checkpoints is ReadCheckpoints for a test: failing to read them fails t;
// checkpoints going backwards is the error returned.
func Checkpoints(t testing.TB, addr, key string, pos func(blob []byte) (uint64, error)) ([][]byte, error) {
	t.Helper()
	return inOrder(key, ReadCommitted(t, addr, "pico-connectors.state."+key), pos)
}

// inOrder checks that the checkpoints cps of source key never go backwards.
func inOrder(key string, cps [][]byte, pos func(blob []byte) (uint64, error)) ([][]byte, error) {
	if len(cps) == 0 {
		return nil, fmt.Errorf("source %s: no checkpoint committed", key)
	}
	var last uint64
	for i, cp := range cps {
		p, err := pos(cp)
		if err != nil {
			return cps, fmt.Errorf("source %s: checkpoint %d %.200q: %v", key, i, cp, err)
		}
		if p < last {
			return cps, fmt.Errorf("source %s: checkpoint %d (%.200s) is behind the one before it (position %d < %d): a stale owner saved state", key, i, cp, p, last)
		}
		last = p
	}
	return cps, nil
}

// RandomPos is the position of a random source checkpoint: next_seq.
func RandomPos(blob []byte) (uint64, error) {
	var s struct {
		NextSeq *uint64 `json:"next_seq"`
	}
	if err := json.Unmarshal(blob, &s); err != nil {
		return 0, err
	}
	if s.NextSeq == nil {
		return 0, fmt.Errorf("no next_seq")
	}
	return *s.NextSeq, nil
}

// CDCPos is the position of a Postgres CDC checkpoint: its LSN (0 while
// the snapshot runs).
func CDCPos(blob []byte) (uint64, error) {
	var s struct {
		LSN string `json:"lsn"`
	}
	if err := json.Unmarshal(blob, &s); err != nil {
		return 0, err
	}
	if s.LSN == "" {
		return 0, nil
	}
	var hi, lo uint64
	if _, err := fmt.Sscanf(s.LSN, "%X/%X", &hi, &lo); err != nil {
		return 0, fmt.Errorf("lsn %q: %v", s.LSN, err)
	}
	return hi<<32 | lo, nil
}

// CountValues reads topic (read_committed) and counts how often each value
// of the integer JSON field appears; a record without it is an error.
func CountValues(addr, topic, field string) (map[int64]int, error) {
	values, err := ReadTopic(addr, topic)
	if err != nil {
		return nil, err
	}
	seen := map[int64]int{}
	for _, v := range values {
		var r map[string]json.RawMessage
		var n int64
		if json.Unmarshal(v, &r) != nil || json.Unmarshal(r[field], &n) != nil {
			return nil, fmt.Errorf("%s: record without an integer %q: %.100q", topic, field, v)
		}
		seen[n]++
	}
	return seen, nil
}

// CountField is CountValues for a test: an error fails t.
func CountField(t testing.TB, addr, topic, field string) map[int64]int {
	t.Helper()
	seen, err := CountValues(addr, topic, field)
	if err != nil {
		t.Fatal(err)
	}
	return seen
}

// Exactly counts, of the values from..to-1, those missing from seen and
// those seen more than once.
func Exactly(seen map[int64]int, from, to int64) (missing, twice int64) {
	for v := from; v < to; v++ {
		switch {
		case seen[v] == 0:
			missing++
		case seen[v] > 1:
			twice++
		}
	}
	return missing, twice
}
