package main

import (
	"fmt"
	"runtime"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
)

// icebergRows compares, on its own S3 server, broker and PostgreSQL (the
// SQL catalog), the S3 sink appending its Parquet files of 1 KiB records
// to an Iceberg table (table_format = "iceberg", commit_interval 10s) with
// the same sink writing plain Parquet files with the same columns (issue
// 31: at least 0.9), in interleaved rounds after a warm-up. Each round of
// the Iceberg sink writes a table of its own (a table holds the offsets
// it was written to, and a new one starts from the topic's start); the
// round's clock runs to the end of Close, whose last commit (a round is
// shorter than commit_interval: its only one) is in the time, while Open,
// which creates the table, is not.
func (b *bench) icebergRows() []row {
	const n, rounds = 400_000, 4
	dsn := b.pgDatabase("iceberg") // the SQL catalog's
	srv, br := b.hexBench("iceberg", "ice.hex", n)
	defer br.Close()
	c := comparison{group: "iceberg", prefix: "ice",
		common: map[string]any{"output_format": "parquet", "columns": hexColumns, "include_metadata": true, "max_file_size": "8MiB"},
		runs: []setting{
			{"parquet", nil},
			{"iceberg", map[string]any{"table_format": "iceberg", "iceberg_catalog": "sql", "iceberg_catalog_uri": dsn, "commit_interval": "10s"}},
		},
		each: func(cfg map[string]any, round int) {
			if cfg["table_format"] == "iceberg" {
				cfg["iceberg_table"] = fmt.Sprintf("bench.round%d", round+1)
			}
		},
		block: definition.Topics{Pattern: `ice\.hex`, Schema: "json", BatchLength: 10000, PollInterval: "100ms"},
		n:     n, rounds: rounds, rotate: true, warmup: true}
	res := b.interleave(srv, br.Addr(), c)
	// Each round's table was committed to after its creation (iceberg-go's
	// SQL catalog keeps the metadata file before the last commit), so the
	// row timed a sink that appended its files.
	var committed int
	b.must(pgtest.QueryRow(dsn, `SELECT count(*) FROM iceberg_tables WHERE table_namespace = 'bench' AND previous_metadata_location IS NOT NULL`, &committed))
	if committed != rounds {
		b.must(fmt.Errorf("iceberg: %d of the %d rounds' tables were committed to", committed, rounds))
	}
	plain, ice := res["parquet"], res["iceberg"]
	met, ceiling := ice.verdict(plain, 0.9)
	lo, hi := ice.ratioRange(plain)
	_, plainObjs := b.written(srv, "ice-parquet")
	_, iceObjs := b.written(srv, "ice-iceberg")
	return []row{{Name: "S3 sink, Iceberg table (SQL catalog, commit_interval 10s), Parquet+snappy, 1 KiB records", Value: ice.rate(), Unit: "rec/s",
		BaseName: "plain Parquet+snappy files, same columns", BaseValue: plain.rate(), BaseUnit: "rec/s", Ratio: ice.rate() / plain.rate(),
		Note: fmt.Sprintf("target >= 0.9 (issue 31): %s; CPU per record, this process (broker, consumer, sink) %.2f us against %.2f us (%+.1f%%), the S3 server %.2f us against %.2f us (PostgreSQL's not counted), so %d busy cores carry at most %.2f of the baseline's rate; %dk records x %d interleaved rounds (ratios %.2f to %.2f), a table each, its one commit at Close in the time; 4 columns + metadata, 8 MiB files, %d and %d objects per round (the table's metadata files included)",
			met, ice.selfUS(), plain.selfUS(), (ice.selfUS()/plain.selfUS()-1)*100, ice.serverUS(), plain.serverUS(),
			runtime.NumCPU(), ceiling, n/1000, rounds, lo, hi, iceObjs/rounds, plainObjs/rounds)}}
}
