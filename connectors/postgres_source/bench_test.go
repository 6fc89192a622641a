package postgressource

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pglogrepl"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

const benchRows = 100_000

// benchTable fills a table with benchRows rows of about 200 bytes as JSON
// (id, tenant, amount, created_at, note) in transactions of 1,000 rows,
// after creating slot pristine, whose WAL every iteration re-reads through
// a copy of the slot.
func benchTable(b *testing.B) (*testDB, postgressourceconfig.Config) {
	db := newDB(b)
	db.exec(`CREATE TABLE ev (id bigint PRIMARY KEY, tenant text, amount numeric(12,2), created_at timestamptz, note text)`)
	opt := db.cdcOptions("ev")
	opt.BatchSize = 10_000
	if v, err := strconv.Atoi(os.Getenv("PICO_BENCH_BATCH")); err == nil {
		opt.BatchSize = v
	}
	opt.ReplicationSlot = "pristine_" + db.tag
	s, err := openSource(opt, nil)
	if err != nil {
		b.Fatal(err)
	}
	s.Close(context.Background())
	for i := 0; i < benchRows; i += 1000 {
		db.exec(fmt.Sprintf(`INSERT INTO ev SELECT g, 'tenant-' || (g %% 10), g * 1.25, '2024-01-01'::timestamptz + g * interval '1 second',
  repeat('x', 90) FROM generate_series(%d, %d) g`, i+1, i+1000))
	}
	return db, opt
}

func copySlot(b *testing.B, db *testDB, from, to string) {
	db.exec(`SELECT pg_copy_logical_replication_slot('` + from + `', '` + to + `')`)
}

// BenchmarkCDC compares, on the same WAL and interleaved so that machine
// noise hits all alike, the raw rates of peeking and of streaming and
// parsing pgoutput (no records built) with the source's Poll + Ack for each
// reader (records built as JSON, slot advanced or confirmed after each
// batch).
func BenchmarkCDC(b *testing.B) {
	db, opt := benchTable(b)
	pristine := opt.ReplicationSlot
	var rawT, rawStreamT, srcT, streamT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		slot := fmt.Sprintf("raw_%s_%d", db.tag, i)
		copySlot(b, db, pristine, slot)
		rawT += rawPass(b, db, slot, opt)
		db.exec(`SELECT pg_drop_replication_slot('` + slot + `')`)
		slot = fmt.Sprintf("rawstream_%s_%d", db.tag, i)
		copySlot(b, db, pristine, slot)
		rawStreamT += rawStreamPass(b, db, slot, opt)
		sdktest.WaitFor(b, 15*time.Second, "the slot to be inactive", func() bool {
			return db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = '`+slot+`' AND active`) == "0"
		})
		db.exec(`SELECT pg_drop_replication_slot('` + slot + `')`)

		for _, reader := range []string{readerPeek, readerStream} {
			o := opt
			o.CDCReader = postgressourceconfig.CDCReader(reader)
			o.ReplicationSlot = fmt.Sprintf("src_%s_%s_%d", reader, db.tag, i)
			o.CreateSlot = false
			copySlot(b, db, pristine, o.ReplicationSlot)
			d := sourcePass(b, o)
			if reader == readerPeek {
				srcT += d
			} else {
				streamT += d
			}
			db.exec(`SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots WHERE slot_name = '` + o.ReplicationSlot + `' AND active_pid IS NOT NULL`)
			sdktest.WaitFor(b, 15*time.Second, "the slot to be inactive", func() bool {
				return db.value(`SELECT count(*) FROM pg_replication_slots WHERE slot_name = '`+o.ReplicationSlot+`' AND active`) == "0"
			})
			db.exec(`SELECT pg_drop_replication_slot('` + o.ReplicationSlot + `')`)
		}
	}
	n := float64(b.N * benchRows)
	b.ReportMetric(n/rawT.Seconds(), "raw-rows/s")
	b.ReportMetric(n/srcT.Seconds(), "source-rows/s")
	b.ReportMetric(n/streamT.Seconds(), "stream-rows/s")
	b.ReportMetric(n/rawStreamT.Seconds(), "raw-stream-rows/s")
	b.ReportMetric(rawT.Seconds()/srcT.Seconds(), "source/raw")
	b.ReportMetric(rawStreamT.Seconds()/streamT.Seconds(), "stream/raw-stream")
}

// rawStreamPass reads the benchmark WAL from slot over one replication
// connection (START_REPLICATION, pgoutput) and parses every message,
// confirming the position after each 10,000 rows; no records are built.
func rawStreamPass(b testing.TB, db *testDB, slot string, opt postgressourceconfig.Config) time.Duration {
	ctx := context.Background()
	cfg, err := pgconn.ParseConfig(db.dsn)
	if err != nil {
		b.Fatal(err)
	}
	cfg.RuntimeParams["replication"] = "database"
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(ctx)
	t0 := time.Now()
	err = pglogrepl.StartReplication(ctx, conn, slot, 0, pglogrepl.StartReplicationOptions{
		Mode: pglogrepl.LogicalReplication, PluginArgs: []string{"proto_version '1'", "publication_names '" + opt.Publication + "'"}})
	if err != nil {
		b.Fatal(err)
	}
	rows := 0
	var pos pglogrepl.LSN
	for rows < benchRows {
		msg, err := conn.ReceiveMessage(ctx)
		if err != nil {
			b.Fatal(err)
		}
		cd, ok := msg.(*pgproto3.CopyData)
		if !ok || len(cd.Data) == 0 || cd.Data[0] != pglogrepl.XLogDataByteID {
			continue
		}
		x, err := pglogrepl.ParseXLogData(cd.Data[1:])
		if err != nil {
			b.Fatal(err)
		}
		m, err := pglogrepl.Parse(x.WALData)
		if err != nil {
			continue
		}
		switch m := m.(type) {
		case *pglogrepl.InsertMessage:
			rows++
		case *pglogrepl.CommitMessage:
			pos = m.TransactionEndLSN
			if rows%10_000 == 0 {
				if err := pglogrepl.SendStandbyStatusUpdate(ctx, conn, pglogrepl.StandbyStatusUpdate{WALWritePosition: pos}); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	return time.Since(t0)
}

// sourcePass polls and acknowledges benchRows records, timed.
func sourcePass(b *testing.B, o postgressourceconfig.Config) time.Duration {
	s, err := openSource(o, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close(context.Background())
	t0 := time.Now()
	rows := 0
	for rows < benchRows {
		bt, err := s.Poll(context.Background())
		if err != nil {
			b.Fatal(err)
		}
		rows += len(bt.Messages)
		if err := s.OnBatchResult(context.Background(), 1); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(t0)
}

// BenchmarkPolling reads the same 100,000-row table by its primary key.
func BenchmarkPolling(b *testing.B) {
	db, _ := benchTable(b)
	opt := db.pollOptions("ev")
	opt.BatchSize = 10_000
	opt.PollInterval = time.Millisecond
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		s, err := openSource(opt, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		rows := 0
		for rows < benchRows {
			bt, err := s.Poll(context.Background())
			if err != nil {
				b.Fatal(err)
			}
			rows += len(bt.Messages)
			if err := s.OnBatchResult(context.Background(), 1); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		s.Close(context.Background())
		b.StartTimer()
	}
	b.ReportMetric(float64(b.N*benchRows)/b.Elapsed().Seconds(), "rows/s")
}

// BenchmarkPollingWindow reads the same 100,000 rows by id in polling
// mode, interleaved: from the table, with the visibility window, and from a
// view over it, which keeps the value cursor alone (polling before the
// window), and reports both rates and their ratio (window/value).
func BenchmarkPollingWindow(b *testing.B) {
	db, _ := benchTable(b)
	db.exec(`CREATE VIEW ev_v AS SELECT * FROM ev`)
	var window, value time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		order := []string{"ev", "ev_v"}
		if i%2 == 1 {
			order[0], order[1] = order[1], order[0] // neither always goes first
		}
		for _, table := range order {
			opt := db.pollOptions(table)
			opt.BatchSize = 10_000
			opt.PollInterval = time.Millisecond
			opt.TrackingColumn, opt.PrimaryKeyColumn = "id", "id"
			d := sourcePass(b, opt)
			if table == "ev" {
				window += d
			} else {
				value += d
			}
		}
	}
	n := float64(b.N * benchRows)
	b.ReportMetric(n/window.Seconds(), "window-rows/s")
	b.ReportMetric(n/value.Seconds(), "value-rows/s")
	b.ReportMetric(value.Seconds()/window.Seconds(), "window/value")
}

// rawPeek reads the whole benchmark WAL from slot: peek, parse, advance.
func rawPeek(b testing.TB, conn *pgconn.PgConn, slot string, opt postgressourceconfig.Config) {
	ctx := context.Background()
	rows := 0
	for rows < benchRows {
		rr := conn.ExecParams(ctx, `SELECT lsn, data FROM pg_logical_slot_peek_binary_changes($1, NULL, $2, 'proto_version', '1', 'publication_names', $3)`,
			[][]byte{[]byte(slot), []byte(strconv.Itoa(opt.BatchSize)), []byte(opt.Publication)}, nil, nil, []int16{1, 1})
		var end pglogrepl.LSN
		for rr.NextRow() {
			v := rr.Values()
			_ = binary.BigEndian.Uint64(v[0])
			m, err := pglogrepl.Parse(v[1])
			if err != nil {
				continue
			}
			switch m := m.(type) {
			case *pglogrepl.InsertMessage:
				rows++
			case *pglogrepl.CommitMessage:
				end = m.TransactionEndLSN
			}
		}
		if _, err := rr.Close(); err != nil {
			b.Fatal(err)
		}
		if _, err := conn.Exec(ctx, `SELECT pg_replication_slot_advance('`+slot+`', '`+end.String()+`')`).ReadAll(); err != nil {
			b.Fatal(err)
		}
	}
}

// rawPass is rawPeek on its own connection, timed.
func rawPass(b testing.TB, db *testDB, slot string, opt postgressourceconfig.Config) time.Duration {
	conn, err := pgconn.Connect(context.Background(), db.dsn)
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close(context.Background())
	t0 := time.Now()
	rawPeek(b, conn, slot, opt)
	return time.Since(t0)
}

// BenchmarkCDCSustained runs a writer inserting 200-byte rows in
// 1,000-row transactions as fast as it can for 30 s per reader, while the
// source polls and acknowledges; it reports the rows/s each reader
// delivered and how far behind it was at the end. Under a sustained load
// the peek reader pays for the WAL between the slot's restart_lsn and its
// position on every peek and advance; the stream reader does not.
func BenchmarkCDCSustained(b *testing.B) {
	const d = 30 * time.Second
	for _, reader := range []string{readerPeek, readerStream} {
		b.Run(reader, func(b *testing.B) {
			db := newDB(b)
			db.exec(`CREATE TABLE ev (id bigint PRIMARY KEY, tenant text, amount numeric(12,2), created_at timestamptz, note text)`)
			opt := db.cdcOptions("ev")
			opt.CDCReader = postgressourceconfig.CDCReader(reader)
			opt.BatchSize = 10_000
			s, err := openSource(opt, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close(context.Background())
			stop := make(chan struct{})
			written := make(chan int, 1)
			go func() {
				conn, err := pgconn.Connect(context.Background(), db.dsn)
				if err != nil {
					written <- 0
					return
				}
				defer conn.Close(context.Background())
				n := 0
				for {
					select {
					case <-stop:
						written <- n
						return
					default:
					}
					conn.Exec(context.Background(), fmt.Sprintf(`INSERT INTO ev SELECT g, 'tenant-' || (g %% 10), g * 1.25, '2024-01-01'::timestamptz + g * interval '1 second', repeat('x', 90) FROM generate_series(%d, %d) g`, n+1, n+1000)).ReadAll()
					n += 1000
				}
			}()
			b.ResetTimer()
			start := time.Now()
			rows := 0
			for time.Since(start) < d {
				bt, err := s.Poll(context.Background())
				if err != nil {
					b.Fatal(err)
				}
				rows += len(bt.Messages)
				s.OnBatchResult(context.Background(), 1)
			}
			close(stop)
			w := <-written
			b.ReportMetric(float64(rows)/time.Since(start).Seconds(), "delivered-rows/s")
			b.ReportMetric(float64(w)/time.Since(start).Seconds(), "written-rows/s")
			b.ReportMetric(float64(w-rows), "rows-behind")
		})
	}
}
