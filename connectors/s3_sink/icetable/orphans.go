package icetable

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/iceberg-go/table"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Orphans lists the data objects under prefix ("s3://bucket/prefix") that
// no snapshot of the table references: files uploaded and never committed.
// It leaves out the table's own metadata folder, and objects younger than
// Config.OrphanMinAge.
func (t *Table) Orphans(ctx context.Context, prefix string) ([]string, error) {
	ctx = t.cfg.ioContext(ctx)
	out, err := t.orphans(ctx, prefix)
	return out, t.clean(err)
}

func (t *Table) orphans(ctx context.Context, prefix string) ([]string, error) {
	bucket, keyPrefix, err := splitS3(prefix)
	if err != nil {
		return nil, err
	}
	tbl, err := t.refresh(ctx)
	if err != nil {
		return nil, err
	}
	referenced, err := referencedFiles(ctx, t.cfg.Table, tbl)
	if err != nil {
		return nil, err
	}
	metadataDir := strings.TrimSuffix(tbl.Location(), "/") + "/metadata/"
	cutoff := time.Now().Add(-t.cfg.OrphanMinAge)
	client, err := t.s3Client(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(keyPrefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("iceberg orphans: listing s3://%s/%s: %w", bucket, keyPrefix, err)
		}
		for _, o := range page.Contents {
			path := "s3://" + bucket + "/" + aws.ToString(o.Key)
			if strings.HasPrefix(path, metadataDir) || strings.HasSuffix(path, "/") {
				continue
			}
			if t.cfg.OrphanMinAge > 0 && o.LastModified != nil && o.LastModified.After(cutoff) {
				continue
			}
			if !referenced[path] {
				out = append(out, path)
			}
		}
	}
	sort.Strings(out)
	return out, nil
}

// referencedFiles is every data file path in any manifest of any snapshot
// of tbl, deleted entries included (an older snapshot still reads them).
func referencedFiles(ctx context.Context, name string, tbl *table.Table) (map[string]bool, error) {
	fs, err := tbl.FS(ctx)
	if err != nil {
		return nil, fmt.Errorf("iceberg table %s: %w", name, err)
	}
	out := map[string]bool{}
	seen := map[string]bool{}
	for mf, err := range tbl.AllManifests(ctx) {
		if err != nil {
			return nil, fmt.Errorf("iceberg table %s: reading manifests: %w", name, err)
		}
		if seen[mf.FilePath()] {
			continue
		}
		seen[mf.FilePath()] = true
		for e, err := range mf.Entries(fs, false) {
			if err != nil {
				return nil, fmt.Errorf("iceberg table %s: reading manifest %s: %w", name, mf.FilePath(), err)
			}
			out[e.DataFile().FilePath()] = true
		}
	}
	return out, nil
}

// DeleteOrphans deletes the objects paths names ("s3://bucket/key", as
// Orphans lists them). It refuses, before deleting anything, a path that
// a snapshot of the table references.
func (t *Table) DeleteOrphans(ctx context.Context, paths []string) error {
	ctx = t.cfg.ioContext(ctx)
	return t.clean(t.deleteOrphans(ctx, paths))
}

func (t *Table) deleteOrphans(ctx context.Context, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	tbl, err := t.refresh(ctx)
	if err != nil {
		return err
	}
	referenced, err := referencedFiles(ctx, t.cfg.Table, tbl)
	if err != nil {
		return err
	}
	byBucket := map[string][]types.ObjectIdentifier{}
	for _, p := range paths {
		if referenced[p] {
			return fmt.Errorf("iceberg orphans: %s is a data file of table %s, not an orphan; nothing was deleted", p, t.cfg.Table)
		}
		bucket, key, err := splitS3(p)
		if err != nil {
			return err
		}
		byBucket[bucket] = append(byBucket[bucket], types.ObjectIdentifier{Key: aws.String(key)})
	}
	client, err := t.s3Client(ctx)
	if err != nil {
		return err
	}
	for bucket, objs := range byBucket {
		for len(objs) > 0 {
			n := min(len(objs), 1000) // DeleteObjects takes 1000 keys at most
			out, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
				Bucket: aws.String(bucket),
				Delete: &types.Delete{Objects: objs[:n], Quiet: aws.Bool(true)},
			})
			if err != nil {
				return fmt.Errorf("iceberg orphans: deleting from bucket %s: %w", bucket, err)
			}
			if len(out.Errors) > 0 {
				e := out.Errors[0]
				return fmt.Errorf("iceberg orphans: deleting s3://%s/%s: %s: %s (and %d more failed)",
					bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message), len(out.Errors)-1)
			}
			objs = objs[n:]
		}
	}
	return nil
}

// splitS3 splits "s3://bucket/key" (s3a:// and s3n:// too).
func splitS3(p string) (bucket, key string, err error) {
	for _, scheme := range []string{"s3://", "s3a://", "s3n://"} {
		if rest, ok := strings.CutPrefix(p, scheme); ok {
			bucket, key, _ = strings.Cut(rest, "/")
			if bucket != "" {
				return bucket, key, nil
			}
		}
	}
	return "", "", fmt.Errorf("iceberg orphans: '%s' is not an s3://bucket/key path", p)
}

// s3Client is Config.Client, or a client of Config.S3 made on first use.
func (t *Table) s3Client(ctx context.Context) (*s3.Client, error) {
	if t.cfg.Client != nil {
		return t.cfg.Client, nil
	}
	var err error
	t.s3once.Do(func() {
		var cfg aws.Config
		cfg, err = t.awsConfig(ctx)
		if err != nil {
			return
		}
		t.s3c = s3.NewFromConfig(cfg, func(o *s3.Options) {
			if t.cfg.S3.Endpoint != "" {
				o.BaseEndpoint = aws.String(t.cfg.S3.Endpoint)
			}
			o.UsePathStyle = t.cfg.S3.PathStyle
		})
	})
	if t.s3c == nil && err == nil {
		err = errors.New("iceberg orphans: no S3 client (its configuration failed before)")
	}
	return t.s3c, err
}
