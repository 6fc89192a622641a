package postgressource

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/picomq/pico-connectors/generated/postgressourceconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// pico-connectors admin --config FILE KEY snapshot TABLE...: a snapshot on
// demand, written as the signal the running source reads from its stream
// (signal.go), wherever it runs.

func init() {
	sdk.RegisterAdmin(postgressourceconfig.Path, sdk.AdminCommand{
		Name:    "snapshot",
		Args:    "TABLE...",
		Summary: "read tables again, online, by the incremental snapshot while changes stream (CDC, stream reader); progress in GET /sources/KEY (snapshots)",
		Run:     adminSnapshot,
	})
}

func adminSnapshot(ctx context.Context, req sdk.AdminRequest) error {
	if len(req.Args) == 0 {
		return errors.New("snapshot needs the tables to read again, as schema.table")
	}
	cfg, ok := req.Config.(postgressourceconfig.Config)
	if !ok {
		return fmt.Errorf("%s: config is %T, not a postgres_source config", req.Key, req.Config)
	}
	if err := snapshotsOffered(cfg); err != nil {
		return fmt.Errorf("source %q: %w", req.Key, err)
	}
	var exact []tableName
	var patterns []*tablePattern
	for _, e := range cfg.Tables {
		if t, p, err := parseTableEntry(e); err == nil && p != nil {
			patterns = append(patterns, p)
		} else if err == nil {
			exact = append(exact, t)
		}
	}
	tables, err := checkSnapshotNames(req.Args, func(t tableName) bool {
		for _, x := range exact {
			if x == t {
				return true
			}
		}
		for _, p := range patterns {
			if p.match(t) {
				return true
			}
		}
		return false
	})
	if err != nil {
		return err
	}
	conn, slot, err := adminConnect(ctx, req)
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	if err := emitSnapshotSignal(ctx, conn, slot, tables); err != nil {
		return err
	}
	fmt.Fprintf(req.Out, "requested a snapshot of %s: the running source %q reads it from its stream; progress in GET /sources/%s (snapshots) and postgres_source_snapshot_* metrics\n", strings.Join(tables, ", "), req.Key, req.Key)
	return nil
}
