package postgressource

import (
	"context"
	"errors"
	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"strings"
	"testing"
	"time"
)

// pollErr polls once and returns the error.
func pollErr(t *testing.T, s *Source) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := s.Poll(ctx)
	if err == nil {
		if len(b.Messages) > 0 {
			t.Fatalf("unexpected records %v", payloads(b))
		}
		ack(t, s)
	}
	return err
}

// TestPollFailsRatherThanLookingQuiet: a table dropped while a CDC source
// runs yields no changes and no error from the slot; the source must fail
// every Poll, naming the table, instead of returning empty batches that
// look healthy. A table taken out of the publication fails a Poll too
// (and is added back on the reconnect). Polling fails on a dropped table.
func TestPollFailsRatherThanLookingQuiet(t *testing.T) {
	forReaders(t, testPollFailsRatherThanLookingQuiet)
}

func testPollFailsRatherThanLookingQuiet(t *testing.T, reader string) {
	db := newDB(t)
	db.exec(`CREATE TABLE a (id int PRIMARY KEY); CREATE TABLE b (id int PRIMARY KEY)`)
	opt := db.cdcOptions("a", "b")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	s := open(t, opt, nil)
	if err := pollErr(t, s); err != nil {
		t.Fatal(err)
	}
	db.exec(`ALTER PUBLICATION ` + opt.Publication + ` DROP TABLE b`)
	if err := pollErr(t, s); err == nil || !strings.Contains(err.Error(), "public.b is no longer in publication") {
		t.Fatalf("table out of the publication: got %v", err)
	}
	if err := pollErr(t, s); err != nil {
		t.Fatalf("after the reconnect added it back: %v", err)
	}
	db.exec(`DROP TABLE b`)
	for i := 0; i < 3; i++ {
		if err := pollErr(t, s); err == nil || !strings.Contains(err.Error(), "public.b") {
			t.Fatalf("poll %d after the table was dropped: got %v", i, err)
		}
	}

	if reader == readerStream {
		return // polling once is enough
	}
	db.exec(`CREATE TABLE p (id int PRIMARY KEY); INSERT INTO p VALUES (1)`)
	popt := db.pollOptions("p")
	ps := open(t, popt, nil)
	next(t, ps)
	ack(t, ps)
	db.exec(`DROP TABLE p`)
	for i := 0; i < 2; i++ {
		if err := pollErr(t, ps); err == nil || !strings.Contains(err.Error(), "p") {
			t.Fatalf("polling, poll %d after the table was dropped: got %v", i, err)
		}
	}
}

// TestPermanentErrorsSayPermanent: a dropped table, once the source has
// reconnected, is an error no retry fixes; it says so to a runtime that
// does not know this package.
func TestPermanentErrorsSayPermanent(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE a (id int PRIMARY KEY)`)
	s := open(t, db.cdcOptions("a"), nil)
	db.exec(`DROP TABLE a`)
	var err error
	for i := 0; i < 3; i++ {
		err = pollErr(t, s)
	}
	var p interface{ Permanent() bool }
	if !errors.As(err, &p) || !p.Permanent() || !strings.Contains(err.Error(), "public.a does not exist") {
		t.Fatalf("got %v", err)
	}
}
