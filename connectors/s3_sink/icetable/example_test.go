package icetable_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
)

// A sink opens its table once, reads where each partition resumes, and
// commits the files it uploaded, with the offsets they take the table to.
func Example() {
	ctx := context.Background()
	cfg := icetable.Config{
		Catalog:   "sql",
		URI:       "postgres://pico:secret@db.example:5432/catalog",
		Warehouse: "s3://lake/warehouse",
		Table:     "sales.orders",
		S3:        icetable.S3Config{Region: "eu-west-1"},
	}
	cols := []icetable.Column{
		{Name: "offset", Type: "int64"},
		{Name: "timestamp", Type: "timestamp_ms"},
		{Name: "amount", Type: "decimal", Precision: 12, Scale: 2},
	}
	tbl, err := icetable.Open(ctx, cfg, cols, []icetable.PartitionField{{Source: "timestamp", Transform: "day"}})
	if err != nil {
		log.Fatal(err)
	}
	defer tbl.Close()

	tp := icetable.TopicPartition{Topic: "orders", Partition: 0}
	offsets, _, err := tbl.Offsets(ctx)
	if err != nil {
		log.Fatal(err)
	}
	at, ok := offsets[tp]
	if !ok {
		at = -1 // nothing committed yet: consume from the group's offset
	}
	// ... consume from at, upload s3://lake/orders/0/00000.parquet holding
	// offsets 0 to 99 of 2026-11-30 ...
	file := icetable.DataFile{
		Path: "s3://lake/orders/0/00000.parquet", Size: 81234, Records: 100, TP: tp, First: 0, Last: 99,
		Partition: map[string]any{"timestamp": time.Date(2026, 11, 30, 8, 0, 0, 0, time.UTC)},
	}
	res, err := tbl.Commit(ctx, []icetable.DataFile{file},
		map[icetable.TopicPartition]int64{tp: 100}, map[icetable.TopicPartition]int64{tp: at})
	if err != nil {
		log.Fatal(err)
	}
	if len(res.Dropped) > 0 {
		// Another writer moved these partitions: read Offsets again and
		// resume from there.
		fmt.Println("dropped", res.Dropped)
	}
	fmt.Println("snapshot", res.SnapshotID)
}
