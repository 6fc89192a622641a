package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
)

const (
	pgRows  = 100_000
	pgBatch = 10_000
	pgPub   = "bench_pub"
)

// pgExec runs SQL on dsn.
func pgExec(dsn, sql string) error {
	ctx, cancel := bounded(2 * time.Minute)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql).ReadAll()
	if err != nil {
		return fmt.Errorf("%w\nin: %s", err, sql)
	}
	return nil
}

// startPG launches PostgreSQL 15 and creates the benchmark table: pgRows
// rows of about 200 bytes as JSON, written in transactions of 1,000 after
// the slot "pristine" was created, so every pass re-reads the same WAL
// from a copy of it.
func (b *bench) startPG() string {
	srv, err := pgtest.Launch()
	if errors.Is(err, pgtest.ErrNoBinaries) {
		b.must(fmt.Errorf("%v", err))
	}
	b.must(err)
	b.h.Cleanup(srv.Close)
	b.must(pgExec(srv.DSN(), "CREATE DATABASE bench"))
	dsn := srv.DSNFor("postgres", "bench")
	b.must(pgExec(dsn, `CREATE TABLE ev (id bigint PRIMARY KEY, tenant text, amount numeric(12,2), created_at timestamptz, note text);
CREATE PUBLICATION `+pgPub+` FOR TABLE ev`))
	b.must(pgExec(dsn, `SELECT pg_create_logical_replication_slot('pristine', 'pgoutput')`))
	for i := 0; i < pgRows; i += 1000 {
		b.must(pgExec(dsn, fmt.Sprintf(`INSERT INTO ev SELECT g, 'tenant-' || (g %% 10), g * 1.25, '2024-01-01'::timestamptz + g * interval '1 second',
  repeat('x', 90) FROM generate_series(%d, %d) g`, i+1, i+1000)))
	}
	return dsn
}

// rawPeek reads the whole WAL of slot: peek, parse with pglogrepl, advance;
// no records are built.
func rawPeek(dsn, slot string) (time.Duration, error) {
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, dsn)
	if err != nil {
		return 0, err
	}
	defer conn.Close(ctx)
	t0 := time.Now()
	rows := 0
	for rows < pgRows {
		rr := conn.ExecParams(ctx, `SELECT lsn, data FROM pg_logical_slot_peek_binary_changes($1, NULL, $2, 'proto_version', '1', 'publication_names', $3)`,
			[][]byte{[]byte(slot), []byte(strconv.Itoa(pgBatch)), []byte(pgPub)}, nil, nil, []int16{1, 1})
		var end pglogrepl.LSN
		for rr.NextRow() {
			v := rr.Values()
			_ = binary.BigEndian.Uint64(v[0])
			m, err := pglogrepl.Parse(v[1])
			if err != nil {
				continue
			}
			switch m := m.(type) {
			case *pglogrepl.InsertMessage:
				rows++
			case *pglogrepl.CommitMessage:
				end = m.TransactionEndLSN
			}
		}
		if _, err := rr.Close(); err != nil {
			return 0, err
		}
		if _, err := conn.Exec(ctx, `SELECT pg_replication_slot_advance('`+slot+`', '`+end.String()+`')`).ReadAll(); err != nil {
			return 0, err
		}
	}
	return time.Since(t0), nil
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

// pgRows measures CDC and polling into the embedded broker against raw
// peek-and-parse (or a raw paged SELECT) and a bare producer sending the
// records the source produced, over interleaved rounds.
func (b *bench) pgRows() []row {
	dsn := b.startPG()
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	const rounds = 3
	var rawT, cdcT, cdcBareT, selT, pollT, pollBareT time.Duration
	for i := 0; i < rounds; i++ {
		slot := fmt.Sprintf("raw_%d", i)
		b.must(pgExec(dsn, `SELECT pg_copy_logical_replication_slot('pristine', '`+slot+`')`))
		t, err := rawPeek(dsn, slot)
		b.must(err)
		rawT += t
		b.must(pgExec(dsn, `SELECT pg_drop_replication_slot('`+slot+`')`))

		slot = fmt.Sprintf("src_%d", i)
		b.must(pgExec(dsn, `SELECT pg_copy_logical_replication_slot('pristine', '`+slot+`')`))
		src, err := newSource("libpicomq_connector_postgres_source", map[string]any{
			"connection_string": dsn, "mode": "cdc", "tables": []any{"public.ev"}, "batch_size": int64(pgBatch),
			"replication_slot": slot, "publication": pgPub, "create_slot": false, "create_publication": false,
			"include_metadata": false, "poll_interval": "10ms",
		}, nil)
		b.must(err)
		rec := &recorder{Source: src}
		ct := b.runLoop(br, rec, fmt.Sprintf("pg.cdc.%d", i), pgBatch, pgRows)
		cdcT += ct
		b.must(pgExec(dsn, `SELECT pg_drop_replication_slot('`+slot+`')`))
		bt, err := bareProduce(br.Addr(), fmt.Sprintf("pg.cdcbare.%d", i), rec.msgs[:pgRows])
		b.must(err)
		cdcBareT += bt
		b.logf("pg: round %d: raw peek %.0f rows/s, CDC->broker %.0f rows/s, bare producer %.0f rows/s",
			i+1, pgRows/t.Seconds(), pgRows/ct.Seconds(), pgRows/bt.Seconds())

		st, err := rawSelect(dsn)
		b.must(err)
		selT += st
		src, err = newSource("libpicomq_connector_postgres_source", map[string]any{
			"connection_string": dsn, "mode": "polling", "tables": []any{"public.ev"}, "batch_size": int64(pgBatch),
			"tracking_column": "id", "include_metadata": false, "poll_interval": "10ms",
		}, nil)
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
	return []row{
		{Name: "Postgres CDC into the broker", Value: rate(cdcT), Unit: "rows/s", BaseName: "raw peek + pglogrepl parse, same WAL",
			BaseValue: rate(rawT), BaseUnit: "rows/s", Ratio: rate(cdcT) / rate(rawT), Note: note},
		{Name: "Postgres CDC into the broker", Value: rate(cdcT), Unit: "rows/s", BaseName: "bare producer, same records",
			BaseValue: rate(cdcBareT), BaseUnit: "rows/s", Ratio: rate(cdcT) / rate(cdcBareT), Note: note},
		{Name: "Postgres polling into the broker", Value: rate(pollT), Unit: "rows/s", BaseName: "raw paged SELECT, same table",
			BaseValue: rate(selT), BaseUnit: "rows/s", Ratio: rate(pollT) / rate(selT), Note: note},
		{Name: "Postgres polling into the broker", Value: rate(pollT), Unit: "rows/s", BaseName: "bare producer, same records",
			BaseValue: rate(pollBareT), BaseUnit: "rows/s", Ratio: rate(pollT) / rate(pollBareT), Note: note},
	}
}
