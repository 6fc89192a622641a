package main

import (
	"encoding/json"
	"fmt"
	"runtime"

	"github.com/hamba/avro/v2"

	"github.com/picomq/pico-connectors/runtime/definition"
)

// formatResult is what the rounds of one setting measured.
type formatResult struct {
	rate   float64 // records/s
	perRec float64 // stored bytes per record
	cpuUS  float64 // CPU per record, this process and the S3 server
	objs   int     // objects per round
}

// s3FormatRows measures the S3 sink end to end on 1 KiB JSON records with
// random hex filler (so they compress about as well as typical event data,
// not 60:1), with metadata and 8 MiB files: gzip and zstd at the default
// compression_level against compression = "none", and Parquet (snappy, the
// default, and zstd) against json_lines, in interleaved rounds of one run.
// Each row prints the bytes stored per record, and the CPU per record of
// this process and the S3 server: on a machine whose cores are all busy,
// the ratio of the CPU per record is the ceiling of the ratio of rates.
func (b *bench) s3FormatRows() []row {
	// 120k records (123 MB) a round, three rounds: a round of 60k took
	// half a second, in which a neighbour's burst moved a ratio by 0.1.
	const n, rounds = 120_000, 3
	srv, br := b.hexBench("s3formats", "s3fmt.hex", n)
	defer br.Close()
	b.logf("s3formats: the same records as Avro binary to s3fmt.avro")
	b.must(fillHexAs(br.Addr(), "s3fmt.avro", n, 1024, hexAvro))
	runs := []setting{
		{"none", map[string]any{"compression": "none"}},
		{"gzip", map[string]any{"compression": "gzip"}},
		{"zstd", map[string]any{"compression": "zstd"}},
		{"parquet-snappy", map[string]any{"output_format": "parquet", "columns": hexColumns}},
		{"parquet-zstd", map[string]any{"output_format": "parquet", "parquet_compression": "zstd", "columns": hexColumns}},
		{"parquet-avro", map[string]any{"output_format": "parquet"}},
	}
	// parquet-avro reads the Avro topic, its columns from the Avro schema
	// (the same four as columns); the others the JSON one.
	got := b.interleave(srv, br.Addr(), comparison{group: "s3formats", prefix: "fmt",
		common: map[string]any{"max_file_size": "8MiB", "include_metadata": true}, runs: runs,
		blocks: map[string]definition.Topics{
			"parquet-avro": {Pattern: `s3fmt\.avro`, Schema: "avro", AvroSchemaJSON: hexAvroSchema, BatchLength: 10000, PollInterval: "100ms"},
		},
		block: definition.Topics{Pattern: `s3fmt\.hex`, Schema: "json", BatchLength: 10000, PollInterval: "100ms"},
		n:     n, rounds: rounds})
	res := map[string]formatResult{}
	for _, f := range runs {
		total, objs := b.written(srv, "fmt-"+f.name)
		t := got[f.name]
		res[f.name] = formatResult{
			rate:   t.rate(),
			perRec: float64(total) / float64(rounds*n),
			cpuUS:  t.selfUS() + t.serverUS(),
			objs:   objs / rounds,
		}
	}
	base := res["none"]
	var rows []row
	add := func(name, key, label, target string) {
		r := res[key]
		ratio := r.rate / base.rate
		// CPU-bound, the rates are at most in the inverse ratio of the CPU
		// per record.
		ceiling := base.cpuUS / r.cpuUS
		rows = append(rows,
			row{Name: name, Value: r.rate, Unit: "rec/s",
				BaseName: "json_lines, compression = none, same records", BaseValue: base.rate, BaseUnit: "rec/s", Ratio: ratio,
				Note: fmt.Sprintf("target %s; CPU per record (bench + S3 server): %.2f us against %.2f us, so %d busy cores carry at most %.2f of the baseline's rate; the sink's own overhead over none: %+.2f us; %dk records x %d interleaved rounds, %s, %d objects per round",
					target, r.cpuUS, base.cpuUS, runtime.NumCPU(), ceiling, r.cpuUS-base.cpuUS, n/1000, rounds, label, r.objs)},
			row{Name: name + ", stored bytes", Value: r.perRec, Unit: "B/rec",
				BaseName: "json_lines, compression = none", BaseValue: base.perRec, BaseUnit: "B/rec", Ratio: r.perRec / base.perRec,
				Note: fmt.Sprintf("%.2f:1 against json_lines; random hex filler (4 bits of entropy per character)", base.perRec/r.perRec)})
	}
	add("S3 sink, compression = zstd, 1 KiB records", "zstd", "compression_level = fastest (the default), json_lines+metadata", ">= 0.85")
	add("S3 sink, compression = gzip, 1 KiB records", "gzip", "compression_level = fastest (the default), json_lines+metadata", ">= 0.55")
	add("S3 sink, Parquet+snappy (the default), 1 KiB JSON records", "parquet-snappy", "4 columns + metadata, encoded by the upload workers", ">= 0.8")
	add("S3 sink, Parquet+zstd, 1 KiB JSON records", "parquet-zstd", "4 columns + metadata, compression_level = fastest", ">= 0.75")
	// Parquet from Avro against Parquet from JSON with the same columns.
	base = res["parquet-snappy"]
	r := res["parquet-avro"]
	rows = append(rows, row{Name: "S3 sink, Parquet+snappy from an Avro topic, 1 KiB records", Value: r.rate, Unit: "rec/s",
		BaseName: "Parquet+snappy from JSON, same columns", BaseValue: base.rate, BaseUnit: "rec/s", Ratio: r.rate / base.rate,
		Note: fmt.Sprintf("target >= 1.0 (no JSON walk); CPU per record (bench + S3 server): %.2f us against %.2f us, so %d busy cores carry at most %.2f of the baseline's rate; %.0f B/rec stored against %.0f; columns from the Avro schema + metadata; %dk records x %d interleaved rounds, %d objects per round",
			r.cpuUS, base.cpuUS, runtime.NumCPU(), base.cpuUS/r.cpuUS, r.perRec, base.perRec, n/1000, rounds, r.objs)})
	return rows
}

// hexColumns are the Parquet columns of fillHex's records (region left
// out).
var hexColumns = []any{
	map[string]any{"name": "id", "type": "int64"},
	map[string]any{"name": "event", "type": "string"},
	map[string]any{"name": "user", "type": "string"},
	map[string]any{"name": "pad", "type": "string"},
}

// hexAvroSchema is the Avro schema of fillHex's records.
const hexAvroSchema = `{"type": "record", "name": "Event", "fields": [{"name": "id", "type": "long"},
	{"name": "event", "type": "string"}, {"name": "user", "type": "string"}, {"name": "pad", "type": "string"}]}`

// hexAvro turns one of fillHex's JSON records into Avro binary.
func hexAvro(js []byte) ([]byte, error) {
	var v struct {
		ID    int64  `avro:"id" json:"id"`
		Event string `avro:"event" json:"event"`
		User  string `avro:"user" json:"user"`
		Pad   string `avro:"pad" json:"pad"`
	}
	if err := json.Unmarshal(js, &v); err != nil {
		return nil, err
	}
	return avro.Marshal(hexAvroParsed, v)
}

var hexAvroParsed = avro.MustParse(hexAvroSchema)
