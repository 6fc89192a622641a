package postgressource

import (
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
)

// TestPublicationKeepsApplicationWrites: a publication that publishes
// updates and deletes makes PostgreSQL refuse every UPDATE and DELETE on a
// table without a replica identity. The source refuses to create one
// (saying what to run) and leaves the table writable; with inserts only,
// or REPLICA IDENTITY FULL, it starts and the application's writes work.
func TestPublicationKeepsApplicationWrites(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE nokey (v int); CREATE TABLE nothing (id int PRIMARY KEY, v int);
ALTER TABLE nothing REPLICA IDENTITY NOTHING; CREATE TABLE full_nokey (v int); ALTER TABLE full_nokey REPLICA IDENTITY FULL;
INSERT INTO nokey VALUES (1); INSERT INTO nothing VALUES (1, 1); INSERT INTO full_nokey VALUES (1)`)
	writes := func(table string) {
		t.Helper()
		db.exec(`UPDATE ` + table + ` SET v = v + 1; DELETE FROM ` + table + ` WHERE v < 0`)
	}
	for _, table := range []string{"nokey", "nothing"} {
		opt := db.cdcOptions(table)
		opt.Publication = "pub_" + table + "_" + db.tag
		opt.ReplicationSlot = "slot_" + table + "_" + db.tag
		_, err := openSource(opt, nil)
		if err == nil || !strings.Contains(err.Error(), "ALTER TABLE \"public\".\""+table+"\" REPLICA IDENTITY FULL") ||
			!strings.Contains(err.Error(), `capture_operations = ["insert"]`) {
			t.Fatalf("%s: got %v", table, err)
		}
		writes(table)
		if n := db.value(`SELECT count(*) FROM pg_publication WHERE pubname = '` + opt.Publication + `'`); n != "0" {
			t.Fatalf("%s: the publication was created", table)
		}
	}
	// Inserts only: the publication publishes inserts only.
	opt := db.cdcOptions("nokey")
	opt.CaptureOperations = []string{"insert"}
	s := open(t, opt, nil)
	writes("nokey")
	db.exec(`INSERT INTO nokey VALUES (7)`)
	if got := payloads(next(t, s)); len(got) != 1 || !strings.HasPrefix(got[0], `{"v":7,"__op":"insert"`) {
		t.Fatalf("got %v", got)
	}
	// Adding a table to an existing publication is checked too.
	opt2 := db.cdcOptions("full_nokey", "nothing")
	opt2.Publication = "pub2_" + db.tag
	opt2.ReplicationSlot = "slot2_" + db.tag
	db.exec(`CREATE PUBLICATION ` + opt2.Publication + ` FOR TABLE full_nokey`)
	if _, err := openSource(opt2, nil); err == nil || !strings.Contains(err.Error(), "REPLICA IDENTITY NOTHING") {
		t.Fatalf("adding a table: got %v", err)
	}
	writes("nothing")
	opt2.Tables = []string{"full_nokey"}
	open(t, opt2, nil)
	writes("full_nokey")
}

// TestPublicationNameQuoted: a publication name holding a single and a
// double quote reaches pgoutput whole with either reader. START_REPLICATION
// takes publication_names as a string literal: the name was quoted as an
// identifier but its single quote ended the literal (a syntax error, or
// another option after it).
func TestPublicationNameQuoted(t *testing.T) {
	forReaders(t, func(t *testing.T, reader string) {
		db := newDB(t)
		db.exec(`CREATE TABLE q (id int PRIMARY KEY, v text)`)
		opt := db.cdcOptions("q")
		opt.CDCReader = postgressourceconfig.CDCReader(reader)
		opt.Publication = `pub'x"` + db.tag
		s := open(t, opt, nil)
		db.exec(`INSERT INTO q VALUES (1, 'a')`)
		if got := payloads(next(t, s)); len(got) != 1 || !strings.HasPrefix(got[0], `{"id":1,"v":"a"`) {
			t.Fatalf("got %v", got)
		}
	})
}
