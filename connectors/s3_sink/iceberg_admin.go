package s3sink

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/picomq/pico-connectors/connectors/s3_sink/icetable"
	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/sdk"
)

// The admin command pico-connectors admin --config FILE KEY iceberg-orphans
// [--delete] [--min-age D]: the data files under the sink's prefix that no
// snapshot of its table references, older than D: a younger one may be a
// file the running sink has uploaded and not yet committed.

func init() {
	sdk.RegisterAdmin(s3sinkconfig.Path, sdk.AdminCommand{
		Name:    "iceberg-orphans",
		Args:    "[--delete] [--min-age DURATION]",
		Summary: "list the Parquet files under prefix older than --min-age (default 1h) that no snapshot of iceberg_table references (uploaded, never committed); --delete deletes them",
		Run:     adminOrphans,
	})
}

// defaultMinAge is how old an orphan must be to be listed: a younger one
// may be a file the running sink has uploaded and not yet committed
// (commit_interval, or a catalog outage).
const defaultMinAge = time.Hour

func adminOrphans(ctx context.Context, req sdk.AdminRequest) error {
	fs := flag.NewFlagSet("iceberg-orphans", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	del := fs.Bool("delete", false, "")
	minAge := fs.Duration("min-age", defaultMinAge, "")
	if err := fs.Parse(req.Args); err != nil || fs.NArg() > 0 {
		return fmt.Errorf("iceberg-orphans takes [--delete] [--min-age DURATION], got %q", req.Args)
	}
	cfg, ok := req.Config.(s3sinkconfig.Config)
	if !ok {
		return fmt.Errorf("%s: config is %T, not an s3_sink config", req.Key, req.Config)
	}
	o := fromConfig(cfg)
	o.Prefix = trimPrefix(o.Prefix)
	if !o.Iceberg.Enabled {
		return fmt.Errorf("sink %q has table_format = %q: iceberg-orphans needs table_format = \"iceberg\"", req.Key, cfg.TableFormat)
	}
	// The sink's own client: its assumed role and CA file apply.
	client, err := newClient(ctx, &o)
	if err != nil {
		return fmt.Errorf("%s: %w", req.Key, err)
	}
	cfgT := o.tableConfig(client)
	cfgT.OrphanMinAge = *minAge
	t, err := icetable.Open(ctx, cfgT, nil, nil)
	if err != nil {
		return fmt.Errorf("iceberg_table '%s' of %q: %w", o.Iceberg.Table, req.Key, err)
	}
	defer t.Close()
	prefix := "s3://" + o.Bucket + "/" + o.Prefix
	paths, err := t.Orphans(ctx, prefix)
	if err != nil {
		return fmt.Errorf("listing the orphans under %s: %w", prefix, err)
	}
	for _, p := range paths {
		fmt.Fprintln(req.Out, p)
	}
	fmt.Fprintf(req.Out, "%d file(s) under %s older than %s are in no snapshot of %s (younger ones are left out: a running sink may not have committed them yet)\n",
		len(paths), prefix, *minAge, o.Iceberg.Table)
	if !*del || len(paths) == 0 {
		return nil
	}
	if err := t.DeleteOrphans(ctx, paths); err != nil {
		return fmt.Errorf("deleting orphans: %w", err)
	}
	fmt.Fprintf(req.Out, "deleted %d file(s)\n", len(paths))
	return nil
}

// tableConfig is how icetable reaches the catalog and the bucket: with
// client, the sink's own (its assumed role and CA file), the table's
// metadata and manifests are written as the data files are.
func (o *options) tableConfig(client *s3.Client) icetable.Config {
	return icetable.Config{
		Client:  client,
		Catalog: o.Iceberg.Catalog, URI: o.Iceberg.URI, Credential: o.Iceberg.Credential, Token: o.Iceberg.Token,
		Warehouse: o.warehouse(), Table: o.Iceberg.Table,
		S3: icetable.S3Config{Endpoint: o.Endpoint, Region: o.Region, AccessKeyID: o.AccessKeyID,
			SecretAccessKey: o.SecretAccessKey, PathStyle: o.PathStyle},
	}
}
