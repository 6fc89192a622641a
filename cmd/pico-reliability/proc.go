package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/scram"

	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/standalone"
	"github.com/picomq/pico-connectors/runtime/status"
)

// buildRuntime compiles cmd/pico-connectors once, with a progress line.
func buildRuntime(h *standalone.TB) string {
	fmt.Println("building cmd/pico-connectors")
	return runtimebin.Build(h)
}

// freeAddr returns a 127.0.0.1 address with a free port.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
	return l.Addr().String()
}

// rt is one runtime set-up: a folder with runtime.toml and connectors/,
// and the process running it.
type rt struct {
	s    *suite
	dir  string
	api  string // host:port of the HTTP API
	env  []string
	cmd  *exec.Cmd
	out  *runtimebin.Output
	done chan struct{}
}

// newRT writes runtime.toml (extra is appended to it) and one definition
// file per entry of defs (file name -> content).
func (s *suite) newRT(bootstrap, extra string, defs map[string]string) *rt {
	dir := s.h.TempDir()
	must(os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	api := freeAddr()
	cfg := fmt.Sprintf("shutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\nembedded_address = %q\n[broker.properties]\n\"topic.metadata.refresh.interval.ms\" = \"1000\"\n[http]\naddress = %q\n[log]\nformat = \"json\"\n%s",
		bootstrap, freeAddr(), api, extra)
	if !strings.Contains(extra, "[state]") {
		cfg += "[state]\npath = \"state\"\n"
	}
	must(os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(cfg), 0o644))
	for name, body := range defs {
		must(os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o644))
	}
	return &rt{s: s, dir: dir, api: api}
}

// start runs the runtime and waits until the API answers.
func (r *rt) start() {
	r.cmd = exec.Command(r.s.bin, "run", "--config", filepath.Join(r.dir, "runtime.toml"))
	r.cmd.Env = append(os.Environ(), r.env...)
	r.out = &runtimebin.Output{}
	r.cmd.Stdout, r.cmd.Stderr = r.out, r.out
	must(r.cmd.Start())
	r.done = make(chan struct{})
	go func() { _ = r.cmd.Wait(); close(r.done) }()
	r.s.h.Cleanup(func() { r.kill() })
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + r.api + "/health")
		if err == nil {
			resp.Body.Close()
			return
		}
		select {
		case <-r.done:
			mustf("pico-connectors exited at start: %s\n%s", r.cmd.ProcessState, tail(r.out.String()))
		default:
		}
		if time.Now().After(deadline) {
			mustf("pico-connectors API %s not up after 30 s\n%s", r.api, tail(r.out.String()))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func tail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}

// running reports whether the process is alive.
func (r *rt) running() bool {
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

// kill sends SIGKILL and waits for the process to be gone.
func (r *rt) kill() {
	if !r.running() {
		return
	}
	_ = r.cmd.Process.Signal(syscall.SIGKILL)
	<-r.done
}

// term sends SIGTERM and returns the exit error after the process ended.
func (r *rt) term(limit time.Duration) error {
	if !r.running() {
		return fmt.Errorf("not running")
	}
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(limit):
		r.kill()
		return fmt.Errorf("did not stop within %s after SIGTERM", limit)
	}
	if !r.cmd.ProcessState.Success() {
		return fmt.Errorf("exit %s\n%s", r.cmd.ProcessState, tail(r.out.String()))
	}
	return nil
}

// entry is what GET /sources/{key} and /sinks/{key} return.
type entry struct {
	Status    string         `json:"status"`
	LastError string         `json:"last_error"`
	Counters  status.Figures `json:"counters"`
}

// status reads GET /{kind}s/{key}.
func (r *rt) status(kind, key string) (entry, error) {
	var e entry
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + r.api + "/" + kind + "s/" + key)
	if err != nil {
		return e, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return e, fmt.Errorf("GET /%ss/%s: %s", kind, key, resp.Status)
	}
	return e, json.NewDecoder(resp.Body).Decode(&e)
}

// waitStatus polls until cond holds for the connector's entry.
func (r *rt) waitStatus(kind, key string, limit time.Duration, cond func(entry) bool) (entry, bool) {
	deadline := time.Now().Add(limit)
	var e entry
	for time.Now().Before(deadline) {
		var err error
		e, err = r.status(kind, key)
		if err == nil && cond(e) {
			return e, true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return e, false
}

// metricValue reads one unlabelled sample from GET /metrics.
func metricValue(api, name string) (float64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// goroutines reads go_goroutines from GET /metrics.
func (r *rt) goroutines() (int64, error) {
	f, err := metricValue(r.api, "go_goroutines")
	return int64(f), err
}

// sample calls take every every until dur has passed since t0, with the
// time since t0 (to the second), the runtime's RSS in KiB and its
// goroutines.
func (r *rt) sample(t0 time.Time, dur, every time.Duration, take func(at time.Duration, rss, goroutines int64)) {
	for time.Since(t0) < dur {
		time.Sleep(every)
		rss, err := procstat.KiB(r.cmd.Process.Pid, "VmRSS")
		must(err)
		g, err := r.goroutines()
		must(err)
		take(time.Since(t0).Round(time.Second), rss, g)
	}
}

// record is one record read back from a topic.
type record struct {
	Offset int64
	Key    []byte
	Value  []byte
}

// readTopic reads partition 0 of topic from the start to its high
// watermark with franz-go (independent of librdkafka).
func readTopic(addr, topic string) ([]record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := newClient(addr)
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("end offset of %s: %v", topic, end.Err)
	}
	if end.Offset == 0 {
		return nil, nil
	}
	cl, err := newClient(addr,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxBytes(64<<20))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out []record
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, fmt.Errorf("read %s: %d of %d records: %w", topic, len(out), end.Offset, err)
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return out, ferr
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset < end.Offset {
				out = append(out, record{Offset: r.Offset, Key: r.Key, Value: r.Value})
			}
			if r.Offset >= end.Offset-1 {
				done = true
			}
		})
		if done {
			return out, nil
		}
	}
}

// endOffset returns the high watermark of partition 0 of topic (0 when the
// topic does not exist yet).
func endOffset(addr, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := newClient(addr)
	if err != nil {
		return -1
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return 0
	}
	return o.Offset
}

// committed returns the committed offset of group on partition 0 of topic,
// or 0 when none.
func committed(addr, group, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := newClient(addr)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return 0, nil
	}
	return o.At, o.Err
}

// produce writes values to topic with franz-go and waits for every ack.
func produce(addr, topic string, values [][]byte) error {
	cl, err := newClient(addr, kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: v}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

// logins holds the SASL login of the brokers that need one (a runtime's
// embedded broker), by address.
var logins sync.Map

// loginAt makes every client of addr log in as the embedded broker's
// runtime user with the password the runtime generated into dataDir.
func loginAt(addr, dataDir string) {
	pw, err := os.ReadFile(filepath.Join(dataDir, "embedded-password"))
	must(err)
	logins.Store(addr, kgo.SASL(scram.Auth{User: "pico-connectors", Pass: strings.TrimSpace(string(pw))}.AsSha256Mechanism()))
}

// newClient is a franz-go client of the broker at addr, logged in when
// loginAt named it.
func newClient(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	opts = append([]kgo.Opt{kgo.SeedBrokers(addr)}, opts...)
	if login, ok := logins.Load(addr); ok {
		opts = append(opts, login.(kgo.Opt))
	}
	return kgo.NewClient(opts...)
}
