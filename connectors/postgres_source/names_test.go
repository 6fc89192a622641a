package postgressource

import (
	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"testing"
)

// Quoted, mixed-case and spaced names work in every mode.
func TestQuotedNames(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE SCHEMA "Sales"; CREATE TABLE "Sales"."Order Items" ("Id" int PRIMARY KEY, "Qty" int, "we""ird" text)`)
	table := `"Sales"."Order Items"`
	for _, reader := range []string{readerPeek, readerStream} {
		opt := db.cdcOptions(table)
		opt.CDCReader = postgressourceconfig.CDCReader(reader)
		opt.ReplicationSlot += "_" + reader
		opt.Publication += "_" + reader
		opt.IncludeMetadata = true
		s := open(t, opt, nil)
		db.exec(`INSERT INTO "Sales"."Order Items" VALUES (1, 2, 'x')`)
		b := next(t, s)
		ack(t, s)
		want := `{"Id":1,"Qty":2,"we\"ird":"x","__op":"insert","__table":"Sales.Order Items"`
		if got := string(b.Messages[len(b.Messages)-1].Payload); len(got) < len(want) || got[:len(want)] != want {
			t.Errorf("%s: %s", reader, got)
		}
		if got := string(b.Messages[0].Key); got != `{"Id":1}` {
			t.Errorf("%s key %s", reader, got)
		}
		db.exec(`DELETE FROM "Sales"."Order Items"`)
		next(t, s)
		ack(t, s)
	}
	db.exec(`INSERT INTO "Sales"."Order Items" VALUES (5, 1, 'y')`)
	opt := db.pollOptions(table)
	opt.ProcessedColumn = ""
	s := open(t, opt, nil)
	if got := payloads(next(t, s)); len(got) != 1 || got[0] != `{"Id":5,"Qty":1,"we\"ird":"y","__op":"read"}` {
		t.Errorf("polling: %v", got)
	}
}
