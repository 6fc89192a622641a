// Package icetable commits the S3 sink's Parquet files to an Apache Iceberg
// table, exactly once, with apache/iceberg-go.
//
// The sink uploads its data files as it always does; icetable never reads
// or rewrites them. Commit appends a batch of them to the table in one
// snapshot (Iceberg's append, with DataFiles built from what the sink knows:
// path, size, record count and partition values) whose summary carries, per
// Kafka topic and partition, the next offset to consume
// ("pico.offset.TOPIC.PARTITION"), merged over the previous snapshot's. The
// table is then the source of truth for offsets: Offsets reads them back,
// and Commit fences every partition on the offset the caller expects the
// table to hold, so that a writer that lost a partition to another one
// cannot commit it twice.
//
// The Parquet files carry no Iceberg field ids: the table's
// schema.name-mapping.default property maps their columns by name, as the
// Iceberg spec provides for files written without ids.
//
// Catalogs: "sql" (PostgreSQL, through pgx's database/sql driver, or a SQLite file, sqlite:PATH), "rest"
// and "glue". Metadata files go to the warehouse through iceberg-go's S3
// FileIO, configured from Config.S3.
package icetable

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/apache/iceberg-go"
	"github.com/apache/iceberg-go/catalog"
	"github.com/apache/iceberg-go/catalog/glue"
	"github.com/apache/iceberg-go/catalog/rest"
	sqlcat "github.com/apache/iceberg-go/catalog/sql"
	iceio "github.com/apache/iceberg-go/io"
	_ "github.com/apache/iceberg-go/io/gocloud/s3" // the s3:// FileIO
	"github.com/apache/iceberg-go/table"
	iceutils "github.com/apache/iceberg-go/utils"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	_ "github.com/mattn/go-sqlite3"    // the "sqlite3" database/sql driver

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Config says how to reach the catalog and the table.
type Config struct {
	// Catalog is "sql", "rest" or "glue".
	Catalog string
	// URI is, for sql, a PostgreSQL URL (postgres://user:password@host/db);
	// for rest, the catalog's http(s) URL; unused for glue.
	URI string
	// Credential is, for rest, "client_id:client_secret" (a secret); may be empty.
	Credential string
	// Token is, for rest, a bearer token (a secret); may be empty.
	Token string
	// Warehouse is "s3://bucket/prefix", where a new table's metadata goes
	// (the data files are the sink's own). For rest it is passed to the
	// catalog as its warehouse.
	Warehouse string
	// Table is "namespace.table"; the namespace may have dots itself
	// ("a.b.table"): the table name is after the last dot.
	Table string
	// CatalogName is the name the catalog is known by, kept in the sql
	// catalog's rows (catalog_name); "" is "pico". An engine that reads the
	// same tables through the same database must use the same name.
	CatalogName string
	// OrphanMinAge is how old an object must be for Orphans to list it: a
	// younger one may be a running writer's file that is not committed yet.
	// 0 lists every unreferenced object.
	OrphanMinAge time.Duration
	// S3 says how iceberg-go's FileIO, and Orphans, reach the bucket.
	S3 S3Config
	// Client, when set, is the sink's own S3 client (its assumed role and
	// CA file): Orphans and DeleteOrphans use it, and iceberg-go's FileIO,
	// which writes the table's metadata and manifests and reads them,
	// signs with its credentials and sends through its HTTP client, so the
	// table's files are written as the data files are. S3's keys are then
	// not used; S3's endpoint, region and addressing are.
	Client *s3.Client
}

// S3Config is how to reach the S3 (or S3-compatible) service of the
// warehouse and of the data files. Empty keys use the AWS default chain.
type S3Config struct {
	Endpoint, Region, AccessKeyID, SecretAccessKey, SessionToken string
	// PathStyle addresses buckets by path (http://host/bucket/key); with an
	// Endpoint and no PathStyle, buckets are addressed as virtual hosts.
	PathStyle bool
}

// Column is one column of the table, in the sink's own column vocabulary:
// Type is one of the S3 sink's Parquet column types (string, int32, int64,
// float, double, boolean, timestamp_ms, timestamp_us, date, decimal with
// Precision and Scale, bytes, json), the metadata columns included.
// Optional means nullable.
type Column struct {
	Name      string
	Type      string
	Optional  bool
	Precision int
	Scale     int
}

// PartitionField is one field of the partition spec: Source is a column
// name, Transform is "identity", "day" or "hour" (day and hour take a
// timestamp or, for day, a date column).
type PartitionField struct{ Source, Transform string }

// TopicPartition names one Kafka partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// String is "topic/partition".
func (tp TopicPartition) String() string { return fmt.Sprintf("%s/%d", tp.Topic, tp.Partition) }

// DataFile is one Parquet object the sink uploaded.
type DataFile struct {
	// Path is "s3://bucket/key".
	Path string
	// Size is the object's length in bytes; Records its number of records.
	Size, Records int64
	// TP is the Kafka partition its records come from; First and Last are
	// the offsets of its first and last record.
	TP          TopicPartition
	First, Last int64
	// Partition is the value, per PartitionField source column, of that
	// column in every record of the file (before the transform: the sink
	// writes one value per file), nil for a null. Go types: string, int64,
	// int32, int, float64, float32, bool, []byte, and time.Time for
	// timestamp and date columns. Nil when the table is unpartitioned.
	Partition map[string]any
}

// CommitResult is what Commit did.
type CommitResult struct {
	// SnapshotID is the table's current snapshot after the commit: the new
	// one, or the one it found when there was nothing to commit (0: none).
	SnapshotID int64
	// Dropped are the topic partitions whose files and offsets were left
	// out because the table's offset was not the expected one. An earlier
	// Commit whose outcome was unknown (an error after the catalog
	// accepted it) shows here on its retry: the table then holds the
	// offsets it committed (Offsets).
	Dropped []TopicPartition
	// Retries is how many times the commit lost an optimistic-concurrency
	// race to another writer and was retried on the new table state.
	Retries int
	// ExpireErr is the error of the snapshot expiry that follows a commit
	// once enough snapshots are past the table's retention
	// (history.expire.max-snapshot-age-ms): the commit itself landed.
	ExpireErr error

	committed bool // a snapshot was made
}

// Table is an open Iceberg table. Its methods are safe for concurrent
// use; commits through one Table are serialized.
type Table struct {
	cfg     Config
	ident   table.Identifier
	cat     catalog.Catalog
	db      *sql.DB // the sql catalog's connection pool, nil otherwise
	secrets []string

	mu  sync.Mutex
	tbl *table.Table

	s3once sync.Once
	s3c    *s3.Client
}

// Open connects to the catalog, creates the namespace and the table when
// missing (schema from cols, partition spec from spec), and evolves an
// existing table: a column it lacks is added (as optional: rows committed
// before read it as null), a type Iceberg can widen (int32 to int64, float
// to double, a wider decimal precision) is widened, a required column the
// definition makes optional or leaves out becomes optional. A change
// Iceberg cannot make (another type change, a different partition spec) is
// an error naming the column and the reason. With no columns, Open opens
// the table as it is, for tools (Orphans, Offsets...): it neither creates
// nor changes it.
func Open(ctx context.Context, cfg Config, cols []Column, spec []PartitionField) (_ *Table, err error) {
	ctx = cfg.ioContext(ctx)
	t := &Table{cfg: cfg, secrets: secretsOf(cfg)}
	defer func() { err = t.clean(err) }()
	defer recoverError(&err)
	if err := t.connect(ctx); err != nil {
		return nil, err
	}
	if err := t.prepare(ctx, cols, spec); err != nil {
		t.Close()
		return nil, err
	}
	return t, nil
}

// connect checks the table's name and the warehouse, and opens the
// catalog.
func (t *Table) connect(ctx context.Context) error {
	ident, err := parseIdent(t.cfg.Table)
	if err != nil {
		return err
	}
	t.ident = ident
	if w := t.cfg.Warehouse; w != "" && !strings.HasPrefix(w, "s3://") && !strings.HasPrefix(w, "s3a://") {
		return fmt.Errorf("iceberg warehouse '%s' is not an S3 location: use s3://bucket/prefix", w)
	}
	return t.openCatalog(ctx)
}

// Close releases the catalog's connections.
func (t *Table) Close() error {
	var err error
	if c, ok := t.cat.(catalog.Closer); ok {
		err = c.Close()
	}
	if t.db != nil {
		err = errors.Join(err, t.db.Close())
	}
	return t.clean(err)
}

// parseIdent splits "namespace.table" at its last dot.
func parseIdent(s string) (table.Identifier, error) {
	i := strings.LastIndexByte(s, '.')
	if i <= 0 || i == len(s)-1 {
		return nil, fmt.Errorf("iceberg table '%s' must be namespace.table", s)
	}
	ns := strings.Split(s[:i], ".")
	for _, p := range ns {
		if p == "" {
			return nil, fmt.Errorf("iceberg table '%s' has an empty namespace part", s)
		}
	}
	return append(ns, s[i+1:]), nil
}

// ioContext is ctx carrying Client's region, credentials and HTTP client
// for iceberg-go's FileIO (which takes an aws.Config from the context);
// ctx itself when there is no Client.
func (c *Config) ioContext(ctx context.Context) context.Context {
	if c.Client == nil {
		return ctx
	}
	o := c.Client.Options()
	return iceutils.WithAwsConfig(ctx, &aws.Config{Region: o.Region, Credentials: o.Credentials, HTTPClient: o.HTTPClient})
}

// fileIOProps are the FileIO properties of Config.S3.
func (c *Config) fileIOProps() iceberg.Properties {
	p := iceberg.Properties{}
	set := func(k, v string) {
		if v != "" {
			p[k] = v
		}
	}
	set(iceio.S3EndpointURL, c.S3.Endpoint)
	set(iceio.S3Region, c.S3.Region)
	if c.Client == nil { // keys in the properties would win over ioContext's
		set(iceio.S3AccessKeyID, c.S3.AccessKeyID)
		set(iceio.S3SecretAccessKey, c.S3.SecretAccessKey)
		set(iceio.S3SessionToken, c.S3.SessionToken)
	}
	if c.S3.Endpoint != "" && !c.S3.PathStyle {
		p[iceio.S3ForceVirtualAddressing] = "true"
	}
	return p
}

func (t *Table) openCatalog(ctx context.Context) error {
	name := t.cfg.CatalogName
	if name == "" {
		name = "pico"
	}
	props := t.cfg.fileIOProps()
	if t.cfg.Warehouse != "" {
		props["warehouse"] = strings.TrimSuffix(t.cfg.Warehouse, "/")
	}
	switch t.cfg.Catalog {
	case "sql":
		driver, dsn, dialect := "pgx", t.cfg.URI, sqlcat.Postgres
		if path, ok := strings.CutPrefix(t.cfg.URI, "sqlite:"); ok && path != "" {
			// SQLite locks the file itself; writers wait for each other
			// up to the busy timeout.
			driver, dsn, dialect = "sqlite3", "file:"+path+"?_busy_timeout=10000&_txlock=immediate", sqlcat.SQLite
		} else if !strings.HasPrefix(t.cfg.URI, "postgres://") && !strings.HasPrefix(t.cfg.URI, "postgresql://") {
			return fmt.Errorf("iceberg sql catalog URI '%s' is neither a PostgreSQL URL nor a SQLite file: use postgres://user:password@host:port/database or sqlite:/path/to/catalog.db", t.cfg.URI)
		}
		db, err := sql.Open(driver, dsn)
		if err != nil {
			return fmt.Errorf("iceberg sql catalog: %w", err)
		}
		cat, err := newSQLCatalog(ctx, name, db, dialect, props)
		if err != nil {
			db.Close()
			return fmt.Errorf("iceberg sql catalog at %s: %w", t.cfg.URI, err)
		}
		t.db, t.cat = db, cat
	case "rest":
		if _, err := url.Parse(t.cfg.URI); err != nil || !strings.HasPrefix(t.cfg.URI, "http") {
			return fmt.Errorf("iceberg rest catalog URI '%s' is not an http(s) URL", t.cfg.URI)
		}
		opts := []rest.Option{rest.WithAdditionalProps(props)}
		if t.cfg.Credential != "" {
			opts = append(opts, rest.WithCredential(t.cfg.Credential))
		}
		if t.cfg.Token != "" {
			opts = append(opts, rest.WithOAuthToken(t.cfg.Token))
		}
		if t.cfg.Warehouse != "" {
			opts = append(opts, rest.WithWarehouseLocation(t.cfg.Warehouse))
		}
		cat, err := rest.NewCatalog(ctx, name, t.cfg.URI, opts...)
		if err != nil {
			return fmt.Errorf("iceberg rest catalog at %s: %w", t.cfg.URI, err)
		}
		t.cat = cat
	case "glue":
		awsCfg, err := t.awsConfig(ctx)
		if err != nil {
			return err
		}
		t.cat, err = glue.NewCatalog(glue.WithAwsConfig(awsCfg), glue.WithAwsProperties(glue.AwsProperties(props)))
		if err != nil {
			return fmt.Errorf("iceberg glue catalog: %w", err)
		}
	default:
		return fmt.Errorf("iceberg catalog '%s' is not supported: use sql, rest or glue", t.cfg.Catalog)
	}
	return nil
}

// awsConfig is the AWS configuration of the glue catalog and of a client
// Orphans makes: Client's credentials when there is one, else S3's static
// keys when given, else the default chain.
func (t *Table) awsConfig(ctx context.Context) (aws.Config, error) {
	var opts []func(*awsconfig.LoadOptions) error
	if t.cfg.S3.Region != "" {
		opts = append(opts, awsconfig.WithRegion(t.cfg.S3.Region))
	}
	switch {
	case t.cfg.Client != nil: // the sink's credentials: its assumed role
		opts = append(opts, awsconfig.WithCredentialsProvider(t.cfg.Client.Options().Credentials))
	case t.cfg.S3.AccessKeyID != "":
		opts = append(opts, awsconfig.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(
			t.cfg.S3.AccessKeyID, t.cfg.S3.SecretAccessKey, t.cfg.S3.SessionToken)))
	}
	cfg, err := awsconfig.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return aws.Config{}, fmt.Errorf("iceberg: AWS configuration: %w", err)
	}
	return cfg, nil
}

// catalogLock is the key of the PostgreSQL advisory lock under which
// writers create the sql catalog's tables: CREATE TABLE IF NOT EXISTS of
// two sessions at once fails one of them (duplicate key, type or table).
const catalogLock = 0x7069636f69636562 // "picoiceb"

// newSQLCatalog is the sql catalog on db, its tables created if missing
// (on PostgreSQL under an advisory lock).
func newSQLCatalog(ctx context.Context, name string, db *sql.DB, dialect sqlcat.SupportedDialect, props iceberg.Properties) (*sqlcat.Catalog, error) {
	props["init_catalog_tables"] = "true"
	if dialect != sqlcat.Postgres {
		return sqlcat.NewCatalog(name, db, dialect, props)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "SELECT pg_advisory_lock($1)", int64(catalogLock)); err != nil {
		return nil, err
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", int64(catalogLock))
	return sqlcat.NewCatalog(name, db, dialect, props)
}

// recoverError turns a panic of iceberg-go (it has a few, on metadata it
// finds inconsistent) into *err, so that it does not stop the runtime and
// every connector in it.
func recoverError(err *error) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("iceberg: internal error in iceberg-go: %v", r)
	}
}

// secretsOf lists the secret values of cfg, longest first, for clean.
func secretsOf(cfg Config) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 4 {
			out = append(out, s)
		}
	}
	add(cfg.Credential)
	if _, secret, ok := strings.Cut(cfg.Credential, ":"); ok {
		add(secret)
	}
	add(cfg.Token)
	add(cfg.S3.SecretAccessKey)
	add(cfg.S3.SessionToken)
	if u, err := url.Parse(cfg.URI); err == nil && u.User != nil {
		if p, ok := u.User.Password(); ok {
			add(p)
			add(url.QueryEscape(p))
			add(url.PathEscape(p))
		}
	}
	return out
}

// cleanError is an error whose message has its secrets masked; it still
// unwraps to the original, for errors.Is.
type cleanError struct {
	msg string
	err error
}

func (e *cleanError) Error() string { return e.msg }
func (e *cleanError) Unwrap() error { return e.err }

// clean masks, in err's message, every URL's user information and query
// values and every secret of the configuration.
func (t *Table) clean(err error) error {
	if err == nil {
		return nil
	}
	msg := confkit.MaskURLs(err.Error())
	for _, s := range t.secrets {
		msg = strings.ReplaceAll(msg, s, confkit.Mask)
	}
	return &cleanError{msg: msg, err: err}
}
