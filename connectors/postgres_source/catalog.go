package postgressource

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	"github.com/jackc/pgx/v5/pgconn"
)

// errConnBusy: the connection is reading a peek result across polls.
var errConnBusy = errors.New("the postgres connection is busy reading a peek result (cdc_reader = \"peek\"); try again after the current transaction's batches")

// query runs one statement with text parameters and text results and
// returns its rows.
func (s *Source) query(ctx context.Context, sql string, args ...string) ([][][]byte, error) {
	if s.cursor != nil {
		return nil, errConnBusy
	}
	params := make([][]byte, len(args))
	for i, a := range args {
		params[i] = []byte(a)
	}
	res := s.conn.ExecParams(ctx, sql, params, nil, nil, nil).Read()
	if res.Err != nil {
		return nil, res.Err
	}
	return res.Rows, nil
}

// exec runs statements without parameters.
func (s *Source) exec(ctx context.Context, sql string) error {
	if s.cursor != nil {
		return errConnBusy
	}
	_, err := s.conn.Exec(ctx, sql).ReadAll()
	return err
}

// loadTypes reads every non built-in type (domains, enums, arrays of
// them, composite types) so decoding never waits on the catalog.
func (s *Source) loadTypes(ctx context.Context) error {
	rows, err := s.query(ctx, `SELECT oid, typtype, typcategory, typelem, typbasetype, typdelim, typtypmod FROM pg_catalog.pg_type WHERE oid >= 10000`)
	if err != nil {
		return err
	}
	type raw struct {
		typtype, category, delim byte
		elem, base               uint32
	}
	all := make(map[uint32]raw, len(rows))
	s.catTypes = make(map[uint32]catType, len(rows))
	for _, r := range rows {
		oid, _ := strconv.ParseUint(string(r[0]), 10, 32)
		elem, _ := strconv.ParseUint(string(r[3]), 10, 32)
		base, _ := strconv.ParseUint(string(r[4]), 10, 32)
		all[uint32(oid)] = raw{typtype: first(r[1]), category: first(r[2]), delim: first(r[5]), elem: uint32(elem), base: uint32(base)}
		mod, _ := strconv.ParseInt(string(r[6]), 10, 32)
		s.catTypes[uint32(oid)] = catType{typtype: first(r[1]), category: first(r[2]), delim: first(r[5]), elem: uint32(elem), base: uint32(base), typmod: int32(mod)}
	}
	types := make(map[uint32]*pgType, len(all))
	var resolve func(oid uint32, depth int) *pgType
	resolve = func(oid uint32, depth int) *pgType {
		if t := builtinType(oid); t != nil {
			return t
		}
		if t, ok := types[oid]; ok {
			return t
		}
		r, ok := all[oid]
		if !ok || depth > 10 {
			return &pgType{kind: kindString}
		}
		var t *pgType
		switch {
		case r.typtype == 'd':
			t = resolve(r.base, depth+1)
		case r.category == 'A' && r.elem != 0:
			delim := r.delim
			if delim == 0 {
				delim = ','
			}
			t = &pgType{kind: kindArray, elem: resolve(r.elem, depth+1), delim: delim}
		default:
			t = &pgType{kind: kindString}
		}
		types[oid] = t
		return t
	}
	for oid := range all {
		resolve(oid, 0)
	}
	s.types = types
	return nil
}

func first(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

// typeOf returns the encoder type of an OID; unknown OIDs (types created
// after the connection started) are written as strings until the next
// reconnect reloads the catalog.
func (s *Source) typeOf(oid uint32) *pgType {
	if t := builtinType(oid); t != nil {
		return t
	}
	if t, ok := s.types[oid]; ok {
		return t
	}
	return &pgType{kind: kindString}
}

// tableInfo is what the catalog says of one configured table.
type tableInfo struct {
	name    tableName
	pk      []string // primary key columns, in key order
	colType map[string]string
	colOID  map[string]uint32
	// kind is pg_class.relkind: r a table, p a partitioned table, v a
	// view, m a materialized view, f a foreign table.
	kind string
	// partitioned: a partitioned table's root (relkind p), captured
	// through the root: CDC publishes it with publish_via_partition_root,
	// snapshots and polling read it through the root.
	partitioned bool
}

// loadTable reads a table's columns and primary key.
func (s *Source) loadTable(ctx context.Context, t tableName) (*tableInfo, error) {
	rows, err := s.query(ctx, `SELECT a.attname, format_type(a.atttypid, a.atttypmod), a.atttypid,
  coalesce(array_position(i.indkey::int2[], a.attnum) - array_lower(i.indkey::int2[], 1) + 1, 0)
FROM pg_catalog.pg_attribute a
LEFT JOIN pg_catalog.pg_index i ON i.indrelid = a.attrelid AND i.indisprimary
WHERE a.attrelid = $1::regclass AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum`, t.quoted())
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && (pgErr.Code == "42P01" || pgErr.Code == "3F000") {
			return nil, fmt.Errorf("tables: %s does not exist", t)
		}
		return nil, err
	}
	info := &tableInfo{name: t, colType: map[string]string{}, colOID: map[string]uint32{}}
	kind, err := s.query(ctx, `SELECT relkind FROM pg_catalog.pg_class WHERE oid = $1::regclass`, t.quoted())
	if err != nil {
		return nil, err
	}
	if len(kind) == 1 {
		info.kind = string(kind[0][0])
	}
	info.partitioned = info.kind == "p"
	pkPos := map[int]string{}
	for _, r := range rows {
		name := string(r[0])
		info.colType[name] = string(r[1])
		oid, _ := strconv.ParseUint(string(r[2]), 10, 32)
		info.colOID[name] = uint32(oid)
		if pos, _ := strconv.Atoi(string(r[3])); pos > 0 {
			pkPos[pos] = name
		}
	}
	for i := 1; i <= len(pkPos); i++ {
		info.pk = append(info.pk, pkPos[i])
	}
	if s.cfg.PrimaryKeyColumn != "" {
		if _, ok := info.colType[s.cfg.PrimaryKeyColumn]; !ok {
			return nil, fmt.Errorf("primary_key_column: table %s has no column %q", t, s.cfg.PrimaryKeyColumn)
		}
		info.pk = []string{s.cfg.PrimaryKeyColumn}
	}
	return info, nil
}

// pgErrorCode returns the SQLSTATE of err, or "".
func pgErrorCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}
