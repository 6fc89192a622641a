package postgressource

import (
	"context"
	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
)

// pollQuiet polls and acknowledges n empty batches (the captured table is
// quiet); a record fails the test.
func pollQuiet(t *testing.T, s *Source, n int) {
	t.Helper()
	for i := 0; i < n; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := s.Poll(ctx)
		cancel()
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		if len(b.Messages) > 0 {
			t.Fatalf("records from a quiet table: %s", payloads(b))
		}
		ack(t, s)
	}
}

// TestHeartbeat: with heartbeat_interval, heartbeat_query runs once per
// interval while the source polls, and the quiet slot is confirmed past the
// WAL a busy table of the same database writes meanwhile. Without
// heartbeat_interval the query never runs.
func TestHeartbeat(t *testing.T) {
	for _, reader := range []string{readerStream, readerPeek} {
		for _, on := range []bool{true, false} {
			name := reader + "/off"
			if on {
				name = reader + "/on"
			}
			t.Run(name, func(t *testing.T) {
				db := newDB(t)
				db.exec(`CREATE TABLE quiet (id int PRIMARY KEY); CREATE TABLE busy (id bigserial PRIMARY KEY, v text);
CREATE TABLE heartbeat (id int PRIMARY KEY, beats bigint); INSERT INTO heartbeat VALUES (1, 0)`)
				opt := db.cdcOptions("quiet")
				opt.CDCReader = postgressourceconfig.CDCReader(reader)
				opt.HeartbeatQuery = `UPDATE heartbeat SET beats = beats + 1 WHERE id = 1`
				if on {
					opt.HeartbeatInterval = 50 * time.Millisecond
				}
				s := open(t, opt, nil)
				pollQuiet(t, s, 1)

				ctx, cancel := context.WithCancel(context.Background())
				var wg sync.WaitGroup
				wg.Add(1)
				go func() {
					defer wg.Done()
					for ctx.Err() == nil {
						db.exec(`INSERT INTO busy (v) SELECT repeat('b', 200) FROM generate_series(1, 500)`)
					}
				}()
				time.Sleep(200 * time.Millisecond)
				mark, err := pglogrepl.ParseLSN(db.value(`SELECT pg_current_wal_flush_lsn()`))
				if err != nil {
					t.Fatal(err)
				}
				start := time.Now()
				var confirmed pglogrepl.LSN
				for time.Since(start) < 20*time.Second {
					pollQuiet(t, s, 5)
					confirmed, _ = pglogrepl.ParseLSN(db.value(`SELECT confirmed_flush_lsn FROM pg_replication_slots WHERE slot_name = '` + opt.ReplicationSlot + `'`))
					if confirmed > mark && (!on || time.Since(start) > 500*time.Millisecond) {
						break
					}
				}
				cancel()
				wg.Wait()
				if confirmed <= mark {
					t.Errorf("the quiet slot stayed at %s, behind %s written by the busy table", confirmed, mark)
				}
				if err := s.Health(); err != nil {
					t.Errorf("Health: %v", err)
				}
				beats, _ := strconv.Atoi(db.value(`SELECT beats FROM heartbeat`))
				switch {
				case on && beats < 3:
					t.Errorf("heartbeat_query ran %d times in %s at a 50ms heartbeat_interval", beats, time.Since(start).Round(time.Millisecond))
				case !on && beats != 0:
					t.Errorf("heartbeat_query ran %d times with heartbeat_interval = 0", beats)
				}
			})
		}
	}
}

// TestHeartbeatQueryFails: a failing heartbeat_query is reported by
// Health (so the status is Error) while records keep flowing.
func TestHeartbeatQueryFails(t *testing.T) {
	db := newDB(t)
	db.exec(`CREATE TABLE hbq (id int PRIMARY KEY)`)
	opt := db.cdcOptions("hbq")
	opt.CDCReader = readerStream
	opt.HeartbeatInterval = time.Millisecond
	opt.HeartbeatQuery = `UPDATE no_such_table SET x = 1`
	s := open(t, opt, nil)
	pollQuiet(t, s, 1)
	err := s.Health()
	if err == nil || !strings.Contains(err.Error(), "heartbeat_query failed") || !strings.Contains(err.Error(), "no_such_table") {
		t.Fatalf("Health = %v, want the failing heartbeat_query", err)
	}
	db.exec(`INSERT INTO hbq VALUES (1)`)
	if b := next(t, s); len(b.Messages) != 1 {
		t.Fatalf("%d records, want 1", len(b.Messages))
	}
	ack(t, s)
}
