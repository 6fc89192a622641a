package s3sink

import (
	"fmt"
	"strconv"
	"strings"
	"time"
	_ "time/tzdata" // timezone works where the system has no zone database

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/klauspost/compress/zstd"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// format is the output_format of a file.
type format int

const (
	formatJSONLines format = iota
	formatJSONArray
	formatRaw
	formatParquet
)

// ext returns the object key extension of the format.
func (f format) ext() string {
	switch f {
	case formatJSONArray:
		return "json"
	case formatRaw:
		return "bin"
	case formatParquet:
		return "parquet"
	}
	return "jsonl"
}

// maxPutObjectSize is S3's limit for a single PutObject, maxObjectSize
// its limit for an object of a multipart upload, and maxParts the most
// parts of one upload.
const (
	maxPutObjectSize = 5 << 30
	maxObjectSize    = 5 << 40
	maxParts         = 10_000
)

// maxRetryDelay caps the back-off between attempts.
const maxRetryDelay = 60 * time.Second

// options is what the sink's code reads of its configuration: the
// generated Config's values, with the enums turned into the forms the code
// switches on (see fromConfig). It holds no default and no rule of its own;
// those are the schema's.
type options struct {
	Bucket          string
	Region          string
	Prefix          string // surrounding slashes already trimmed
	Endpoint        string
	AccessKeyID     string
	SecretAccessKey string
	PathTemplate    pathTemplate
	// TimeZone is timezone as written, Location the zone it names (nil
	// until resolved, see checkLayout), DefaultPartition is
	// default_partition_value, and MaxOpenFiles bounds the files one
	// partition has open at once.
	TimeZone         string
	Location         *time.Location
	DefaultPartition string
	MaxOpenFiles     int
	// RotateByMessages is file_rotation = "messages".
	RotateByMessages bool
	MaxFileSize      int64
	// PartSize is part_size: a file above it uploads in parts of this
	// size (multipart.go); 0 (options built in code) never does.
	PartSize int64
	// MaxMessages is max_messages_per_file; 0 when not configured.
	MaxMessages     int
	Format          format
	IncludeMetadata bool
	IncludeHeaders  bool
	MaxAttempts     int
	RetryDelay      time.Duration
	PathStyle       bool
	// Buffered is delivery = "buffered": a batch counts as durable once
	// buffered. The default, exactly_once, reports only uploaded records.
	Buffered bool
	// MaxBufferSize bounds the bytes of open and uploading files.
	MaxBufferSize int64
	// MaxInFlight is how many uploads run at once.
	MaxInFlight int
	// RotateInterval rotates by record time; 0 is off.
	RotateInterval time.Duration
	// FlushInterval uploads an idle partition's open file; 0 is off.
	FlushInterval time.Duration
	Compression   compression
	// Level is compression_level, for compression and parquet_compression.
	Level level
	// Columns are the columns of a parquet file, and ParquetCodec
	// (parquet_compression) the codec of its pages.
	Columns      []columnSpec
	ParquetCodec string
	// RowGroupSize is parquet_row_group_size: the most raw bytes of a row
	// group.
	RowGroupSize int64
	// Object is what every object written carries (objectsettings.go);
	// Role and CAFile are the client's access (access.go).
	Object objectSettings
	Role   roleSettings
	CAFile string
	// Iceberg is table_format = "iceberg" and its keys (iceberg_options.go).
	Iceberg icebergSettings
}

// checkLayout resolves timezone into Location, and reports a zone the
// database does not know, naming the key, and a path_template time cut
// that is not one (checkFieldCuts).
func (o *options) checkLayout() error {
	if o.TimeZone == "" {
		o.TimeZone = "UTC"
	}
	loc, err := time.LoadLocation(o.TimeZone)
	if err != nil || strings.HasPrefix(o.TimeZone, "/") || strings.EqualFold(o.TimeZone, "local") {
		return confkit.Problems{{Key: "timezone", Value: o.TimeZone, Rule: "timezone",
			Message: fmt.Sprintf("timezone '%s' is not an IANA time zone: use a name such as UTC, Europe/Berlin or Asia/Kolkata", o.TimeZone)}}
	}
	o.Location = loc
	return checkFieldCuts(o.PathTemplate)
}

// objectLimit is the largest object the sink can write: 10,000 parts of
// part_size, at most 5 TiB; a single PutObject's 5 GiB without part_size.
func (o *options) objectLimit() int64 {
	if o.PartSize <= 0 {
		return maxPutObjectSize
	}
	return min(maxObjectSize, maxParts*o.PartSize)
}

// checkPartSize refuses a max_file_size that needs more than S3's 10,000
// parts of part_size, naming both keys.
func (o *options) checkPartSize() error {
	if o.PartSize <= 0 || o.MaxFileSize <= maxParts*o.PartSize {
		return nil
	}
	return confkit.Problems{{Key: "max_file_size", Value: formatSize(o.MaxFileSize), Rule: "part_size",
		Message: fmt.Sprintf("max_file_size (%s) needs more than S3's 10,000 parts of part_size (%s): raise part_size to at least %s or lower max_file_size to at most %s",
			formatSize(o.MaxFileSize), formatSize(o.PartSize), formatSize(((o.MaxFileSize+maxParts-1)/maxParts+1<<20-1)>>20<<20), formatSize(maxParts*o.PartSize))}}
}

// layout returns how object keys are rendered.
func (o *options) layout() *keyLayout {
	missing := o.DefaultPartition
	if missing == "" {
		missing = "__unknown"
	}
	l := newKeyLayout(o.Prefix, o.PathTemplate, o.Location, missing)
	l.setUnits(o.timeUnitOf)
	return l
}

// compression is the compression of a file.
type compression int

const (
	compressNone compression = iota
	compressGzip
	compressZstd
)

// ext returns what follows the format's extension, and encoding the
// Content-Encoding of the object.
func (c compression) ext() string {
	switch c {
	case compressGzip:
		return ".gz"
	case compressZstd:
		return ".zst"
	}
	return ""
}

func (c compression) encoding() string {
	switch c {
	case compressGzip:
		return "gzip"
	case compressZstd:
		return "zstd"
	}
	return ""
}

// level is compression_level: how hard a codec works.
type level int

const (
	levelFastest level = iota
	levelDefault
	levelBest
)

// gzip returns the gzip level (compression, and parquet_compression =
// gzip): 1, 6 or 9.
func (l level) gzip() int { return [...]int{1, 6, 9}[l] }

// zstd returns klauspost's zstd encoder level: SpeedFastest,
// SpeedDefault or SpeedBetterCompression (SpeedBestCompression ran ten
// times slower for no smaller output on the bench's records).
func (l level) zstd() zstd.EncoderLevel {
	return [...]zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression}[l]
}

// formatSize prints a byte count in the largest binary unit that divides
// it, such as 6GiB or 1500B.
func formatSize(n int64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for i < len(units)-1 && n != 0 && n%1024 == 0 {
		n /= 1024
		i++
	}
	return strconv.FormatInt(n, 10) + units[i]
}

// columnSpec is one entry of columns, as configured.
type columnSpec struct {
	Name      string
	Type      string
	Path      string // dotted; empty means the name
	Optional  bool
	Precision int
	Scale     int
}

// payloadPath is the dotted payload path a column reads: its path, or its
// name.
func (c columnSpec) payloadPath() string {
	if c.Path == "" {
		return c.Name
	}
	return c.Path
}

// columnUnits is the unit of each column type that holds a time.
var columnUnits = map[string]timeUnit{"timestamp_ms": unitMillis, "timestamp_us": unitMicros, "date": unitDays}

// timeUnitOf is how a number at path counts time, for {field:PATH:day}
// and {field:PATH:hour}: as the first column that reads path and holds a
// time counts it (timestamp_us microseconds, date days), else milliseconds.
func (o *options) timeUnitOf(path string) timeUnit {
	for _, c := range o.Columns {
		if u, ok := columnUnits[c.Type]; ok && c.payloadPath() == path {
			return u
		}
	}
	return unitMillis
}

// icebergSettings is table_format and the iceberg_* keys.
type icebergSettings struct {
	// Enabled is table_format = "iceberg".
	Enabled bool
	// Catalog is iceberg_catalog: sql, rest or glue.
	Catalog string
	// URI, Credential and Token reach the catalog (secrets, revealed).
	URI, Credential, Token string
	// Table is iceberg_table, namespace.table; Warehouse iceberg_warehouse
	// ("" is s3://bucket/prefix, see warehouse).
	Table, Warehouse string
	// CommitInterval is commit_interval.
	CommitInterval time.Duration
	// PartitionBy is iceberg_partition_by as written.
	PartitionBy []string
}

// contentType is the Content-Type of the data objects of the format.
func (o *options) contentType() string {
	switch o.Format {
	case formatJSONLines:
		return "application/x-ndjson"
	case formatJSONArray:
		return "application/json"
	case formatParquet:
		return "application/vnd.apache.parquet"
	}
	return "application/octet-stream"
}

// objectInput returns the PutObject of a data object at key, without its
// body: its content headers and every object setting.
func (o *options) objectInput(key string) *s3.PutObjectInput {
	in := &s3.PutObjectInput{
		Bucket:      aws.String(o.Bucket),
		Key:         aws.String(key),
		ContentType: aws.String(o.contentType()),
	}
	if enc := o.Compression.encoding(); enc != "" {
		in.ContentEncoding = aws.String(enc)
	}
	o.Object.putObject(in)
	return in
}
