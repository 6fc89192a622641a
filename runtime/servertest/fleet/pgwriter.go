package fleet

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
)

// PGWriter inserts rows (id, note) with increasing ids into a table in
// small transactions until Halt, reconnecting after errors (such as a
// restarted server).
type PGWriter struct {
	dsn, table string
	pad, rows  int
	written    atomic.Int64 // highest id committed
	errs       atomic.Int64 // failed connects and inserts
	stop       chan struct{}
	wg         sync.WaitGroup
}

// StartPGWriter writes transactions of rows rows every pause.
func StartPGWriter(dsn, table string, rows int, pause time.Duration) *PGWriter {
	return StartPaddedPGWriter(dsn, table, 0, rows, pause)
}

// StartPaddedPGWriter is StartPGWriter with pad filler characters at the
// end of each row's note, for rows of a given size.
func StartPaddedPGWriter(dsn, table string, pad, rows int, pause time.Duration) *PGWriter {
	w := &PGWriter{dsn: dsn, table: table, pad: pad, rows: rows, stop: make(chan struct{})}
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
					w.errs.Add(1)
					continue
				}
				conn = c
			}
			from := w.written.Load() + 1
			to := from + int64(w.rows) - 1
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := conn.Exec(ctx, `INSERT INTO `+w.table+` SELECT g, 'row ' || g || repeat('.', $3) FROM generate_series($1::bigint, $2::bigint) g ON CONFLICT DO NOTHING`, from, to, w.pad)
			cancel()
			if err != nil {
				w.errs.Add(1)
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

// Errors counts the failed connects and inserts so far: each is followed
// by a reconnect.
func (w *PGWriter) Errors() int64 { return w.errs.Load() }

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
