package s3sink

import (
	"errors"
	"fmt"
	"regexp"
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
)

// ext returns the object key extension of the format.
func (f format) ext() string {
	switch f {
	case formatJSONArray:
		return "json"
	case formatRaw:
		return "bin"
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
	}
}

// usePathStyle reports whether requests use host/bucket/key addressing.
func (o *options) usePathStyle() bool { return o.PathStyle || o.Endpoint != "" }

// validate checks the rules the schema cannot express and returns every
// problem, one per line, with the spec's messages.
func (o *options) validate() error {
	var errs []error
	if o.Bucket == "" {
		errs = append(errs, errors.New("bucket is required"))
	} else if len(o.Bucket) < 3 || len(o.Bucket) > 63 {
		errs = append(errs, fmt.Errorf("bucket '%s' is not a valid S3 bucket name: it must be 3 to 63 characters long", o.Bucket))
	}
	if o.Region == "" {
		errs = append(errs, errors.New("region is required: an AWS region name such as us-east-1, or any label when endpoint is set"))
	} else if o.Endpoint == "" && !isAWSRegion(o.Region) {
		errs = append(errs, fmt.Errorf("Invalid S3 region '%s': not an AWS region name such as us-east-1 or eu-west-1; set endpoint to use an S3-compatible store with any region label", o.Region))
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
	if o.RetryDelay < 0 {
		errs = append(errs, fmt.Errorf("retry_delay (%s) must not be negative", o.RetryDelay))
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

// awsRegions are the AWS region names known when this was written;
// regionPattern admits ones added later that follow the same scheme.
var awsRegions = map[string]bool{
	"us-east-1": true, "us-east-2": true, "us-west-1": true, "us-west-2": true,
	"af-south-1": true, "ap-east-1": true, "ap-east-2": true, "ap-south-1": true, "ap-south-2": true,
	"ap-northeast-1": true, "ap-northeast-2": true, "ap-northeast-3": true,
	"ap-southeast-1": true, "ap-southeast-2": true, "ap-southeast-3": true, "ap-southeast-4": true,
	"ap-southeast-5": true, "ap-southeast-6": true, "ap-southeast-7": true,
	"ca-central-1": true, "ca-west-1": true,
	"eu-central-1": true, "eu-central-2": true, "eu-west-1": true, "eu-west-2": true, "eu-west-3": true,
	"eu-north-1": true, "eu-south-1": true, "eu-south-2": true,
	"il-central-1": true, "me-central-1": true, "me-south-1": true, "mx-central-1": true,
	"sa-east-1": true, "cn-north-1": true, "cn-northwest-1": true,
	"us-gov-east-1": true, "us-gov-west-1": true,
	"us-iso-east-1": true, "us-iso-west-1": true, "us-isob-east-1": true,
	"eusc-de-east-1": true,
}

var regionPattern = regexp.MustCompile(`^(us|eu|ap|sa|ca|me|af|il|mx|cn|us-gov|us-iso|us-isob|us-isof|eu-isoe|eusc)-(east|west|north|south|central|northeast|northwest|southeast|southwest|de-east)-[1-9][0-9]?$`)

// isAWSRegion reports whether name is an AWS region name.
func isAWSRegion(name string) bool {
	return awsRegions[name] || regionPattern.MatchString(name)
}
