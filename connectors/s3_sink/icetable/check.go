package icetable

import (
	"context"
	"errors"
	"fmt"

	"github.com/apache/iceberg-go/catalog"
)

// Check connects to the catalog, loads the table and says what Open with
// cols and spec would do to it, changing nothing (for pico-connectors
// check): create it, evolve its schema, or nothing. A change Iceberg
// cannot make (a column's type narrowed or changed, another partition
// spec) is the error Open gives, naming the column and the reason. With no
// columns (they come from Avro schemas known only at start) the schema is
// not compared, the partition spec is.
func Check(ctx context.Context, cfg Config, cols []Column, spec []PartitionField) (_ string, err error) {
	ctx = cfg.ioContext(ctx)
	t := &Table{cfg: cfg, secrets: secretsOf(cfg)}
	defer func() { err = t.clean(err) }()
	defer recoverError(&err)
	if err := t.connect(ctx); err != nil {
		return "", err
	}
	defer t.Close()
	if len(cols) > 0 {
		sc, err := newSchema(cols)
		if err != nil {
			return "", err
		}
		if _, err := newSpec(sc, spec); err != nil {
			return "", err
		}
	}
	tbl, err := t.cat.LoadTable(ctx, t.ident)
	if errors.Is(err, catalog.ErrNoSuchTable) {
		return fmt.Sprintf("%s does not exist yet: the sink creates it at start", cfg.Table), nil
	}
	if err != nil {
		return "", fmt.Errorf("iceberg table %s: %w", cfg.Table, err)
	}
	if err := checkSpec(tbl, spec); err != nil {
		return "", err
	}
	if len(cols) == 0 {
		return fmt.Sprintf("%s loaded; its columns are compared at start, with the Avro schemas", cfg.Table), nil
	}
	// Staged on a transaction that is never committed.
	changed, err := updateSchema(tbl.NewTransaction(), tbl.Schema(), cols)
	if err != nil {
		return "", err
	}
	if changed {
		return fmt.Sprintf("%s loaded; the sink evolves its schema to the definition at start (columns added, widened or made optional)", cfg.Table), nil
	}
	return fmt.Sprintf("%s loaded; its schema and partition spec match the definition", cfg.Table), nil
}
