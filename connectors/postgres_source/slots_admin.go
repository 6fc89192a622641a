package postgressource

import (
	"context"
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// The admin commands: pico-connectors admin --config FILE KEY slots, and
// KEY drop-slot [NAME]. They read the connector's definition, so they work
// for a disabled source, and for slots of deleted sources in the same
// database (every slot named picomq_*, the default names).

func init() {
	sdk.RegisterAdmin(postgressourceconfig.Path,
		sdk.AdminCommand{
			Name:    "slots",
			Summary: "list this source's replication slot and every other picomq_* slot of its database (name, active, wal_status, retained WAL, confirmed_flush_lsn)",
			Run: func(ctx context.Context, req sdk.AdminRequest) error {
				return withSlots(ctx, req, 0, "slots takes no arguments", printSlots)
			},
		},
		sdk.AdminCommand{
			Name:    "drop-slot",
			Args:    "[NAME]",
			Summary: "drop this source's replication slot (or NAME, one the slots command lists); refuses a slot in use",
			Run: func(ctx context.Context, req sdk.AdminRequest) error {
				return withSlots(ctx, req, 1, "drop-slot takes at most one slot name", dropSlot)
			},
		},
	)
}

// adminConnect opens a connection for an admin command and returns the
// source's slot name.
func adminConnect(ctx context.Context, req sdk.AdminRequest) (*pgconn.PgConn, string, error) {
	cfg, ok := req.Config.(postgressourceconfig.Config)
	if !ok {
		return nil, "", fmt.Errorf("%s: config is %T, not a postgres_source config", req.Key, req.Config)
	}
	cfg = withNames(cfg, req.Key)
	if cfg.Mode != postgressourceconfig.ModeCDC {
		return nil, "", fmt.Errorf("source %q has mode = %q: only mode = \"cdc\" uses a replication slot", req.Key, cfg.Mode)
	}
	pc, err := pgconn.ParseConfig(cfg.ConnectionString.Reveal())
	if err != nil {
		return nil, "", errors.New("connection_string: not a valid PostgreSQL connection string (URL postgres://user:pass@host:5432/db or key=value pairs)")
	}
	if pc.ConnectTimeout == 0 {
		pc.ConnectTimeout = 10 * time.Second
	}
	conn, err := pgconn.ConnectConfig(ctx, pc)
	if err != nil {
		return nil, "", fmt.Errorf("connecting to postgres (connection_string of %q): %w", req.Key, err)
	}
	return conn, cfg.ReplicationSlot, nil
}

// withSlots runs an admin command: it refuses more than maxArgs arguments
// (tooMany says what the command takes), connects, lists the slots
// (listSlots) and runs do with the connection, the source's slot name and
// the slots, then closes the connection.
func withSlots(ctx context.Context, req sdk.AdminRequest, maxArgs int, tooMany string,
	do func(ctx context.Context, req sdk.AdminRequest, conn *pgconn.PgConn, slot string, rows []slotRow) error) error {
	if len(req.Args) > maxArgs {
		return fmt.Errorf("%s, got %q", tooMany, req.Args)
	}
	conn, slot, err := adminConnect(ctx, req)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	rows, err := listSlots(ctx, conn, slot)
	if err != nil {
		return fmt.Errorf("reading pg_replication_slots: %w", err)
	}
	return do(ctx, req, conn, slot, rows)
}

// printSlots is the slots command.
func printSlots(_ context.Context, req sdk.AdminRequest, _ *pgconn.PgConn, slot string, rows []slotRow) error {
	tw := tabwriter.NewWriter(req.Out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SLOT\tACTIVE\tWAL_STATUS\tRETAINED_WAL\tCONFIRMED_FLUSH_LSN\tOWNER")
	mine := false
	for _, r := range rows {
		active := "no"
		if r.Active {
			active = "yes (pid " + r.PID + ")"
		}
		retained := "-"
		if r.Retained >= 0 {
			retained = sizeText(r.Retained)
		}
		owner := "other picomq_ slot (a deleted source, or one in another runtime)"
		if r.Name == slot {
			owner, mine = "this source ("+req.Key+")", true
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, active, r.WALStatus, retained, orDash(r.Confirmed), owner)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if !mine {
		fmt.Fprintf(req.Out, "source %q has no slot %q yet (it is created on the first start)\n", req.Key, slot)
	}
	return nil
}

// dropSlot is the drop-slot command.
func dropSlot(ctx context.Context, req sdk.AdminRequest, conn *pgconn.PgConn, slot string, rows []slotRow) error {
	name := slot
	if len(req.Args) == 1 {
		name = req.Args[0]
	}
	var row *slotRow
	var names []string
	for i := range rows {
		names = append(names, rows[i].Name)
		if rows[i].Name == name {
			row = &rows[i]
		}
	}
	if row == nil {
		msg := fmt.Sprintf("no replication slot %q among this source's and the picomq_* slots of its database", name)
		if len(names) > 0 {
			msg += fmt.Sprintf("; there are %q", names)
		}
		return errors.New(msg)
	}
	if row.Active {
		return fmt.Errorf("replication slot %q is in use by process %s (a running source); stop that source first (enabled = false, or stop its runtime), then drop it", name, row.PID)
	}
	res := conn.ExecParams(ctx, `SELECT pg_drop_replication_slot($1)`, [][]byte{[]byte(name)}, nil, nil, nil).Read()
	if res.Err != nil {
		if pgErrorCode(res.Err) == "55006" {
			return fmt.Errorf("replication slot %q became active meanwhile; stop the source that uses it, then drop it", name)
		}
		return fmt.Errorf("dropping replication slot %q: %w", name, res.Err)
	}
	fmt.Fprintf(req.Out, "dropped replication slot %q (it retained %s of WAL)\n", name, retainedText(row.Retained))
	if name == slot {
		fmt.Fprintf(req.Out, "source %q cannot resume from its checkpoint without it: delete the checkpoint before starting it again (with snapshot = \"initial\" to re-read the tables)\n", req.Key)
	}
	return nil
}

func retainedText(n int64) string {
	if n < 0 {
		return "an unknown amount"
	}
	return sizeText(n)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
