package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/freeport"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

const (
	pgRows  = 200_000
	pgBatch = 10_000
	pgPub   = "bench_pub"
	// pgRSSRows is how many rows the peak-RSS run captures.
	pgRSSRows = 1_000_000
)

// pgDefaultReader is the cdc_reader a definition without the key gets.
func pgDefaultReader() string {
	c, err := postgressourceconfig.Load(map[string]any{"connection_string": "postgres://x@127.0.0.1/x", "tables": []any{"t"}},
		"PICO_BENCH_UNUSED_", func(string) (string, bool) { return "", false })
	if err != nil {
		return "default"
	}
	return string(c.CDCReader)
}

// pgDatabase launches PostgreSQL 15, stopped when the bench ends, and
// returns the connection string of a new database name in it.
func (b *bench) pgDatabase(name string) string {
	srv, err := pgtest.New()
	if errors.Is(err, pgtest.ErrNoBinaries) {
		b.must(fmt.Errorf("%v", err))
	}
	b.must(err)
	b.cleanups.Add(srv.Close)
	b.must(pgtest.ExecDSN(srv.DSN(), "CREATE DATABASE "+name))
	return srv.DSNFor("postgres", name)
}

// startPG launches PostgreSQL 15 and creates the benchmark table: pgRows
// rows of about 200 bytes as JSON, written in transactions of 1,000 after
// the slot "pristine" was created, so every pass re-reads the same WAL
// from a copy of it.
func (b *bench) startPG() string {
	dsn := b.pgDatabase("bench")
	b.must(pgtest.ExecDSN(dsn, `CREATE TABLE ev (id bigint PRIMARY KEY, tenant text, amount numeric(12,2), created_at timestamptz, note text);
CREATE PUBLICATION `+pgPub+` FOR TABLE ev`))
	b.must(pgtest.ExecDSN(dsn, `SELECT pg_create_logical_replication_slot('pristine', 'pgoutput')`))
	for i := 0; i < pgRows; i += 1000 {
		b.must(pgtest.ExecDSN(dsn, fmt.Sprintf(`INSERT INTO ev SELECT g, 'tenant-' || (g %% 10), g * 1.25, '2024-01-01'::timestamptz + g * interval '1 second',
  repeat('x', 90) FROM generate_series(%d, %d) g`, i+1, i+1000)))
	}
	return dsn
}

// rawStream reads the WAL of slot over one replication connection
// (START_REPLICATION, pgoutput), parses every message with pglogrepl and
// confirms the position as it goes, until pgRows inserts; no records are
// built.
func rawStream(dsn, slot string) (time.Duration, error) {
	ctx, cancel := bounded(2 * time.Minute)
	defer cancel()
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return 0, err
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return 0, err
	}
	defer conn.Close(context.Background())
	t0 := time.Now()
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '1'", "publication_names '" + pgPub + "'"}})
	if err != nil {
		return 0, err
	}
	rows := 0
	var pos pglogrepl.LSN
	for rows < pgRows {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			return 0, fmt.Errorf("raw stream after %d rows: %w", rows, err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 {
			if e, ok := msg.(*pgproto3.ErrorResponse); ok {
				return 0, pgconn.ErrorResponseToPgError(e)
			}
			continue
		}
		reply := false
		switch cd.Data[0] {
		case pglogrepl.PrimaryKeepaliveMessageByteID:
			ka, err := pglogrepl.ParsePrimaryKeepaliveMessage(cd.Data[1:])
			if err != nil {
				return 0, err
			}
			reply = ka.ReplyRequested
		case pglogrepl.XLogDataByteID:
			x, err := pglogrepl.ParseXLogData(cd.Data[1:])
			if err != nil {
				return 0, err
			}
			m, err := pglogrepl.Parse(x.WALData)
			if err != nil {
				continue
			}
			switch m := m.(type) {
			case *pglogrepl.InsertMessage:
				rows++
			case *pglogrepl.CommitMessage:
				pos = m.TransactionEndLSN
				reply = rows%pgBatch == 0
			}
		}
		if reply {
			if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos}); err != nil {
				return 0, err
			}
		}
	}
	return time.Since(t0), nil
}

// dropSlot drops slot once no process holds it any more.
func dropSlot(dsn, slot string) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := pgtest.ExecDSN(dsn, `SELECT pg_drop_replication_slot('`+slot+`')`)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// rawSelect reads the table in pages by primary key, scanning every column.
func rawSelect(dsn string) (time.Duration, error) {
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	t0 := time.Now()
	var last int64
	for n := 0; n < pgRows; {
		rows, err := conn.Query(ctx, `SELECT id, tenant, amount, created_at, note FROM ev WHERE id > $1 ORDER BY id LIMIT $2`, last, pgBatch)
		if err != nil {
			return 0, err
		}
		for rows.Next() {
			v, err := rows.Values()
			if err != nil {
				rows.Close()
				return 0, err
			}
			last = v[0].(int64)
			n++
		}
		rows.Close()
		if rows.Err() != nil {
			return 0, rows.Err()
		}
	}
	return time.Since(t0), nil
}

// pgRows measures CDC (default reader) and polling into the embedded
// broker against the raw replication stream (or a raw paged SELECT) and a
// bare producer sending the records the source produced, over interleaved
// rounds, then the peak RSS of the runtime capturing pgRSSRows rows.
func (b *bench) pgRows() []row {
	dsn := b.startPG()
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	reader := pgDefaultReader()
	const rounds = 3
	var rawT, cdcT, cdcBareT, selT, pollT, pollBareT time.Duration
	for i := 0; i < rounds; i++ {
		slot := fmt.Sprintf("raw_%d", i)
		b.must(pgtest.ExecDSN(dsn, `SELECT pg_copy_logical_replication_slot('pristine', '`+slot+`')`))
		t, err := rawStream(dsn, slot)
		b.must(err)
		rawT += t
		b.must(dropSlot(dsn, slot))

		slot = fmt.Sprintf("src_%d", i)
		b.must(pgtest.ExecDSN(dsn, `SELECT pg_copy_logical_replication_slot('pristine', '`+slot+`')`))
		src, err := newSource("libpicomq_connector_postgres_source", map[string]any{
			"connection_string": dsn, "mode": "cdc", "tables": []any{"public.ev"}, "batch_size": int64(pgBatch),
			"replication_slot": slot, "publication": pgPub, "create_slot": false, "create_publication": false,
			"include_metadata": false, "poll_interval": "10ms",
		})
		b.must(err)
		rec := &recorder{Source: src}
		ct := b.runLoop(br, rec, fmt.Sprintf("pg.cdc.%d", i), pgBatch, pgRows)
		cdcT += ct
		b.must(dropSlot(dsn, slot))
		bt, err := bareProduce(br.Addr(), fmt.Sprintf("pg.cdcbare.%d", i), rec.msgs[:pgRows])
		b.must(err)
		cdcBareT += bt
		b.logf("pg: round %d: raw stream %.0f rows/s, CDC (%s)->broker %.0f rows/s, bare producer %.0f rows/s",
			i+1, pgRows/t.Seconds(), reader, pgRows/ct.Seconds(), pgRows/bt.Seconds())

		st, err := rawSelect(dsn)
		b.must(err)
		selT += st
		src, err = newSource("libpicomq_connector_postgres_source", map[string]any{
			"connection_string": dsn, "mode": "polling", "tables": []any{"public.ev"}, "batch_size": int64(pgBatch),
			"tracking_column": "id", "include_metadata": false, "poll_interval": "10ms",
		})
		b.must(err)
		rec = &recorder{Source: src}
		pt := b.runLoop(br, rec, fmt.Sprintf("pg.poll.%d", i), pgBatch, pgRows)
		pollT += pt
		bt, err = bareProduce(br.Addr(), fmt.Sprintf("pg.pollbare.%d", i), rec.msgs[:pgRows])
		b.must(err)
		pollBareT += bt
		b.logf("pg: round %d: raw SELECT %.0f rows/s, polling->broker %.0f rows/s, bare producer %.0f rows/s",
			i+1, pgRows/st.Seconds(), pgRows/pt.Seconds(), pgRows/bt.Seconds())
	}
	n := float64(rounds * pgRows)
	rate := func(d time.Duration) float64 { return n / d.Seconds() }
	note := fmt.Sprintf("%dk rows of ~200 B, batch_size %d, %d rounds", pgRows/1000, pgBatch, rounds)
	cdc := fmt.Sprintf("Postgres CDC into the broker (cdc_reader %s)", reader)
	return []row{
		{Name: cdc, Value: rate(cdcT), Unit: "rows/s", BaseName: "raw replication stream + pglogrepl parse, same WAL",
			BaseValue: rate(rawT), BaseUnit: "rows/s", Ratio: rate(cdcT) / rate(rawT), Note: note},
		{Name: cdc, Value: rate(cdcT), Unit: "rows/s", BaseName: "bare producer, same records",
			BaseValue: rate(cdcBareT), BaseUnit: "rows/s", Ratio: rate(cdcT) / rate(cdcBareT), Note: note},
		{Name: "Postgres polling into the broker", Value: rate(pollT), Unit: "rows/s", BaseName: "raw paged SELECT, same table",
			BaseValue: rate(selT), BaseUnit: "rows/s", Ratio: rate(pollT) / rate(selT), Note: note},
		{Name: "Postgres polling into the broker", Value: rate(pollT), Unit: "rows/s", BaseName: "bare producer, same records",
			BaseValue: rate(pollBareT), BaseUnit: "rows/s", Ratio: rate(pollT) / rate(pollBareT), Note: note},
		b.pgRSS(dsn, br, reader),
	}
}

// pgRSS runs the pico-connectors binary with a CDC source on an empty
// table, then inserts pgRSSRows rows of about 200 B in transactions of
// 10,000 as fast as PostgreSQL takes them, and reads the process's peak
// RSS (VmHWM) once every row is on the topic.
func (b *bench) pgRSS(dsn string, br *broker.Broker, reader string) row {
	b.must(pgtest.ExecDSN(dsn, `CREATE TABLE big (id bigint PRIMARY KEY, tenant text, amount numeric(12,2), created_at timestamptz, note text)`))
	bin, err := runtimebin.Compile()
	b.must(err)
	dir := b.tempDir("")
	b.must(os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	api, err := freeport.Addr()
	b.must(err)
	const topic = "pg.rss"
	b.must(os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(fmt.Sprintf(
		"[broker]\nbootstrap_servers = %q\n[http]\naddress = %q\n[state]\npath = \"state\"\n[log]\nlevel = \"warn\"\n", br.Addr(), api)), 0o644))
	b.must(os.WriteFile(filepath.Join(dir, "connectors", "rss.toml"), []byte(fleet.SourceDef("rss", "libpicomq_connector_postgres_source", topic, fmt.Sprintf(`connection_string = %q
mode = "cdc"
tables = ["public.big"]
batch_size = %d
poll_interval = "10ms"
replication_slot = "rss_slot"
publication = "rss_pub"
include_metadata = false
`, dsn, pgBatch))), 0o644))
	cmd := exec.Command(bin, "run", "--config", filepath.Join(dir, "runtime.toml"))
	out := &runtimebin.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	b.must(cmd.Start())
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	defer func() {
		select {
		case <-done:
		default:
			_ = cmd.Process.Kill()
			<-done
		}
	}()
	pid := cmd.Process.Pid
	wait := func(what string, limit time.Duration, cond func() bool) {
		deadline := time.Now().Add(limit)
		for !cond() {
			select {
			case <-done:
				b.must(fmt.Errorf("pico-connectors exited while waiting for %s: %s\n%s", what, cmd.ProcessState, out.String()))
			default:
			}
			if time.Now().After(deadline) {
				b.must(fmt.Errorf("pg rss: %s not within %s\n%s", what, limit, out.String()))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	wait("the slot", time.Minute, func() bool {
		return pgtest.ExecDSN(dsn, `DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_replication_slots WHERE slot_name = 'rss_slot') THEN RAISE 'no slot'; END IF; END $$`) == nil
	})
	time.Sleep(time.Second)
	idle, err := procstat.KiB(pid, "VmRSS")
	b.must(err)
	b.logf("pg rss: runtime idle at %.1f MiB; inserting %d rows", float64(idle)/1024, pgRSSRows)
	t0 := time.Now()
	for i := 0; i < pgRSSRows; i += 10_000 {
		b.must(pgtest.ExecDSN(dsn, fmt.Sprintf(`INSERT INTO big SELECT g, 'tenant-' || (g %% 10), g * 1.25, '2024-01-01'::timestamptz + g * interval '1 second',
  repeat('x', 90) FROM generate_series(%d, %d) g`, i+1, i+10_000)))
	}
	wait("every row on the topic", 5*time.Minute, func() bool { return br.HighWatermark(topic) >= pgRSSRows })
	took := time.Since(t0)
	peak, err := procstat.KiB(pid, "VmHWM")
	b.must(err)
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
	// The record size, from the first batch on the topic.
	recs, err := readSome(br.Addr(), topic, 1000)
	b.must(err)
	size := 0
	for _, v := range recs {
		size += len(v)
	}
	rowBytes := float64(size) / float64(max(1, len(recs)))
	budget := float64(pgBatch) * rowBytes / (1 << 20)
	b.logf("pg rss: %d rows in %s (%.0f rows/s): peak %.1f MiB, idle %.1f MiB, batch_size x row size %.1f MiB",
		pgRSSRows, took.Round(time.Millisecond), pgRSSRows/took.Seconds(), float64(peak)/1024, float64(idle)/1024, budget)
	return row{Name: fmt.Sprintf("Postgres CDC peak RSS, %dM rows (cdc_reader %s)", pgRSSRows/1_000_000, reader), Value: float64(peak) / 1024, Unit: "MiB",
		BaseName: fmt.Sprintf("batch_size (%d) x row size (%.0f B)", pgBatch, rowBytes), BaseValue: budget, BaseUnit: "MiB", Ratio: float64(peak) / 1024 / budget,
		Note: fmt.Sprintf("pico-connectors process VmHWM; %.0f MiB RSS before the first row; rows inserted in 10k-row transactions while it ran", float64(idle)/1024)}
}

// readSome reads up to n record values from the start of topic.
func readSome(addr, topic string, n int) ([][]byte, error) {
	ctx, cancel := bounded(30 * time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var out [][]byte
	for len(out) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return out, err
		}
		fs.EachRecord(func(r *kgo.Record) {
			if len(out) < n {
				out = append(out, r.Value)
			}
		})
	}
	return out, nil
}
