package postgressource

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

var _ sdk.Checker = (*Source)(nil)

// Check tests what the source needs of the server with the queries Open
// runs (setupCDC, setupPolling), without creating anything: the
// connection, each table and the privileges on it, and for CDC wal_level,
// the REPLICATION attribute, replica identity, the publication, the slot
// and a free slot when it is still to be created.
func (s *Source) Check(ctx context.Context) []sdk.Check {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := pgconn.ConnectConfig(ctx, s.pgcfg)
	if err != nil {
		return []sdk.Check{sdk.Failed("connects", "connection_string: "+confkit.MaskURLs(err.Error()),
			"fix connection_string (host, port, user, password, database), start the server, or allow this host in pg_hba.conf")}
	}
	s.conn = conn
	defer s.close()
	srv, err := s.readServer(ctx)
	if err != nil {
		return []sdk.Check{sdk.Failed("connects", "reading the server's settings: "+confkit.MaskURLs(err.Error()), "check the server's log")}
	}
	out := []sdk.Check{sdk.Passed("connects", fmt.Sprintf("user %q, database %q", srv.user, srv.db))}
	add := func(name string, err error, fix, detail string) {
		if err != nil {
			out = append(out, sdk.Failed(name, confkit.MaskURLs(err.Error()), fix))
			return
		}
		out = append(out, sdk.Passed(name, detail))
	}
	cdc := s.cfg.Mode == postgressourceconfig.ModeCDC
	privs := []string{"SELECT"}
	if !cdc {
		privs = s.pollPrivileges()
	}
	tables := s.tables
	if len(s.patterns) > 0 { // patterns.go: what they match now is checked too
		found, err := s.candidates(ctx)
		add("tables matched by patterns", err, "check the server's log", fmt.Sprintf("%d now: %s", len(found), quotedList(found)))
		tables = append(slices.Clip(tables), found...)
	}
	var present []tableName
	for _, t := range tables {
		info, err := s.loadTable(ctx, t)
		add("table "+t.String(), err, "create the table, or fix tables", "exists")
		if err != nil {
			continue
		}
		s.info[t.String()] = info
		present = append(present, t)
		for _, pv := range privs {
			add(pv+" on "+t.String(), s.privilegeError(ctx, t, srv.user, pv),
				fmt.Sprintf("GRANT %s ON %s TO %s", pv, t.quoted(), quoteIdent(srv.user)), "granted")
		}
	}
	if !cdc {
		return out
	}
	add("wal_level = logical", walLevelError(srv.walLevel),
		"ALTER SYSTEM SET wal_level = logical, then restart the server; or mode = \"polling\"", "wal_level = logical")
	add("REPLICATION attribute", srv.replicationError(), "ALTER ROLE "+quoteIdent(srv.user)+" REPLICATION", "user "+strconv.Quote(srv.user))
	if s.ops[opUpdate] || s.ops[opDelete] {
		for _, t := range present {
			add("replica identity of "+t.String(), s.replicaIdentityError(ctx, t),
				"ALTER TABLE "+t.quoted()+" REPLICA IDENTITY FULL, or add a primary key", "set")
		}
	}
	out = append(out, s.checkPublication(ctx))
	return append(out, s.reportSlot(ctx, srv.db)...)
}

// checkPublication reports the publication's state as setupPublication
// would find it.
func (s *Source) checkPublication(ctx context.Context) sdk.Check {
	name := "publication " + strconv.Quote(s.cfg.Publication)
	fix := "create or alter it as the error says, or set create_publication = true"
	st, err := s.readPublication(ctx)
	switch {
	case err != nil:
		return sdk.Failed(name, confkit.MaskURLs(err.Error()), "check the server's log")
	case st.rootProblem != nil:
		return sdk.Failed(name, st.rootProblem.Error(), "see the problem")
	case !st.found && !s.cfg.CreatePublication:
		return sdk.Failed(name, s.absentError(st).Error(), fix)
	case !st.found:
		return sdk.Passed(name, "missing; created on start (create_publication = true)")
	case len(st.missing) > 0 && !s.cfg.CreatePublication:
		return sdk.Failed(name, s.incompleteError(st).Error(), fix)
	case len(st.missing) > 0:
		return sdk.Passed(name, "lacks "+quotedList(st.missing)+"; added on start (create_publication = true)")
	}
	return sdk.Passed(name, "includes every table")
}

// reportSlot reports the slot's state as setupSlot would find it, and the
// server's free slots when it is still to be created.
func (s *Source) reportSlot(ctx context.Context, db string) []sdk.Check {
	slot := s.cfg.ReplicationSlot
	name := "replication slot " + strconv.Quote(slot)
	info, found, err := s.readSlot(ctx)
	if err != nil {
		return []sdk.Check{sdk.Failed(name, confkit.MaskURLs(err.Error()), "check the server's log")}
	}
	var out []sdk.Check
	switch {
	case !found && !s.cfg.CreateSlot:
		out = append(out, sdk.Failed(name, s.noSlotError().Error(), "create the slot, or set create_slot = true"))
	case !found:
		out = append(out, sdk.Passed(name, "missing; created on start (create_slot = true)"))
	default:
		if err := s.unusableSlotError(info, db); err != nil {
			out = append(out, sdk.Failed(name, err.Error(), "choose another replication_slot, or stop the process that reads it"))
			break
		}
		rows, err := listSlots(ctx, s.conn, slot)
		lost := false
		for _, r := range rows {
			lost = lost || (r.Name == slot && r.WALStatus == "lost")
		}
		switch {
		case err != nil:
			out = append(out, sdk.Failed(name, confkit.MaskURLs(err.Error()), "check the server's log"))
		case lost:
			out = append(out, sdk.Failed(name, lostError(slot, info.confirmed).Error(), "drop the slot and start over (see the problem)"))
		default:
			out = append(out, sdk.Passed(name, "confirmed_flush_lsn "+info.confirmed))
		}
	}
	rows, err := s.query(ctx, `SELECT current_setting('max_replication_slots')::int, (SELECT count(*) FROM pg_catalog.pg_replication_slots)`)
	if err != nil {
		return append(out, sdk.Failed("free replication slots", confkit.MaskURLs(err.Error()), "check the server's log"))
	}
	limit, _ := strconv.Atoi(string(rows[0][0]))
	used, _ := strconv.Atoi(string(rows[0][1]))
	detail := fmt.Sprintf("%d of max_replication_slots = %d free", limit-used, limit)
	if !found && limit-used <= 0 {
		return append(out, sdk.Failed("free replication slots", "none free for slot "+strconv.Quote(slot)+": "+detail,
			"raise max_replication_slots (a restart), or drop an unused slot (pico-connectors admin --config FILE KEY slots)"))
	}
	return append(out, sdk.Passed("free replication slots", detail))
}
