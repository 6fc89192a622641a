package main

import (
	"image"
	"image/png"
	"os"
	"path/filepath"
	"testing"
)

// chartRows is a small table like make bench's: throughput rows above and
// below the baseline, RSS rows, a label longer than the chart shows and an
// outlier past the clip.
var chartRows = []row{
	{Name: "config decode+validate (generated S3SinkConfig.Load)", BaseName: "santhosh-tekuri/jsonschema validate, same document", Unit: "ops/s", Ratio: 0.80},
	{Name: "source loop, random source (256 B JSON), in-memory broker", BaseName: "bare confluent-kafka-go producer", Unit: "rec/s", Ratio: 0.93},
	{Name: "S3 sink end to end, 1 KiB records", BaseName: "binding limit: raw PutObject / bytes written", Unit: "MB/s", Ratio: 0.68},
	{Name: "sink loop, no-op sink (100 B JSON)", BaseName: "bare confluent-kafka-go consumer", Unit: "rec/s", Ratio: 1.12},
	{Name: "S3 sink peak RSS, 16 open partitions", BaseName: "max_buffer_size (64 MiB) + no-op sink", Unit: "MiB", Ratio: 0.70},
	{Name: "S3 sink peak RSS, 256 open partitions", BaseName: "max_buffer_size (64 MiB) + no-op sink", Unit: "MiB", Ratio: 1.82},
	{Name: "postgres CDC peak RSS, 1M rows (cdc_reader stream)", BaseName: "batch_size (10000) x row size", Unit: "MiB", Ratio: 56.45},
	{Name: "fleet failover after SIGKILL, worst", BaseName: "fleet.session_timeout", Unit: "s", Ratio: 1.06},
}

// TestWriteChart renders the chart of a fixed table and checks that it is
// a PNG of chartSize with bars of both colours in it.
func TestWriteChart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "chart.png")
	if err := writeChart(path, chartRows); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	w, h := chartSize(len(chartRows))
	if got := img.Bounds(); got != image.Rect(0, 0, w, h) {
		t.Fatalf("chart is %v; want %dx%d", got, w, h)
	}
	var blue, orange int
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			switch img.At(x, y) {
			case chartBlue:
				blue++
			case chartOrange:
				orange++
			}
		}
	}
	if blue == 0 || orange == 0 {
		t.Fatalf("%d blue and %d orange pixels; want bars of both", blue, orange)
	}
}

func TestWriteChartNoRows(t *testing.T) {
	if err := writeChart(filepath.Join(t.TempDir(), "chart.png"), nil); err == nil {
		t.Fatal("a chart of no rows: no error")
	}
}
