package s3sink_test

// Black-box proof of table_format = "iceberg" (issue 31): the real binary,
// a broker process, versitygw, PostgreSQL as the SQL catalog and kcat
// writing while the runtime is killed or the catalog is down. The verdict
// comes from the table: scanned with iceberg-go into Arrow, its snapshots'
// summaries, and the data files its manifests name read back with
// arrow-go's Parquet reader.

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// TestIcebergBlackbox builds the binary once and runs the scenarios on one
// bucket, broker and catalog database.
func TestIcebergBlackbox(t *testing.T) {
	kcat := needKcat(t)
	pg := pgtest.Start(t)
	srv := s3test.Start(t)
	bin := runtimebin.Build(t)
	env := &iceEnv{bbEnv: bbEnv{bin: bin, kcat: kcat, srv: srv, broker: startBroker(t)}, pg: pg, dsn: pg.CreateDatabase(t, "iceberg")}
	t.Run("SIGKILL", env.testKills)
	t.Run("CatalogDown", env.testCatalogDown)
	t.Run("Group", env.testGroup)
}

// iceEnv is bbEnv with the catalog.
type iceEnv struct {
	bbEnv
	pg  *pgtest.Server
	dsn string
}

// iceDef is a sink definition of an iceberg sink on topic, its table
// bb.KEY, with extra plugin_config lines.
func (e *iceEnv) iceDef(key, topic, extra string) string {
	return e.iceDefOn(key, fmt.Sprintf("topic = %q", topic), key+"-1", extra)
}

// iceDefOn is iceDef with its [[topics]] line and group.instance.id.
func (e *iceEnv) iceDefOn(key, topicLine, instance, extra string) string {
	return e.sinkDef(key, topicLine, instance, fmt.Sprintf(`output_format = "parquet"
columns = [{ name = "n", type = "int64" }, { name = "region", type = "string", optional = true }, { name = "pad", type = "string" }]
table_format = "iceberg"
iceberg_catalog = "sql"
iceberg_catalog_uri = %q
iceberg_table = "bb.%s"
commit_interval = "1s"
%s`, e.dsn, key, extra))
}

// table opens the sink's table as it is now.
func (e *iceEnv) table(t *testing.T, key string) *icetable.Table {
	t.Helper()
	cfg := icetable.Config{Catalog: "sql", URI: e.dsn, Table: "bb." + key, Warehouse: "s3://" + e.srv.Bucket + "/" + key,
		S3: icetable.S3Config{Endpoint: e.srv.Endpoint, Region: "us-east-1", AccessKeyID: e.srv.AccessKey, SecretAccessKey: e.srv.SecretKey, PathStyle: true}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tb, err := icetable.Open(ctx, cfg, nil, nil)
	if err != nil {
		t.Fatalf("opening table bb.%s: %v", key, err)
	}
	t.Cleanup(func() { tb.Close() })
	return tb
}

// tableOffset is the table's next offset of partition 0 of topic (-1: none).
func tableOffset(t *testing.T, tb *icetable.Table, topic string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	offs, _, err := tb.Offsets(ctx)
	if err != nil {
		t.Fatalf("reading the table's offsets: %v", err)
	}
	if n, ok := offs[icetable.TopicPartition{Topic: topic}]; ok {
		return n
	}
	return -1
}

// countParquet counts the Parquet objects under prefix (the table's
// metadata files are there too, under the default warehouse).
func (e *iceEnv) countParquet(t *testing.T, prefix string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	n := 0
	p := s3.NewListObjectsV2Paginator(e.srv.Client, &s3.ListObjectsV2Input{Bucket: aws.String(e.srv.Bucket), Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range page.Contents {
			if strings.HasSuffix(aws.ToString(o.Key), ".parquet") {
				n++
			}
		}
	}
	return n
}

// waitRunning waits until the sink's status is Running (it has opened).
func waitRunning(t *testing.T, r *runtimeProc, key string) {
	t.Helper()
	sdktest.Eventually(t, 60*time.Second, func() error {
		if !r.alive() {
			t.Fatalf("pico-connectors exited at start:\n%s", r.tail())
		}
		s, err := r.sink(key)
		if err == nil && s.Status != "Running" {
			err = fmt.Errorf("sink %s: status %s (%s)", key, s.Status, s.LastError)
		}
		return err
	})
}

// waitTable waits until the table holds every record of topic below
// least, while r runs.
func waitTable(t *testing.T, tb *icetable.Table, topic string, least int64, r *runtimeProc) {
	t.Helper()
	sdktest.Eventually(t, 120*time.Second, func() error {
		if !r.alive() {
			t.Fatalf("pico-connectors exited while the table caught up:\n%s", r.tail())
		}
		if n := tableOffset(t, tb, topic); n < least {
			return fmt.Errorf("the table's offset of %s is %d, want %d or more", topic, n, least)
		}
		return nil
	})
}

// testKills SIGKILLs a runtime with two iceberg sinks (one unpartitioned,
// one partitioned by region and day) 10 times while kcat writes, then
// checks the tables hold every offset exactly once, that the consumer
// group never ran ahead of the table, and that the snapshots' offsets
// never went backwards.
func (e *iceEnv) testKills(t *testing.T) {
	const topic = "ib.kill"
	sinks := map[string]string{
		"ibkill": `max_file_size = "24KiB"
`,
		"ibpart": `max_file_size = "16KiB"
iceberg_partition_by = ["identity(region)", "day(timestamp)"]
`,
	}
	defs := map[string]string{}
	for key, extra := range sinks {
		def := e.iceDef(key, topic, extra)
		if key == "ibpart" {
			def = strings.Replace(def, `path_template = "{topic}"`, `path_template = "{topic}/{yyyy}{MM}{dd}/{field:region}"`, 1)
		}
		defs[key+".toml"] = def
	}
	r := e.newRuntime(t, defs)
	adm := e.admin(t)
	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 31))
	const kills = 10
	t.Logf("seed %d: %d SIGKILLs, kcat writing ~2,500 records/s of 100 B to %s", seed, kills, topic)
	p := e.startProducer(t, topic, 100, 50, 20*time.Millisecond)
	// The first run opens the sinks, which create the tables.
	r.start()
	tables := map[string]*icetable.Table{}
	for key := range sinks {
		waitRunning(t, r, key)
		tables[key] = e.table(t, key)
	}
	for i := 0; i < kills; i++ {
		if !r.alive() {
			r.start()
		}
		time.Sleep(time.Duration(500+rng.IntN(3000)) * time.Millisecond)
		if !r.alive() {
			t.Fatalf("pico-connectors exited by itself before kill %d:\n%s", i+1, r.tail())
		}
		r.kill()
		p.check(t)
		var report []string
		for key := range sinks {
			c, err := committed(adm, key)
			if err != nil {
				t.Fatal(err)
			}
			in := tableOffset(t, tables[key], topic)
			if c[topic] > max(in, 0) {
				t.Errorf("kill %d: sink %s committed consumer offset %d but the table holds offsets below %d only: a commit ran ahead of the snapshot", i+1, key, c[topic], in)
			}
			report = append(report, fmt.Sprintf("%s committed %d, table %d", key, c[topic], in))
		}
		sort.Strings(report)
		t.Logf("SIGKILL %d/%d: %s", i+1, kills, strings.Join(report, "; "))
	}
	p.halt(t)
	end := ends(t, adm, topic)
	t.Logf("kcat stopped: %d records; restart, catch up, SIGTERM", end[topic])
	from := committedOf(t, adm, slices.Collect(maps.Keys(sinks)))
	r.start()
	for key := range sinks {
		caughtUp(t, r, key, from[key], end)
	}
	// The graceful stop uploads the open files and commits them.
	r.stop()
	for key := range sinks {
		if n := tableOffset(t, tables[key], topic); n != end[topic] {
			t.Errorf("after the graceful stop the table bb.%s holds %s up to %d, want %d", key, topic, n, end[topic])
		}
		wantCommitted(t, adm, key, end)
		e.auditTable(t, key, tables[key], map[string]int64{topic: end[topic]})
	}
}

// testCatalogDown stops PostgreSQL for 30 s (10 s with -short) under a
// running iceberg sink: uploads go on, the status goes Error with the
// catalog's error and the consumer offset stays at the last snapshot;
// once the catalog is back the status is Running, the next commit takes
// every file, and the table holds every record once.
func (e *iceEnv) testCatalogDown(t *testing.T) {
	const key, topic = "ibdown", "ib.down"
	outage := 30 * time.Second
	if testing.Short() {
		outage = 10 * time.Second
	}
	r := e.newRuntime(t, map[string]string{key + ".toml": e.iceDef(key, topic, `max_file_size = "16KiB"
`)})
	adm := e.admin(t)
	r.start()
	waitRunning(t, r, key)
	tb := e.table(t, key) // the sink's Open created it
	p := e.startProducer(t, topic, 100, 20, 20*time.Millisecond)
	sdktest.Eventually(t, 60*time.Second, func() error {
		if n := tableOffset(t, tb, topic); n <= 0 {
			return fmt.Errorf("no snapshot with records yet (offset %d)", n)
		}
		return nil
	})
	if err := e.pg.Stop(); err != nil {
		t.Fatal(err)
	}
	t.Logf("PostgreSQL stopped for %s", outage)
	before := e.countParquet(t, key)
	var sawError sinkEntry
	var committedDuring int64
	deadline := time.Now().Add(outage)
	for time.Now().Before(deadline) {
		if !r.alive() {
			t.Fatalf("pico-connectors exited during the catalog outage:\n%s", r.tail())
		}
		if s, err := r.sink(key); err == nil && s.Status == "Error" && sawError.Status == "" {
			sawError = s
		}
		time.Sleep(200 * time.Millisecond)
	}
	after := e.countParquet(t, key)
	if c, err := committed(adm, key); err == nil {
		committedDuring = c[topic]
	}
	if err := e.pg.Start(); err != nil {
		t.Fatal(err)
	}
	tb = e.table(t, key) // a fresh connection pool
	if held := tableOffset(t, tb, topic); committedDuring > held {
		t.Errorf("during the outage the consumer offset reached %d, beyond the table's %d", committedDuring, held)
	}
	switch {
	case sawError.Status == "":
		t.Errorf("status never went Error during a %s catalog outage", outage)
	case !strings.Contains(sawError.LastError, "iceberg") || strings.Contains(sawError.LastError, e.srv.SecretKey):
		t.Errorf("status Error, but last_error does not name the table commit (or leaks a secret): %q", sawError.LastError)
	default:
		t.Logf("status Error with last_error %.200q", sawError.LastError)
	}
	if after <= before {
		t.Errorf("uploads stopped while the catalog was down: %d objects before, %d after %s", before, after, outage)
	} else {
		t.Logf("uploads went on: %d objects before the outage, %d at its end", before, after)
	}
	sdktest.Eventually(t, 60*time.Second, func() error {
		s, err := r.sink(key)
		if err == nil && s.Status != "Running" {
			err = fmt.Errorf("status %s (%s)", s.Status, s.LastError)
		}
		return err
	})
	p.halt(t)
	end := ends(t, adm, topic)
	// Every file but the open one (16KiB, about 150 records) is committed
	// while the sink runs; the graceful stop uploads and commits that one.
	waitTable(t, tb, topic, end[topic]-300, r)
	r.stop()
	if n := tableOffset(t, tb, topic); n != end[topic] {
		t.Errorf("after the graceful stop the table holds %s up to %d, want %d", topic, n, end[topic])
	}
	wantCommitted(t, adm, key, end)
	e.auditTable(t, key, tb, end)
}

// testGroup runs two runtimes in one group over 8 topics into one table,
// kills one mid-stream and restarts it (runGroup): the table holds every
// record of every topic once.
func (e *iceEnv) testGroup(t *testing.T) {
	const key = "ibgrp"
	def := e.iceDefOn(key, `pattern = 'ib\.grp\..*'`, "", `file_rotation = "messages"
max_messages_per_file = 100
`)
	end := e.runGroup(t, key, "ib.grp.", def, 100)
	e.auditTable(t, key, e.table(t, key), end)
}
