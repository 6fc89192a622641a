package pgtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
)

func TestStartRestart(t *testing.T) {
	s := Start(t)
	s.Exec(t, "CREATE TABLE t (id int primary key); INSERT INTO t VALUES (1)")
	s.Restart(t)
	ctx := context.Background()
	conn, err := pgconn.Connect(ctx, s.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	res, err := conn.Exec(ctx, "SHOW wal_level; SELECT count(*) FROM t").ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if got := string(res[0].Rows[0][0]); got != "logical" {
		t.Fatalf("wal_level = %s", got)
	}
	if got := string(res[1].Rows[0][0]); got != "1" {
		t.Fatalf("rows after restart = %s", got)
	}
}
