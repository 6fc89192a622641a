package s3sink

import (
	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

func init() { s3sinkconfig.RegisterSink(New, checkConfig) }

// checkConfig runs the rules the schema cannot state (options.validate) when the
// config loads, so that validate reports them, not only Open.
func checkConfig(c s3sinkconfig.Config) error {
	o := fromConfig(c)
	if err := o.checkLayout(); err != nil {
		return err
	}
	return o.validate()
}

// New builds the sink from its generated configuration. Nothing is checked
// against the store until Open.
func New(cfg s3sinkconfig.Config, env sdk.Env) (sdk.Sink, error) {
	return newSink(fromConfig(cfg), env), nil
}

// fromConfig converts the generated Config into the sink's options.
func fromConfig(c s3sinkconfig.Config) options {
	o := options{
		Bucket:           c.Bucket,
		Region:           c.Region,
		Prefix:           c.Prefix,
		Endpoint:         c.Endpoint,
		AccessKeyID:      c.AccessKeyID.Reveal(),
		SecretAccessKey:  c.SecretAccessKey.Reveal(),
		PathTemplate:     fromTemplate(c.PathTemplate),
		TimeZone:         c.Timezone,
		DefaultPartition: c.DefaultPartitionValue,
		MaxOpenFiles:     c.MaxOpenFiles,
		RotateByMessages: c.FileRotation == s3sinkconfig.FileRotationMessages,
		MaxFileSize:      c.MaxFileSize.Bytes(),
		PartSize:         c.PartSize.Bytes(),
		IncludeMetadata:  c.IncludeMetadata,
		IncludeHeaders:   c.IncludeHeaders,
		MaxAttempts:      c.MaxAttempts,
		RetryDelay:       c.RetryDelay,
		PathStyle:        c.PathStyle,
		Buffered:         c.Delivery == s3sinkconfig.DeliveryBuffered,
		MaxBufferSize:    c.MaxBufferSize.Bytes(),
		MaxInFlight:      c.MaxInFlight,
		RotateInterval:   c.RotateInterval,
		FlushInterval:    c.FlushInterval,
	}
	o.Object = objectSettings{
		KMSKeyID: c.KmsKeyID, KMSContext: c.KmsEncryptionContext, SSECKey: c.SseCustomerKey.Reveal(),
		StorageClass: c.StorageClass, ACL: string(c.Acl), Tags: c.Tags, Checksum: string(c.ChecksumAlgorithm),
	}
	if c.ServerSideEncryption != s3sinkconfig.ServerSideEncryptionNone {
		o.Object.SSE = string(c.ServerSideEncryption)
	}
	o.Role = roleSettings{
		ARN: c.RoleArn, ExternalID: c.ExternalID, SessionName: c.RoleSessionName, Duration: c.RoleDuration,
		SessionPolicy: c.RoleSessionPolicy, STSEndpoint: c.StsEndpoint,
	}
	o.CAFile = c.CAFile
	o.Iceberg = icebergFromConfig(c)
	switch c.Compression {
	case s3sinkconfig.CompressionGzip:
		o.Compression = compressGzip
	case s3sinkconfig.CompressionZstd:
		o.Compression = compressZstd
	}
	o.ParquetCodec = string(c.ParquetCompression)
	o.RowGroupSize = c.ParquetRowGroupSize.Bytes()
	switch c.CompressionLevel {
	case s3sinkconfig.CompressionLevelDefault:
		o.Level = levelDefault
	case s3sinkconfig.CompressionLevelBest:
		o.Level = levelBest
	}
	for _, col := range c.Columns {
		spec := columnSpec{Name: col.Name, Type: string(col.Type), Path: col.Path, Optional: col.Optional, Scale: col.Scale}
		if col.Precision != nil {
			spec.Precision = *col.Precision
		}
		o.Columns = append(o.Columns, spec)
	}
	if c.MaxMessagesPerFile != nil {
		o.MaxMessages = *c.MaxMessagesPerFile
	}
	switch c.OutputFormat {
	case s3sinkconfig.OutputFormatJSONArray:
		o.Format = formatJSONArray
	case s3sinkconfig.OutputFormatRaw:
		o.Format = formatRaw
	case s3sinkconfig.OutputFormatParquet:
		o.Format = formatParquet
	default:
		o.Format = formatJSONLines
	}
	return o
}

// fromTemplate takes the parsed parts of path_template, parsing the source
// text itself when the parts are missing (a Config built in code).
func fromTemplate(t confkit.Template) pathTemplate {
	if len(t.Parts) == 0 && t.Source != "" {
		if p, err := parsePathTemplate(t.Source); err == nil {
			return p
		}
	}
	return t
}
