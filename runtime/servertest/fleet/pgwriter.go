package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGWriter inserts rows (id, note) with increasing ids into a table in
// small transactions until Halt, reconnecting after errors.
type PGWriter struct {
	dsn, table string
	rows       int
	written    atomic.Int64 // highest id committed
	stop       chan struct{}
	wg         sync.WaitGroup
}

// StartPGWriter writes rows transactions of rows rows every pause.
func StartPGWriter(dsn, table string, rows int, pause time.Duration) *PGWriter {
	w := &PGWriter{dsn: dsn, table: table, rows: rows, stop: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		var conn *pgx.Conn
		defer func() {
			if conn != nil {
				conn.Close(context.Background())
			}
		}()
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(pause):
			}
			if conn == nil {
				c, err := pgx.Connect(context.Background(), w.dsn)
				if err != nil {
					continue
				}
				conn = c
			}
			from := w.written.Load() + 1
			to := from + int64(w.rows) - 1
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := conn.Exec(ctx, `INSERT INTO `+w.table+` SELECT g, 'row ' || g FROM generate_series($1::bigint, $2::bigint) g ON CONFLICT DO NOTHING`, from, to)
			cancel()
			if err != nil {
				conn.Close(context.Background())
				conn = nil
				continue
			}
			w.written.Store(to)
		}
	}()
	return w
}

// Written is the highest id committed so far.
func (w *PGWriter) Written() int64 { return w.written.Load() }

// Halt stops writing and returns Written.
func (w *PGWriter) Halt() int64 {
	select {
	case <-w.stop:
	default:
		close(w.stop)
	}
	w.wg.Wait()
	return w.written.Load()
}
