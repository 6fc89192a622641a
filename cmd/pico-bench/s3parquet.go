package main

import (
	"fmt"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
)

// s3ParquetRows measures the S3 sink end to end on 1 KiB JSON records
// written as Parquet with zstd against json_lines, in interleaved rounds of
// the same run: records/s, and the bytes stored per record of each.
func (b *bench) s3ParquetRows() []row {
	srv := b.startS3()
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	const n, rounds = 60_000, 2
	b.logf("s3parquet: writing %d records of 1 KiB with random hex filler to s3pq.hex", n)
	b.must(fillHex(br.Addr(), "s3pq.hex", n, 1024))
	columns := []any{
		map[string]any{"name": "id", "type": "int64"},
		map[string]any{"name": "event", "type": "string"},
		map[string]any{"name": "user", "type": "string"},
		map[string]any{"name": "pad", "type": "string"},
	}
	formats := []struct {
		name string
		cfg  map[string]any
	}{
		{"json_lines", map[string]any{"output_format": "json_lines"}},
		{"parquet", map[string]any{"output_format": "parquet", "parquet_compression": "zstd", "columns": columns}},
	}
	took := map[string]time.Duration{}
	timed := map[string]int{}
	for i := 0; i < rounds; i++ {
		for _, f := range formats {
			cfg := map[string]any{"prefix": fmt.Sprintf("pq-%s/%d", f.name, i), "max_file_size": "8MiB", "include_metadata": true}
			for k, v := range f.cfg {
				cfg[k] = v
			}
			sink, err := newS3Sink(targetOf(srv), cfg)
			b.must(err)
			k, t := b.sinkRun(br.Addr(), sink, `s3pq\.hex`, n, 10000)
			took[f.name] += t
			timed[f.name] += k
			b.logf("s3parquet: round %d: %s %.0f rec/s", i+1, f.name, float64(k)/t.Seconds())
		}
	}
	rate := map[string]float64{}
	per := map[string]float64{}
	objects := map[string]int{}
	for _, f := range formats {
		rate[f.name] = float64(timed[f.name]) / took[f.name].Seconds()
		total, objs := b.written(srv, "pq-"+f.name)
		per[f.name] = float64(total) / float64(rounds*n)
		objects[f.name] = objs / rounds
	}
	return []row{
		{Name: "S3 sink, Parquet+zstd, 1 KiB JSON records", Value: rate["parquet"], Unit: "rec/s",
			BaseName: "json_lines, same records", BaseValue: rate["json_lines"], BaseUnit: "rec/s", Ratio: rate["parquet"] / rate["json_lines"],
			Note: fmt.Sprintf("%dk records x %d interleaved rounds, 4 columns + metadata, max_file_size 8MiB: %d parquet objects, %d json_lines per round",
				n/1000, rounds, objects["parquet"], objects["json_lines"])},
		{Name: "S3 sink, Parquet+zstd, stored bytes", Value: per["parquet"], Unit: "B/rec",
			BaseName: "json_lines, same records", BaseValue: per["json_lines"], BaseUnit: "B/rec", Ratio: per["parquet"] / per["json_lines"],
			Note: fmt.Sprintf("random hex filler (4 bits of entropy per character); %.1f:1 against json_lines", per["json_lines"]/per["parquet"])},
	}
}
