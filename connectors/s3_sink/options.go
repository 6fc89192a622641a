package s3sink

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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

// maxPutObjectSize is S3's limit for a single PutObject.
const maxPutObjectSize = 5 << 30

// maxRetryDelay caps the back-off between attempts.
const maxRetryDelay = 60 * time.Second

// options is the sink's configuration in the form the code uses. It is
// built from the generated Config (see config.go), which keeps everything
// else in this package independent of the generator.
type options struct {
	Bucket          string
	Region          string
	Prefix          string // surrounding slashes already trimmed
	Endpoint        string
	AccessKeyID     string
	SecretAccessKey string
	PathTemplate    pathTemplate
	// RotateByMessages is file_rotation = "messages".
	RotateByMessages bool
	MaxFileSize      int64
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
	// Columns are the columns of a parquet file, and ParquetCodec
	// (parquet_compression) the codec of its pages.
	Columns      []columnSpec
	ParquetCodec string
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

// defaultOptions returns the documented defaults.
func defaultOptions() options {
	t, _ := parsePathTemplate(defaultPathTemplate)
	return options{
		PathTemplate:    t,
		MaxFileSize:     8 << 20,
		Format:          formatJSONLines,
		IncludeMetadata: true,
		MaxAttempts:     3,
		RetryDelay:      time.Second,
		MaxBufferSize:   256 << 20,
		MaxInFlight:     4,
		ParquetCodec:    "snappy",
	}
}

// validate checks the rules the schema cannot express and returns every
// problem, one per line, with the spec's messages.
func (o *options) validate() error {
	var errs []error
	if o.Bucket == "" {
		errs = append(errs, errors.New("bucket is required"))
	} else if len(o.Bucket) < 3 || len(o.Bucket) > 63 {
		errs = append(errs, fmt.Errorf("bucket '%s' is not a valid S3 bucket name: it must be 3 to 63 characters long", o.Bucket))
	}
	// The region's form is the schema's rule (x-pattern-unless); only its
	// presence is checked here, for options built in code.
	if o.Region == "" {
		errs = append(errs, errors.New("region is required: an AWS region name such as us-east-1, or any label when endpoint is set"))
	}
	if (o.AccessKeyID == "") != (o.SecretAccessKey == "") {
		set, unset := "access_key_id", "secret_access_key"
		if o.AccessKeyID == "" {
			set, unset = unset, set
		}
		errs = append(errs, fmt.Errorf("Partially configured credentials: %s is set but %s is not; set both, or neither to use the default credential chain", set, unset))
	}
	if o.RotateByMessages && o.MaxMessages <= 0 {
		errs = append(errs, errors.New("file_rotation is 'messages' but max_messages_per_file is not configured; add max_messages_per_file or switch file_rotation to 'size'"))
	}
	if o.MaxFileSize <= 0 {
		errs = append(errs, fmt.Errorf("max_file_size (%s) must be above 0", formatSize(o.MaxFileSize)))
	} else if o.MaxFileSize > maxPutObjectSize {
		errs = append(errs, fmt.Errorf("max_file_size (%s) exceeds S3 single PutObject limit of 5 GiB", formatSize(o.MaxFileSize)))
	}
	if o.MaxAttempts < 1 {
		errs = append(errs, fmt.Errorf("max_attempts (%d) must be at least 1", o.MaxAttempts))
	}
	if o.MaxBufferSize <= 0 {
		errs = append(errs, fmt.Errorf("max_buffer_size (%s) must be above 0", formatSize(o.MaxBufferSize)))
	}
	if o.MaxInFlight < 1 {
		errs = append(errs, fmt.Errorf("max_in_flight (%d) must be at least 1", o.MaxInFlight))
	}
	if o.RotateInterval < 0 || o.FlushInterval < 0 {
		errs = append(errs, fmt.Errorf("rotate_interval (%s) and flush_interval (%s) must be 0s (off) or more", o.RotateInterval, o.FlushInterval))
	}
	if o.RetryDelay < 0 {
		errs = append(errs, fmt.Errorf("retry_delay (%s) must not be negative", o.RetryDelay))
	}
	if o.Format == formatParquet {
		if o.Compression != compressNone {
			errs = append(errs, errors.New("output_format 'parquet' compresses inside the file: remove compression (it compresses whole files) and set parquet_compression (none, snappy, gzip or zstd) instead, so the file is not compressed twice"))
		}
		if _, err := newPQLayout(o); err != nil {
			errs = append(errs, err)
		}
	}
	if o.Endpoint != "" && !strings.Contains(o.Endpoint, "://") {
		errs = append(errs, fmt.Errorf("endpoint '%s' is not a URL: write it with its scheme, such as http://127.0.0.1:7070", o.Endpoint))
	}
	return errors.Join(errs...)
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
