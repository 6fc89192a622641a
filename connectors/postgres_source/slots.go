package postgressource

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// The slot watch (CDC): a goroutine of its own, on a connection of its own,
// reads the slot's retained WAL every slot_check_interval for as long as the
// source is open (from New to Close), whether or not the runtime polls.
//
//   - The figure goes to the postgres_source_retained_wal_bytes gauge.
//   - Above max_retained_wal it logs a warning naming the slot and the
//     figure, and Health reports it, so the source loop sets status Error
//     while Poll goes on reading (a source that is behind must be able to
//     catch up); below it again, Health clears.
//   - An invalidated slot (wal_status = lost) is permanent: Poll returns an
//     error that names the slot and says how to start over.
//
// A source that is disabled, deleted, or stopped by errors is not open, so
// nothing reads its slot and nothing watches it: the slot stays and keeps
// its WAL. `pico-connectors admin --config FILE KEY slots` lists it.

// slotWatch is the state of the watch and of the heartbeat.
type slotWatch struct {
	cancel   context.CancelFunc // ends the watch, and a check under way
	done     chan struct{}
	retained sdk.Gauge

	mu        sync.Mutex
	over      error // retained WAL above max_retained_wal
	lost      bool  // the slot was invalidated (permanent)
	beatErr   error // the last heartbeat_query failed
	warnedRes bool  // wal_status = unreserved was logged

	lastBeat time.Time // Poll goroutine only
}

// slotRow is one row of pg_replication_slots.
type slotRow struct {
	Name      string
	Active    bool
	PID       string
	WALStatus string
	Retained  int64 // bytes of WAL from restart_lsn to the current position; -1 unknown
	Confirmed string
}

// slotQuery lists the logical slots of the current database named $1 or
// starting with picomq_ (the default names of this source).
const slotQuery = `SELECT slot_name, active, coalesce(active_pid::text, ''), coalesce(wal_status, ''),
  coalesce((pg_current_wal_lsn() - restart_lsn)::bigint, -1), coalesce(confirmed_flush_lsn::text, '')
FROM pg_catalog.pg_replication_slots
WHERE slot_type = 'logical' AND database = current_database() AND (slot_name = $1 OR slot_name LIKE 'picomq\_%')
ORDER BY slot_name`

func listSlots(ctx context.Context, conn *pgconn.PgConn, slot string) ([]slotRow, error) {
	res := conn.ExecParams(ctx, slotQuery, [][]byte{[]byte(slot)}, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	out := make([]slotRow, 0, len(res.Rows))
	for _, r := range res.Rows {
		n, _ := strconv.ParseInt(string(r[4]), 10, 64)
		out = append(out, slotRow{Name: string(r[0]), Active: string(r[1]) == "t", PID: string(r[2]),
			WALStatus: string(r[3]), Retained: n, Confirmed: string(r[5])})
	}
	return out, nil
}

// lostError is the error of an invalidated slot; committed is the last
// position the source delivered.
func lostError(slot string, committed string) error {
	return permanent("replication slot %q was invalidated by the server (wal_status = lost: it retained more WAL than max_slot_wal_keep_size allows) and can never be read again; changes after LSN %s are gone from it. Drop it (pico-connectors admin --config FILE KEY drop-slot, or SELECT pg_drop_replication_slot('%s')), delete this source's checkpoint, and start the source again with snapshot = \"initial\" to re-read the tables", slot, committed, slot)
}

// sizeText writes a byte count for people: 1.5 GiB, 812.0 KiB, 96 B.
func sizeText(n int64) string {
	units := []string{"KiB", "MiB", "GiB", "TiB"}
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v, u = v/1024, u+1
	}
	return fmt.Sprintf("%.1f %s", v, units[u])
}

// startSlotWatch checks the slot once, then starts the watch goroutine
// (CDC only).
func (s *Source) startSlotWatch(metrics sdk.Metrics) {
	if s.cfg.Mode != "cdc" {
		return
	}
	if s.cfg.HeartbeatQuery != "" && s.cfg.HeartbeatInterval <= 0 {
		s.log.Warn("heartbeat_query is set but heartbeat_interval is 0s, so it never runs; set heartbeat_interval (such as \"1m\") to run it")
	}
	w := &s.slots
	w.retained = metrics.Gauge("postgres_source_retained_wal_bytes", "CDC: bytes of WAL the replication slot retains on the server (current WAL position minus the slot's restart_lsn), read every slot_check_interval while the source is open.")
	interval := s.cfg.SlotCheckInterval
	watch, cancel := context.WithCancel(context.Background())
	w.cancel, w.done = cancel, make(chan struct{})
	var conn *pgconn.PgConn
	check := func() {
		ctx, cancel := context.WithTimeout(watch, min(interval, 10*time.Second)+5*time.Second)
		defer cancel()
		if conn == nil || conn.IsClosed() {
			c, err := pgconn.ConnectConfig(ctx, s.pgcfg)
			if err != nil {
				s.log.Debug("slot check: cannot connect; trying again at the next check", "error", err)
				return
			}
			conn = c
		}
		if err := s.checkSlot(ctx, conn); err != nil {
			if watch.Err() == nil {
				s.log.Warn("slot check failed; trying again at the next check", "slot", s.cfg.ReplicationSlot, "error", err)
			}
			_ = conn.Close(context.Background())
			conn = nil
		}
	}
	first := s.conn != nil // else the database is not reachable: check in the goroutine
	if first {
		check()
	}
	go func() {
		defer close(w.done)
		if !first {
			check()
		}
		defer func() {
			if conn != nil {
				_ = conn.Close(context.Background())
			}
		}()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-watch.Done():
				return
			case <-t.C:
				check()
			}
		}
	}()
}

// stopSlotWatch ends the watch goroutine and waits for it.
func (s *Source) stopSlotWatch() {
	w := &s.slots
	if w.cancel == nil {
		return
	}
	w.cancel()
	<-w.done
}

// checkSlot reads the slot once and updates the gauge, over and lost.
func (s *Source) checkSlot(ctx context.Context, conn *pgconn.PgConn) error {
	slot := s.cfg.ReplicationSlot
	rows, err := listSlots(ctx, conn, slot)
	if err != nil {
		return err
	}
	var row *slotRow
	for i := range rows {
		if rows[i].Name == slot {
			row = &rows[i]
		}
	}
	w := &s.slots
	w.mu.Lock()
	defer w.mu.Unlock()
	if row == nil {
		// Not created yet, or dropped: Poll reports a dropped slot.
		w.retained.Set(0)
		w.over = nil
		return nil
	}
	if row.WALStatus == "lost" {
		if !w.lost {
			w.lost = true
			s.log.Error("replication slot invalidated by the server (wal_status = lost); the source cannot go on", "slot", slot)
		}
		w.over = nil
		return nil
	}
	if row.Retained >= 0 {
		w.retained.Set(float64(row.Retained))
	}
	if row.WALStatus == "unreserved" && !w.warnedRes {
		s.log.Warn("replication slot is past max_slot_wal_keep_size: the server will invalidate it at the next checkpoint unless the source catches up", "slot", slot, "retained_wal_bytes", row.Retained)
	}
	w.warnedRes = row.WALStatus == "unreserved"
	max := int64(s.cfg.MaxRetainedWal)
	switch {
	case max > 0 && row.Retained > max:
		w.over = fmt.Errorf("replication slot %q retains %s (%d bytes) of WAL on the database server, above max_retained_wal = %s: the source is behind or not confirming, and the server keeps that WAL until the slot moves (if the source is gone for good, drop the slot: pico-connectors admin --config FILE KEY drop-slot)",
			slot, sizeText(row.Retained), row.Retained, confkit.Size(max))
		s.log.Warn("replication slot retains more WAL than max_retained_wal", "slot", slot, "retained_wal_bytes", row.Retained, "retained_wal", sizeText(row.Retained), "max_retained_wal", confkit.Size(max).String())
	case w.over != nil:
		s.log.Info("replication slot back under max_retained_wal", "slot", slot, "retained_wal_bytes", row.Retained)
		w.over = nil
	}
	return nil
}

// slotLost returns the permanent error of an invalidated slot, or nil.
// It runs in Poll, which owns committedLSN.
func (s *Source) slotLost() error {
	s.slots.mu.Lock()
	defer s.slots.mu.Unlock()
	if !s.slots.lost {
		return nil
	}
	return lostError(s.cfg.ReplicationSlot, s.committedLSN.String())
}

// Health implements sdk.Health: an invalidated slot, retained WAL above
// max_retained_wal, or a failing heartbeat_query, as the watch and the
// heartbeat last saw them.
func (s *Source) Health() error {
	w := &s.slots
	w.mu.Lock()
	defer w.mu.Unlock()
	var lost error
	if w.lost {
		lost = fmt.Errorf("replication slot %q was invalidated by the server (wal_status = lost); see the poll error for what to do", s.cfg.ReplicationSlot)
	}
	return errors.Join(lost, w.over, w.beatErr)
}

var _ sdk.Health = (*Source)(nil)
