package postgressource

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/servertest/pgtest"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

func TestCDCErrors(t *testing.T) {
	db := newDB(t)
	// Roles are cluster-wide: name this one after the database, so a second
	// run against the same server (go test -count=2) does not collide.
	bob := "bob_" + db.tag
	db.exec(`CREATE TABLE t (id int PRIMARY KEY); CREATE ROLE ` + bob + ` LOGIN; GRANT SELECT ON t TO ` + bob)

	t.Run("slot of another plugin", func(t *testing.T) {
		opt := db.cdcOptions("t")
		opt.ReplicationSlot = "other_" + db.tag
		db.exec(`SELECT pg_create_logical_replication_slot('` + opt.ReplicationSlot + `', 'test_decoding')`)
		_, err := openSource(opt, nil)
		if err == nil || !strings.Contains(err.Error(), `uses output plugin "test_decoding"; this source needs pgoutput`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no replication privilege", func(t *testing.T) {
		opt := db.cdcOptions("t")
		opt.ConnectionString = confkit.NewSecret(db.srv.DSNFor(bob, db.tag))
		_, err := openSource(opt, nil)
		if err == nil || !strings.Contains(err.Error(), `user "`+bob+`" lacks the REPLICATION privilege`) {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("no create_slot", func(t *testing.T) {
		opt := db.cdcOptions("t")
		opt.ReplicationSlot = "absent_" + db.tag
		opt.CreateSlot = false
		_, err := openSource(opt, nil)
		if err == nil || !strings.Contains(err.Error(), "does not exist and create_slot is false") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("slot in use", func(t *testing.T) {
		opt := db.cdcOptions("t")
		opt.ReplicationSlot = "busy_" + db.tag
		db.exec(`SELECT pg_create_logical_replication_slot('` + opt.ReplicationSlot + `', 'pgoutput')`)
		ctx := context.Background()
		repl, err := pgconn.Connect(ctx, db.dsn+"&replication=database")
		if err != nil {
			t.Fatal(err)
		}
		defer repl.Close(ctx)
		if err := pglogrepl.StartReplication(ctx, repl, opt.ReplicationSlot, 0, pglogrepl.StartReplicationOptions{
			PluginArgs: []string{"proto_version '1'", "publication_names '" + opt.Publication + "'"}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		s := open(t, opt, nil)
		_, err = s.Poll(ctx)
		if err == nil || !strings.Contains(err.Error(), "in use by another process") {
			t.Fatalf("got %v", err)
		}
	})
	for _, reader := range []string{readerPeek, readerStream} {
		t.Run("slot dropped "+reader, func(t *testing.T) {
			opt := db.cdcOptions("t")
			opt.CDCReader = postgressourceconfig.CDCReader(reader)
			opt.ReplicationSlot = "dropped_" + reader + "_" + db.tag
			s := open(t, opt, nil)
			db.exec(`INSERT INTO t VALUES (` + map[string]string{readerPeek: "1", readerStream: "2"}[reader] + `)`)
			next(t, s)
			ack(t, s)
			// The stream reader holds the slot: end its walsender first.
			sdktest.WaitFor(t, 15*time.Second, "the walsender to end", func() bool {
				db.exec(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '` + opt.ReplicationSlot + `' AND active_pid IS NOT NULL`)
				return db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = '`+opt.ReplicationSlot+`' AND active`) == "0"
			})
			db.exec(`SELECT pg_drop_replication_slot('` + opt.ReplicationSlot + `')`)
			var err error
			for range 3 { // the first poll may only see the ended connection
				if _, err = s.Poll(context.Background()); err != nil && strings.Contains(err.Error(), "dropped") {
					break
				}
			}
			if err == nil || !strings.Contains(err.Error(), "does not exist any more") && !strings.Contains(err.Error(), "was dropped") {
				t.Fatalf("poll after drop: %v", err)
			}
			_, err = openSource(opt, []byte(`{"v":1,"mode":"cdc","lsn":"0/1000000"}`))
			if err == nil || !strings.Contains(err.Error(), "was dropped after this source had delivered changes") {
				t.Fatalf("start after drop: %v", err)
			}
		})
	}
}

func TestWalLevelNotLogical(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own server")
	}
	srv := pgtest.Start(t)
	srv.Exec(t, `ALTER SYSTEM SET wal_level = replica`)
	srv.Restart(t)
	db := newDBOn(t, srv)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	_, err := openSource(db.cdcOptions("t"), nil)
	if err == nil || !strings.Contains(err.Error(), "wal_level = replica; CDC needs wal_level = logical") {
		t.Fatalf("got %v", err)
	}
}

// Postgres restarted mid-stream: the source reconnects by itself and every
// row arrives exactly once.
func TestPostgresRestartMidStream(t *testing.T) { forReaders(t, testPostgresRestartMidStream) }

func testPostgresRestartMidStream(t *testing.T, reader string) {
	if testing.Short() {
		t.Skip("starts its own server")
	}
	srv := pgtest.Start(t)
	db := newDBOn(t, srv)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	opt := db.cdcOptions("t")
	opt.CDCReader = postgressourceconfig.CDCReader(reader)
	opt.BatchSize = 50
	s := open(t, opt, nil)

	const n = 600
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // writer: retries through the outage
		defer wg.Done()
		for i := 1; i <= n; {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			conn, err := pgconn.Connect(ctx, db.dsn)
			if err != nil {
				cancel()
				time.Sleep(50 * time.Millisecond)
				continue
			}
			for ; i <= n; i++ {
				_, err = conn.Exec(ctx, fmt.Sprintf(`INSERT INTO t VALUES (%d) ON CONFLICT DO NOTHING`, i)).ReadAll()
				if err != nil {
					break
				}
				if i%5 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
			conn.Close(context.Background())
			cancel()
		}
	}()
	seen := map[string]int{}
	restarted := false
	errs := 0
	deadline := time.Now().Add(60 * time.Second)
	for len(seen) < n && time.Now().Before(deadline) {
		if !restarted && len(seen) > n/4 {
			// Restart while the source keeps polling, as under the runtime.
			restarted = true
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := srv.Stop(); err != nil {
					t.Error(err)
				}
				if err := srv.Start(); err != nil {
					t.Error(err)
				}
			}()
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		b, err := s.Poll(ctx)
		cancel()
		if err != nil {
			errs++
			if errs < 5 {
				t.Logf("poll error %d: %v", errs, err)
			}
			continue
		}
		for _, id := range ids(t, payloads(b)) {
			seen[id]++
		}
		ack(t, s)
	}
	wg.Wait()
	if !restarted || errs == 0 {
		t.Fatalf("restart not exercised (restarted %v, poll errors %d)", restarted, errs)
	}
	if len(seen) != n {
		t.Fatalf("got %d of %d rows", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("row %s delivered %d times", id, c)
		}
	}
}

// An idle stream answers the server's keepalives even with nothing new to
// confirm; otherwise the server ends it after wal_sender_timeout and the
// source reconnects (with a warning) every minute.
func TestIdleStreamAnswersKeepalives(t *testing.T) {
	if testing.Short() {
		t.Skip("starts its own server")
	}
	srv := pgtest.Start(t)
	srv.Exec(t, `ALTER SYSTEM SET wal_sender_timeout = '1s'`)
	srv.Exec(t, `SELECT pg_reload_conf()`)
	db := newDBOn(t, srv)
	db.exec(`CREATE TABLE t (id int PRIMARY KEY)`)
	opt := db.cdcOptions("t")
	opt.CDCReader = postgressourceconfig.CDCReaderStream
	s := open(t, opt, nil)
	db.exec(`INSERT INTO t VALUES (1)`)
	next(t, s)
	ack(t, s)
	conn := s.streamConn
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); {
		pollQuiet(t, s, 1) // a poll error is the server ending the stream
	}
	if s.streamConn != conn {
		t.Fatal("the idle stream was reconnected")
	}
}
