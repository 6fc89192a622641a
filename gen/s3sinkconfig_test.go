package gen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// Tests of the generated S3 sink config against the Configuration and
// Troubleshooting tables of shared/spec/s3-sink.md.

const envPrefix = "PICOMQ_CONNECTORS_SINK_ORDERS_S3_PLUGIN_CONFIG_"

func s3load(raw map[string]any, env map[string]string) (s3sinkconfig.Config, confkit.Problems, error) {
	c, err := s3sinkconfig.Load(raw, envPrefix, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	if err == nil {
		return c, nil, nil
	}
	ps, _ := confkit.AsProblems(err)
	return c, ps, err
}

func s3base(kv ...any) map[string]any {
	m := map[string]any{"bucket": "picomq-archive", "region": "eu-west-1"}
	for i := 0; i < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(m, kv[i].(string))
			continue
		}
		m[kv[i].(string)] = kv[i+1]
	}
	return m
}

func TestS3QuickStartAndDefaults(t *testing.T) {
	// The [plugin_config] block of the spec's quick start, as BurntSushi/toml decodes it.
	c, ps, _ := s3load(map[string]any{
		"bucket": "picomq-archive", "region": "eu-west-1", "prefix": "raw", "path_template": "{topic}/{date}/{hour}",
		"max_file_size": "64MiB", "output_format": "json_lines", "access_key_id": "AKIA...", "secret_access_key": "...",
	}, nil)
	if ps != nil {
		t.Fatal(ps)
	}
	want := s3sinkconfig.Config{
		Bucket: "picomq-archive", Region: "eu-west-1", Prefix: "raw",
		AccessKeyID: confkit.NewSecret("AKIA..."), SecretAccessKey: confkit.NewSecret("..."),
		PathTemplate: confkit.Template{Source: "{topic}/{date}/{hour}", Parts: []confkit.TemplatePart{
			{Name: "topic"}, {Text: "/"}, {Name: "date"}, {Text: "/"}, {Name: "hour"}}},
		FileRotation: s3sinkconfig.FileRotationSize, MaxFileSize: 64 * confkit.MiB,
		OutputFormat: s3sinkconfig.OutputFormatJSONLines, IncludeMetadata: true, MaxAttempts: 3, RetryDelay: time.Second,
		Compression: s3sinkconfig.CompressionNone, Delivery: s3sinkconfig.DeliveryExactlyOnce,
		MaxBufferSize: 256 * confkit.MiB, MaxInFlight: 4, ParquetCompression: s3sinkconfig.ParquetCompressionSnappy,
		CompressionLevel: s3sinkconfig.CompressionLevelFastest, ParquetRowGroupSize: 128 * confkit.MiB,
		RoleSessionName: "pico-connectors", RoleDuration: time.Hour, ServerSideEncryption: s3sinkconfig.ServerSideEncryptionNone,
		Timezone: "UTC", DefaultPartitionValue: "__unknown", MaxOpenFiles: 100, PartSize: 16 * confkit.MiB,
		TableFormat: s3sinkconfig.TableFormatNone, CommitInterval: time.Minute,
	}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("got  %+v\nwant %+v", c, want)
	}
	// Every default of the Configuration table.
	c, ps, _ = s3load(s3base(), nil)
	if ps != nil {
		t.Fatal(ps)
	}
	if c.Prefix != "" || c.Endpoint != "" || c.AccessKeyID.IsSet() || c.SecretAccessKey.IsSet() ||
		c.PathTemplate.Source != "{topic}/{date}/{hour}" || c.FileRotation != s3sinkconfig.FileRotationSize ||
		c.MaxFileSize != 8*confkit.MiB || c.MaxMessagesPerFile != nil || c.OutputFormat != s3sinkconfig.OutputFormatJSONLines ||
		!c.IncludeMetadata || c.IncludeHeaders || c.MaxAttempts != 3 || c.RetryDelay != time.Second || c.PathStyle {
		t.Fatalf("defaults %+v", c)
	}
}

type row struct {
	name string
	raw  map[string]any
	env  map[string]string
	// check runs on success; key/rule/msg describe the expected problem otherwise.
	check          func(t *testing.T, c s3sinkconfig.Config)
	key, rule, msg string
}

func runRows(t *testing.T, rows []row) {
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			c, ps, err := s3load(r.raw, r.env)
			if r.msg == "" {
				if err != nil {
					t.Fatalf("unexpected: %v", err)
				}
				r.check(t, c)
				return
			}
			if err == nil {
				t.Fatalf("no problem, want %s: %s", r.key, r.msg)
			}
			for _, p := range ps {
				if p.Key == r.key && (r.rule == "" || p.Rule == r.rule) && strings.Contains(p.Message, r.msg) {
					if !strings.Contains(err.Error(), r.key+": ") {
						t.Errorf("Error() does not name the key: %v", err)
					}
					return
				}
			}
			t.Fatalf("want %s/%s %q, got:\n%v", r.key, r.rule, r.msg, err)
		})
	}
}

// TestS3ConfigurationTable has at least one row per key of the spec's
// Configuration table.
func TestS3ConfigurationTable(t *testing.T) {
	runRows(t, []row{
		{name: "bucket required", raw: s3base("bucket", nil), key: "bucket", rule: "required", msg: "bucket is required"},
		{name: "bucket name rules", raw: s3base("bucket", "Bad_Bucket"), key: "bucket", rule: "pattern", msg: "bucket 'Bad_Bucket' is not a valid S3 bucket name"},
		{name: "bucket wrong type", raw: s3base("bucket", int64(5)), key: "bucket", rule: "type", msg: "must be a string, got integer 5"},
		{name: "region required", raw: s3base("region", nil), key: "region", rule: "required", msg: "region is required"},
		{name: "region any label with endpoint", raw: s3base("region", "garage", "endpoint", "http://127.0.0.1:9000"),
			check: func(t *testing.T, c s3sinkconfig.Config) {
				if c.Region != "garage" {
					t.Fatal(c.Region)
				}
			}},
		{name: "prefix slashes trimmed", raw: s3base("prefix", "/raw/data/"), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.Prefix != "raw/data" {
				t.Fatal(c.Prefix)
			}
		}},
		{name: "endpoint turns on path style", raw: s3base("endpoint", "http://127.0.0.1:9000"), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.Endpoint != "http://127.0.0.1:9000" || !c.PathStyle {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "prefix without ..", raw: s3base("prefix", "../../escape"), key: "prefix", rule: "pattern", msg: "prefix '../../escape' is not a key prefix"},
		{name: "prefix without control characters", raw: s3base("prefix", "raw/a\x00b"), key: "prefix", rule: "pattern", msg: "is not a key prefix"},
		{name: "prefix without empty segments", raw: s3base("prefix", "raw//orders"), key: "prefix", rule: "pattern", msg: "is not a key prefix"},
		{name: "prefix with dots", raw: s3base("prefix", "v1.2/..hidden/x..y/."), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.Prefix != "v1.2/..hidden/x..y/." {
				t.Fatalf("prefix = %q", c.Prefix)
			}
		}},
		{name: "endpoint must be a URL", raw: s3base("endpoint", "minio:9000"), key: "endpoint", rule: "pattern", msg: "endpoint 'minio:9000' is not a URL"},
		{name: "static credentials", raw: s3base("access_key_id", "AK", "secret_access_key", "SK"), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.AccessKeyID.Reveal() != "AK" || c.SecretAccessKey.Reveal() != "SK" {
				t.Fatal("credentials")
			}
		}},
		{name: "path_template placeholders", raw: s3base("path_template", "{topic_segment[-1]}/{partition}/{date}/{hour}/{timestamp}/{topic}"),
			check: func(t *testing.T, c s3sinkconfig.Config) {
				if p := c.PathTemplate.Parts[0]; p.Name != "topic_segment" || p.Arg != -1 || !p.HasArg {
					t.Fatalf("%+v", p)
				}
			}},
		{name: "path_template unknown placeholder", raw: s3base("path_template", "{topik}"), key: "path_template", msg: "unknown placeholder {topik} (did you mean {topic}?)"},
		{name: "path_template dotdot", raw: s3base("path_template", "a/../{topic}"), key: "path_template", msg: "'..' path segments"},
		{name: "path_template leading slash", raw: s3base("path_template", "/{topic}"), key: "path_template", msg: "must not start with '/'"},
		{name: "path_template unbalanced", raw: s3base("path_template", "{topic"), key: "path_template", msg: "unbalanced '{'"},
		{name: "file_rotation messages", raw: s3base("file_rotation", "messages", "max_messages_per_file", int64(500)), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.FileRotation != s3sinkconfig.FileRotationMessages || *c.MaxMessagesPerFile != 500 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "file_rotation bad value", raw: s3base("file_rotation", "sizes"), key: "file_rotation", rule: "enum", msg: `must be one of "size", "messages", got "sizes" (did you mean "size"?)`},
		{name: "max_file_size binary", raw: s3base("max_file_size", "8MiB"), check: sizeIs(8 << 20)},
		{name: "max_file_size decimal", raw: s3base("max_file_size", "10MB"), check: sizeIs(10_000_000)},
		{name: "max_file_size integer", raw: s3base("max_file_size", int64(1024)), check: sizeIs(1024)},
		{name: "max_file_size at most 5GiB", raw: s3base("max_file_size", "5GiB"), check: sizeIs(5 << 30)},
		{name: "max_file_size zero", raw: s3base("max_file_size", "0"), key: "max_file_size", rule: "x-exclusive-minimum", msg: "max_file_size (0) must be above 0"},
		{name: "max_file_size garbage", raw: s3base("max_file_size", "8 megs"), key: "max_file_size", rule: "format", msg: `invalid size "8 megs": unknown unit "megs"`},
		{name: "max_file_size negative", raw: s3base("max_file_size", "-1MiB"), key: "max_file_size", rule: "format", msg: "must not be negative"},
		{name: "max_messages_per_file ignored under size", raw: s3base("max_messages_per_file", int64(10)), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.FileRotation != s3sinkconfig.FileRotationSize || *c.MaxMessagesPerFile != 10 {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "max_messages_per_file positive", raw: s3base("max_messages_per_file", int64(0)), key: "max_messages_per_file", rule: "minimum", msg: "max_messages_per_file (0) must be at least 1"},
		{name: "output_format json_array", raw: s3base("output_format", "json_array"), check: formatIs(s3sinkconfig.OutputFormatJSONArray)},
		{name: "output_format raw", raw: s3base("output_format", "raw"), check: formatIs(s3sinkconfig.OutputFormatRaw)},
		{name: "output_format alias jsonl", raw: s3base("output_format", "jsonl"), check: formatIs(s3sinkconfig.OutputFormatJSONLines)},
		{name: "output_format alias jsonlines", raw: s3base("output_format", "jsonlines"), check: formatIs(s3sinkconfig.OutputFormatJSONLines)},
		{name: "output_format bad", raw: s3base("output_format", "orc"), key: "output_format", rule: "enum", msg: `must be one of "json_lines", "json_array", "raw", "parquet", got "orc"`},
		{name: "include_metadata off, headers on", raw: s3base("include_metadata", false, "include_headers", true), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.IncludeMetadata || !c.IncludeHeaders {
				t.Fatalf("%+v", c)
			}
		}},
		{name: "include_headers wrong type", raw: s3base("include_headers", "yes"), key: "include_headers", rule: "type", msg: `must be a boolean, got string "yes"`},
		{name: "max_attempts", raw: s3base("max_attempts", int64(7)), check: attemptsIs(7)},
		{name: "max_retries alias", raw: s3base("max_retries", int64(5)), check: attemptsIs(5)},
		{name: "max_retries and max_attempts", raw: s3base("max_retries", int64(5), "max_attempts", int64(2)), key: "max_retries", rule: "x-aliases", msg: "max_retries is an alias of max_attempts, which is also set"},
		{name: "max_attempts zero", raw: s3base("max_attempts", int64(0)), key: "max_attempts", rule: "minimum", msg: "max_attempts (0) must be at least 1"},
		{name: "retry_delay", raw: s3base("retry_delay", "250ms"), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.RetryDelay != 250*time.Millisecond {
				t.Fatal(c.RetryDelay)
			}
		}},
		{name: "retry_delay bad", raw: s3base("retry_delay", "fast"), key: "retry_delay", rule: "format", msg: `invalid duration "fast"`},
		{name: "retry_delay no unit", raw: s3base("retry_delay", "100"), key: "retry_delay", rule: "format", msg: "missing unit"},
		{name: "path_style explicit", raw: s3base("path_style", true), check: func(t *testing.T, c s3sinkconfig.Config) {
			if !c.PathStyle {
				t.Fatal("path_style")
			}
		}},
		{name: "path_style false wins over endpoint", raw: s3base("path_style", false, "endpoint", "https://s3.example.com"), check: func(t *testing.T, c s3sinkconfig.Config) {
			if c.PathStyle {
				t.Fatal("path_style")
			}
		}},
		{name: "unknown key", raw: s3base("max_file_sise", "1MiB"), key: "max_file_sise", rule: "unknown-key", msg: `unknown key (did you mean "max_file_size"?)`},
	})
}

func sizeIs(n int64) func(*testing.T, s3sinkconfig.Config) {
	return func(t *testing.T, c s3sinkconfig.Config) {
		if c.MaxFileSize.Bytes() != n {
			t.Fatalf("max_file_size %d, want %d", c.MaxFileSize, n)
		}
	}
}

func formatIs(f s3sinkconfig.OutputFormat) func(*testing.T, s3sinkconfig.Config) {
	return func(t *testing.T, c s3sinkconfig.Config) {
		if c.OutputFormat != f {
			t.Fatalf("output_format %q", c.OutputFormat)
		}
	}
}

func attemptsIs(n int) func(*testing.T, s3sinkconfig.Config) {
	return func(t *testing.T, c s3sinkconfig.Config) {
		if c.MaxAttempts != n {
			t.Fatalf("max_attempts %d", c.MaxAttempts)
		}
	}
}

// TestS3Troubleshooting asserts the exact wording of every config-related
// row of the spec's Troubleshooting table.
func TestS3Troubleshooting(t *testing.T) {
	runRows(t, []row{
		{name: "partial credentials: key id only", raw: s3base("access_key_id", "AKIA"), key: "secret_access_key", rule: "x-both-or-neither",
			msg: "Partially configured credentials: access_key_id is set but secret_access_key is not"},
		{name: "partial credentials: secret only", raw: s3base("secret_access_key", "s"), key: "access_key_id", rule: "x-both-or-neither",
			msg: "Partially configured credentials: secret_access_key is set but access_key_id is not"},
		{name: "partial credentials via env", raw: s3base(), env: map[string]string{envPrefix + "ACCESS_KEY_ID": "AKIA"}, key: "secret_access_key",
			msg: "Partially configured credentials:"},
		{name: "invalid region", raw: s3base("region", "europe"), key: "region", rule: "x-pattern-unless", msg: "Invalid S3 region 'europe'"},
		{name: "messages rotation without max", raw: s3base("file_rotation", "messages"), key: "max_messages_per_file", rule: "x-required-if",
			msg: "file_rotation is 'messages' but max_messages_per_file is not configured"},
		// Multipart uploads (issue 26) raised the spec's 5 GiB PutObject
		// limit to S3's largest object.
		{name: "file too large", raw: s3base("max_file_size", "6TiB"), key: "max_file_size", rule: "x-maximum",
			msg: "max_file_size (6TiB) exceeds S3's largest object of 5 TiB"},
		{name: "file too large decimal", raw: s3base("max_file_size", "6TB"), key: "max_file_size", rule: "x-maximum",
			msg: "max_file_size (6TB) exceeds S3's largest object of 5 TiB"},
	})
	for _, region := range []string{"us-east-1", "eu-west-1", "ap-southeast-2", "us-gov-west-1", "cn-north-1", "eu-central-2", "il-central-1", "ca-west-1", "mx-central-1", "eusc-de-east-1"} {
		if _, _, err := s3load(s3base("region", region), nil); err != nil {
			t.Errorf("region %s rejected: %v", region, err)
		}
	}
}

// TestS3AllProblemsAtOnce checks that one Load reports every problem, in
// schema order.
func TestS3AllProblemsAtOnce(t *testing.T) {
	_, ps, err := s3load(map[string]any{
		"region": "mars", "file_rotation": "messages", "max_file_size": "6TiB", "access_key_id": "AKIA",
		"output_format": "csv", "max_attempts": "three", "retry_delay": "soon", "bukket": "x",
	}, nil)
	if err == nil {
		t.Fatal("no error")
	}
	var keys []string
	for _, p := range ps {
		keys = append(keys, p.Key+"/"+p.Rule)
	}
	want := []string{"bucket/required", "region/x-pattern-unless", "secret_access_key/x-both-or-neither", "max_file_size/x-maximum",
		"max_messages_per_file/x-required-if", "output_format/enum", "max_attempts/type", "retry_delay/format", "bukket/unknown-key"}
	if !reflect.DeepEqual(keys, want) {
		t.Fatalf("problems\n got %v\nwant %v\n%v", keys, want, err)
	}
	if lines := strings.Split(err.Error(), "\n"); len(lines) != len(want) {
		t.Fatalf("Error() should have one line per problem:\n%v", err)
	}
}

func TestS3Env(t *testing.T) {
	c, ps, _ := s3load(s3base(), map[string]string{
		envPrefix + "BUCKET":                                "from-env",
		envPrefix + "MAX_FILE_SIZE":                         "16MiB",
		envPrefix + "MAX_ATTEMPTS":                          "9",
		envPrefix + "INCLUDE_METADATA":                      "false",
		envPrefix + "RETRY_DELAY":                           "2s",
		envPrefix + "OUTPUT_FORMAT":                         "jsonl",
		envPrefix + "ACCESS_KEY_ID":                         "AK",
		envPrefix + "SECRET_ACCESS_KEY":                     "SK",
		envPrefix + "PATH_STYLE":                            "true",
		"PICOMQ_CONNECTORS_SINK_OTHER_PLUGIN_CONFIG_BUCKET": "not-mine",
	})
	if ps != nil {
		t.Fatal(ps)
	}
	if c.Bucket != "from-env" || c.MaxFileSize != 16*confkit.MiB || c.MaxAttempts != 9 || c.IncludeMetadata ||
		c.RetryDelay != 2*time.Second || c.OutputFormat != s3sinkconfig.OutputFormatJSONLines ||
		c.SecretAccessKey.Reveal() != "SK" || !c.PathStyle {
		t.Fatalf("%+v", c)
	}
	// The env variable overrides a value written through an alias too.
	c, _, err := s3load(s3base("max_retries", int64(4)), map[string]string{envPrefix + "MAX_ATTEMPTS": "6"})
	if err != nil || c.MaxAttempts != 6 {
		t.Fatalf("%v %v", c.MaxAttempts, err)
	}
	runRows(t, []row{
		{name: "bad int", raw: s3base(), env: map[string]string{envPrefix + "MAX_ATTEMPTS": "lots"}, key: "max_attempts", rule: "env",
			msg: `environment variable ` + envPrefix + `MAX_ATTEMPTS = "lots" is not an integer`},
		{name: "bad bool", raw: s3base(), env: map[string]string{envPrefix + "INCLUDE_HEADERS": "maybe"}, key: "include_headers", rule: "env",
			msg: `environment variable ` + envPrefix + `INCLUDE_HEADERS = "maybe" is not a boolean`},
		{name: "bad size", raw: s3base(), env: map[string]string{envPrefix + "MAX_FILE_SIZE": "big"}, key: "max_file_size", msg: `invalid size "big"`},
		{name: "size over limit", raw: s3base(), env: map[string]string{envPrefix + "MAX_FILE_SIZE": "10TiB"}, key: "max_file_size",
			msg: "max_file_size (10TiB) exceeds S3's largest object of 5 TiB"},
		{name: "bad duration", raw: s3base(), env: map[string]string{envPrefix + "RETRY_DELAY": "-5s"}, key: "retry_delay", msg: "must not be negative"},
		{name: "bad enum", raw: s3base(), env: map[string]string{envPrefix + "FILE_ROTATION": "hourly"}, key: "file_rotation", rule: "enum", msg: `got "hourly"`},
	})
}

func TestS3Redaction(t *testing.T) {
	const secret, keyID = "wJalrXUtnFEMI-very-secret", "AKIAEXAMPLEKEYID"
	c, ps, _ := s3load(s3base("access_key_id", keyID, "secret_access_key", secret), nil)
	if ps != nil {
		t.Fatal(ps)
	}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
		outs = append(outs, fmt.Sprintf(verb, c), fmt.Sprintf(verb, &c), fmt.Sprintf(verb, c.SecretAccessKey))
	}
	j, _ := json.Marshal(c)
	rj, _ := json.Marshal(c.Redacted())
	var logs bytes.Buffer
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", c, "redacted", c.Redacted(), "secret", c.SecretAccessKey)
	slog.New(slog.NewTextHandler(&logs, nil)).Info("config", "cfg", c, "secret", c.SecretAccessKey)
	outs = append(outs, string(j), string(rj), logs.String())
	for _, o := range outs {
		if strings.Contains(o, secret) || strings.Contains(o, keyID) {
			t.Fatalf("secret leaked: %s", o)
		}
	}
	if r := c.Redacted(); r["secret_access_key"] != confkit.Mask || r["access_key_id"] != confkit.Mask || r["max_file_size"] != "8MiB" {
		t.Fatalf("redacted %v", r)
	}
	// Secrets never appear in problems either, from the file or the environment.
	_, _, err := s3load(s3base("secret_access_key", int64(123456789)), map[string]string{envPrefix + "ACCESS_KEY_ID": "AKIAENVSECRET"})
	if err == nil || strings.Contains(err.Error(), "123456789") || strings.Contains(err.Error(), "AKIAENVSECRET") {
		t.Fatalf("problems leak a secret: %v", err)
	}
	var _ sdk.Config = c
}

type nopSink struct{ cfg s3sinkconfig.Config }

func (nopSink) Open(context.Context) error                  { return nil }
func (nopSink) Consume(context.Context, []sdk.Record) error { return nil }
func (nopSink) Close(context.Context) error                 { return nil }

func TestS3RegisterSink(t *testing.T) {
	if _, ok := sdk.Lookup(s3sinkconfig.Path); ok {
		t.Skip("already registered in this binary")
	}
	s3sinkconfig.RegisterSink(func(cfg s3sinkconfig.Config, env sdk.Env) (sdk.Sink, error) { return nopSink{cfg}, nil })
	reg, ok := sdk.Lookup("libpicomq_connector_s3_sink")
	if !ok || reg.Kind != sdk.KindSink || reg.Name != "s3_sink" || len(reg.Schema) == 0 || reg.Summary == "" {
		t.Fatalf("%+v", reg)
	}
	cfg, err := reg.Load(s3base(), envPrefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	s, err := reg.NewSink(cfg, sdk.Env{Key: "orders_s3"})
	if err != nil || s.(nopSink).cfg.Bucket != "picomq-archive" {
		t.Fatalf("%v %v", s, err)
	}
	if _, err := reg.NewSink(fakeConfig{}, sdk.Env{}); err == nil || !strings.Contains(err.Error(), "not s3sinkconfig.Config") {
		t.Fatalf("wrong config type: %v", err)
	}
	if _, err := reg.Load(s3base("bucket", nil), envPrefix, nil); err == nil {
		t.Fatal("Load through the registration must validate")
	}
}

type fakeConfig struct{}

func (fakeConfig) Redacted() map[string]any { return nil }
