package postgressource

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// Bounds of TestBigTxSIGKILL. A batch of the source holds at most
// bigTxBatch records of about bigTxRowBytes of JSON each; the runtime
// keeps a bounded number of such batches alive (the one being built, the
// one librdkafka is delivering and its copy in C memory, garbage the
// collector has not reclaimed yet), so its peak RSS may exceed its idle RSS
// by at most bigTxBatchFactor batches plus bigTxSlackMiB for buffers that
// do not scale with the batch (librdkafka queues, the replication stream,
// Go's heap growth step). Without splitting, the whole transaction is one
// batch and the peak grows with the transaction (about 1 GB per million
// rows in issue 12).
const (
	bigTxBatch       = 10_000
	bigTxPad         = 150 // filler characters per row; a record is about 200 B
	bigTxBatchFactor = 10
	bigTxSlackMiB    = 48
)

// TestBigTxSIGKILL commits one transaction of 2,000,000 rows (300,000 with
// -short) while the pico-connectors runtime (a subprocess) runs this source
// in CDC mode with the default reader and batch_size 10,000. It kills the
// runtime with SIGKILL once part of the transaction is on the topic,
// restarts it and waits for the rest. It proves that:
//   - the peak RSS of each run (VmHWM) stays within idle RSS +
//     bigTxBatchFactor x batch_size x record size + bigTxSlackMiB, whatever
//     the transaction size: the transaction is split into batches;
//   - every row is on the topic, and the only duplicates are one
//     contiguous run of at most batch_size rows (the batch in flight at the
//     kill): the restart resumes inside the transaction;
//   - no batch exceeded batch_size (records produced / batches acked).
func TestBigTxSIGKILL(t *testing.T) {
	rows := 2_000_000
	if testing.Short() {
		rows = 300_000
	}
	if v, err := strconv.Atoi(os.Getenv("PICO_PG_BIGTX_ROWS")); err == nil && v > 0 {
		rows = v
	}
	reader := os.Getenv("PICO_PG_BIGTX_READER") // "" is the default reader
	db := newDB(t)
	db.exec(`CREATE TABLE big (id bigint PRIMARY KEY, v text)`)
	bin := runtimebin.Build(t)
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

	const topic = "pg.bigtx"
	dir := t.TempDir()
	api := bigTxFreeAddr(t)
	readerLine := ""
	if reader != "" {
		readerLine = fmt.Sprintf("cdc_reader = %q\n", reader)
	}
	runtimeToml := fmt.Sprintf("shutdown_grace = \"20s\"\n[broker]\nbootstrap_servers = %q\n[http]\naddress = %q\n[state]\npath = \"state\"\n[log]\nformat = \"json\"\nlevel = \"warn\"\n", b.Addr(), api)
	def := fmt.Sprintf(`type = "source"
key = "bigtx"
path = "libpicomq_connector_postgres_source"
[[topics]]
topic = %q
create_topics = true
[plugin_config]
connection_string = %q
mode = "cdc"
tables = ["public.big"]
batch_size = %d
poll_interval = "20ms"
replication_slot = "bigtx_%s"
publication = "bigtx_%s"
%s`, topic, db.dsn, bigTxBatch, db.tag, db.tag, readerLine)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtimeToml), 0o644))
	must(os.WriteFile(filepath.Join(dir, "connectors", "bigtx.toml"), []byte(def), 0o644))

	type proc struct {
		cmd  *exec.Cmd
		out  *runtimebin.Output
		done chan struct{}
	}
	start := func() *proc {
		p := &proc{cmd: exec.Command(bin, "run", "--config", filepath.Join(dir, "runtime.toml")), out: &runtimebin.Output{}, done: make(chan struct{})}
		p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
		must(p.cmd.Start())
		go func() { p.cmd.Wait(); close(p.done) }()
		t.Cleanup(func() {
			p.cmd.Process.Kill()
			<-p.done
		})
		return p
	}
	alive := func(p *proc) {
		t.Helper()
		select {
		case <-p.done:
			t.Fatalf("pico-connectors exited (%s); output:\n%s", p.cmd.ProcessState, bigTxTail(p.out.String()))
		default:
		}
	}
	// waitFor polls cond every 5 ms until it holds, failing after limit or
	// when the runtime exits.
	waitFor := func(p *proc, limit time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(limit)
		for !cond() {
			alive(p)
			if time.Now().After(deadline) {
				t.Fatalf("%s: not within %s (topic at %d); output:\n%s", what, limit, b.HighWatermark(topic), bigTxTail(p.out.String()))
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	kib := func(p *proc, field string) int64 {
		t.Helper()
		v, err := procstat.KiB(p.cmd.Process.Pid, field)
		if err != nil {
			t.Fatalf("%v; output:\n%s", err, bigTxTail(p.out.String()))
		}
		return v
	}

	// The first start creates the slot; the transaction commits after.
	p := start()
	waitFor(p, 60*time.Second, "slot created", func() bool {
		return db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = 'bigtx_`+db.tag+`'`) == "1"
	})
	time.Sleep(time.Second) // let the runtime settle into its idle size
	idle := kib(p, "VmRSS")
	t0 := time.Now()
	db.exec(fmt.Sprintf(`INSERT INTO big SELECT g, repeat('x', %d) FROM generate_series(1, %d) g`, bigTxPad, rows))
	t.Logf("committed one transaction of %d rows in %s; runtime idle RSS %.1f MiB", rows, time.Since(t0).Round(time.Millisecond), float64(idle)/1024)

	// Kill once 40% of the transaction is on the topic.
	killAt := int64(rows) * 2 / 5
	waitFor(p, 5*time.Minute, fmt.Sprintf("%d records on the topic", killAt), func() bool { return b.HighWatermark(topic) >= killAt })
	peak1 := kib(p, "VmHWM")
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	atKill := b.HighWatermark(topic)
	t.Logf("SIGKILL with %d of %d rows on the topic (%s after the commit); peak RSS %.1f MiB", atKill, rows, time.Since(t0).Round(time.Millisecond), float64(peak1)/1024)
	if atKill >= int64(rows) {
		t.Fatalf("the whole transaction (%d rows) was on the topic before the kill; the kill must land in the middle", rows)
	}
	state, _ := os.ReadFile(filepath.Join(dir, "state", "bigtx.state"))
	t.Logf("checkpoint at the kill: %s", state)

	// Read the topic as it grows until every id is there: each id once,
	// except the batch in flight at the kill.
	counts := make([]uint8, rows+1)
	var payloadBytes, read int64
	present := 0
	idKey := []byte(`"id":`)
	scan := func(end int64) error {
		if end <= read {
			return nil
		}
		err := bigTxScan(b.Addr(), topic, read, end, func(off int64, v []byte) error {
			i := bytes.Index(v, idKey)
			if i < 0 {
				return fmt.Errorf("offset %d has no id: %.100q", off, v)
			}
			j := i + len(idKey)
			k := j
			for k < len(v) && v[k] >= '0' && v[k] <= '9' {
				k++
			}
			id, err := strconv.Atoi(string(v[j:k]))
			if err != nil || id < 1 || id > rows {
				return fmt.Errorf("offset %d: id %q out of 1..%d", off, v[j:k], rows)
			}
			if counts[id] == 0 {
				present++
			}
			if counts[id] < 255 {
				counts[id]++
			}
			payloadBytes += int64(len(v))
			return nil
		})
		read = end
		return err
	}
	p = start()
	waitFor(p, 5*time.Minute, fmt.Sprintf("all %d rows on the topic", rows), func() bool {
		hw := b.HighWatermark(topic)
		if hw < int64(rows) {
			return false // cannot hold every id yet
		}
		must(scan(hw))
		return present == rows
	})
	// Then wait until everything produced is on the topic (the last
	// batch may still be between its delivery and its Ack).
	var counters struct {
		Produced int64 `json:"records_produced"`
		Acked    int64 `json:"batches_acked"`
	}
	waitFor(p, time.Minute, "every produced record on the topic", func() bool {
		e, err := bigTxStatus(api)
		counters = e
		return err == nil && atKill+e.Produced == b.HighWatermark(topic) && e.Acked > 0
	})
	peak2 := kib(p, "VmHWM")
	idle2 := kib(p, "VmRSS")
	p.cmd.Process.Signal(syscall.SIGTERM)
	<-p.done
	if !p.cmd.ProcessState.Success() {
		t.Fatalf("graceful stop: %s\n%s", p.cmd.ProcessState, bigTxTail(p.out.String()))
	}
	t.Logf("restart: %d records produced in %d acknowledged batches; peak RSS %.1f MiB (RSS at the end %.1f MiB)",
		counters.Produced, counters.Acked, float64(peak2)/1024, float64(idle2)/1024)
	end := b.HighWatermark(topic)
	must(scan(end))

	missing, dups, runs, first := 0, 0, 0, -1
	for id := 1; id <= rows; id++ {
		switch c := counts[id]; {
		case c == 0:
			missing++
			if first < 0 {
				first = id
			}
		case c > 1:
			dups += int(c) - 1
			if counts[id-1] <= 1 {
				runs++
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of %d rows missing (first id %d)", missing, rows, first)
	}
	if dups > bigTxBatch || runs > 1 {
		t.Errorf("%d duplicates in %d runs; allowed: at most one batch (%d rows) in one run, the batch in flight at the kill", dups, runs, bigTxBatch)
	}
	rowBytes := float64(payloadBytes) / float64(end)
	batchMiB := float64(bigTxBatch) * rowBytes / (1 << 20)
	for i, r := range []struct{ idle, peak int64 }{{idle, peak1}, {idle, peak2}} {
		limit := float64(r.idle)/1024 + bigTxBatchFactor*batchMiB + bigTxSlackMiB
		if got := float64(r.peak) / 1024; got > limit {
			t.Errorf("run %d: peak RSS %.1f MiB above the bound %.1f MiB = idle %.1f MiB + %d x batch_size %d x %.0f B + %d MiB",
				i+1, got, limit, float64(r.idle)/1024, bigTxBatchFactor, bigTxBatch, rowBytes, bigTxSlackMiB)
		}
	}
	if counters.Produced > (counters.Acked+1)*bigTxBatch {
		t.Errorf("restart: %d records produced in %d acknowledged batches (and at most one more in flight): more than batch_size %d per batch", counters.Produced, counters.Acked, bigTxBatch)
	}
	t.Logf("%d records for %d rows (%.0f B each): none missing, %d duplicates in %d run(s); bound %.1f MiB over idle RSS (%d x %.2f MiB batches + %d MiB)",
		end, rows, rowBytes, dups, runs, bigTxBatchFactor*batchMiB+bigTxSlackMiB, bigTxBatchFactor, batchMiB, bigTxSlackMiB)
}

// bigTxScan reads partition 0 of topic from offset from up to end with
// franz-go and calls f for each record, without keeping them.
func bigTxScan(addr, topic string, from, end int64, f func(int64, []byte) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().At(from)}}),
		kgo.FetchMaxBytes(32<<20))
	if err != nil {
		return err
	}
	defer cl.Close()
	next := from
	for next < end {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("read %s: %d of %d records: %w", topic, next, end, err)
		}
		for _, e := range fs.Errors() {
			return fmt.Errorf("read %s: %w", topic, e.Err)
		}
		var ferr error
		fs.EachRecord(func(r *kgo.Record) {
			if ferr != nil || r.Offset < next || r.Offset >= end {
				return
			}
			ferr = f(r.Offset, r.Value)
			next = r.Offset + 1
		})
		if ferr != nil {
			return ferr
		}
	}
	return nil
}

// bigTxStatus reads the source's counters from the runtime's API.
func bigTxStatus(api string) (struct {
	Produced int64 `json:"records_produced"`
	Acked    int64 `json:"batches_acked"`
}, error) {
	var e struct {
		Counters struct {
			Produced int64 `json:"records_produced"`
			Acked    int64 `json:"batches_acked"`
		} `json:"counters"`
	}
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/sources/bigtx")
	if err != nil {
		return e.Counters, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return e.Counters, fmt.Errorf("GET /sources/bigtx: %s", resp.Status)
	}
	err = json.NewDecoder(resp.Body).Decode(&e)
	return e.Counters, err
}

func bigTxFreeAddr(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func bigTxTail(s string) string {
	if len(s) > 4000 {
		return "..." + s[len(s)-4000:]
	}
	return s
}
