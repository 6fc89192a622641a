package s3sink

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// sinkEnv is an Env as the runtime hands it, with a logger that discards.
func sinkEnv(key string, m sdk.Metrics) sdk.Env {
	return sdk.Env{Key: key, Logger: slog.New(slog.DiscardHandler), Metrics: m}
}

// defaultOptions is what the sink reads of a Config with every schema
// default; tests set the bucket, region and what they need on top.
func defaultOptions() options { return fromConfig(s3sinkconfig.Default()) }

func validConfig() s3sinkconfig.Config {
	c := s3sinkconfig.Default()
	c.Bucket, c.Region = "picomq-archive", "eu-west-1"
	return c
}

// TestValidateMessages: a Config built in code is checked by the schema's
// rules, with the schema's messages; the sink keeps no copy of them.
func TestValidateMessages(t *testing.T) {
	cases := []struct {
		name string
		mod  func(*s3sinkconfig.Config)
		want string
	}{
		{"valid", func(*s3sinkconfig.Config) {}, ""},
		{"no region", func(c *s3sinkconfig.Config) { c.Region = "" }, "region is required"},
		{"buffer", func(c *s3sinkconfig.Config) { c.MaxBufferSize = 0 }, "max_buffer_size"},
		{"in flight", func(c *s3sinkconfig.Config) { c.MaxInFlight = 0 }, "max_in_flight (0) must be at least 1"},
		{"access only", func(c *s3sinkconfig.Config) { c.AccessKeyID = confkit.NewSecret("AKIA") }, "Partially configured credentials"},
		{"secret only", func(c *s3sinkconfig.Config) { c.SecretAccessKey = confkit.NewSecret("s") }, "Partially configured credentials"},
		{"messages", func(c *s3sinkconfig.Config) { c.FileRotation = s3sinkconfig.FileRotationMessages },
			"file_rotation is 'messages' but max_messages_per_file is not configured"},
		{"messages ok", func(c *s3sinkconfig.Config) {
			c.FileRotation, c.MaxMessagesPerFile = s3sinkconfig.FileRotationMessages, confkit.Ptr(10)
		}, ""},
		{"size", func(c *s3sinkconfig.Config) { c.MaxFileSize = 6 * confkit.TiB }, "max_file_size (6TiB) exceeds S3's largest object of 5 TiB"},
		{"size above one PutObject, in parts", func(c *s3sinkconfig.Config) { c.MaxFileSize = 6 * confkit.GiB }, ""},
		{"part too small", func(c *s3sinkconfig.Config) { c.PartSize = 4 * confkit.MiB }, "part_size (4MiB) is below S3's smallest part of 5 MiB"},
		{"part too large", func(c *s3sinkconfig.Config) { c.PartSize = 6 * confkit.GiB }, "part_size (6GiB) exceeds S3's largest part of 5 GiB"},
		{"size at limit", func(c *s3sinkconfig.Config) { c.MaxFileSize = 5 * confkit.GiB }, ""},
		{"size zero", func(c *s3sinkconfig.Config) { c.MaxFileSize = 0 }, "max_file_size"},
		{"attempts", func(c *s3sinkconfig.Config) { c.MaxAttempts = 0 }, "max_attempts (0) must be at least 1"},
		{"bucket", func(c *s3sinkconfig.Config) { c.Bucket = "ab" }, "bucket 'ab' is not a valid S3 bucket name"},
		{"no bucket", func(c *s3sinkconfig.Config) { c.Bucket = "" }, "bucket is required"},
		{"endpoint", func(c *s3sinkconfig.Config) { c.Endpoint = "127.0.0.1:9000" }, "endpoint '127.0.0.1:9000' is not a URL"},
		{"region", func(c *s3sinkconfig.Config) { c.Region = "europe" }, "Invalid S3 region 'europe'"},
		{"any label with an endpoint", func(c *s3sinkconfig.Config) { c.Region, c.Endpoint = "garage", "http://127.0.0.1:9000" }, ""},
		{"parquet and compression", func(c *s3sinkconfig.Config) {
			c.OutputFormat, c.Compression = s3sinkconfig.OutputFormatParquet, s3sinkconfig.CompressionGzip
			c.Columns = []s3sinkconfig.ColumnsItem{{Name: "id", Type: s3sinkconfig.ColumnsTypeInt64}}
		}, "output_format"},
	}
	for _, c := range cases {
		cfg := validConfig()
		c.mod(&cfg)
		err := cfg.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	// Secrets never appear in messages.
	cfg := validConfig()
	cfg.SecretAccessKey = confkit.NewSecret("TOPSECRETVALUE")
	if err := cfg.Validate(); err == nil || strings.Contains(err.Error(), "TOPSECRETVALUE") {
		t.Fatalf("err = %v", err)
	}
	// Every problem at once.
	cfg = validConfig()
	cfg.Region, cfg.MaxAttempts = "", 0
	if ps, _ := confkit.AsProblems(cfg.Validate()); len(ps) != 2 {
		t.Fatalf("want two problems, got %v", ps)
	}
}

// TestRegionIsTheSchemasRule: the region's form is the schema's one rule,
// and it takes the EU sovereign cloud's regions.
func TestRegionIsTheSchemasRule(t *testing.T) {
	cfg := validConfig()
	cfg.Region = "eusc-de-east-1"
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, err := s3sinkconfig.Load(map[string]any{"bucket": "picomq-archive", "region": "eusc-de-east-1"}, envPrefix, noEnv); err != nil {
		t.Fatal(err)
	}
}

// TestPathStyleIsTheSchemasRule: with an endpoint, path-style addressing is
// the default, and path_style = false is kept as written.
func TestPathStyleIsTheSchemasRule(t *testing.T) {
	for _, c := range []struct {
		raw  map[string]any
		want bool
	}{
		{map[string]any{}, false},
		{map[string]any{"endpoint": "http://127.0.0.1:9000"}, true},
		{map[string]any{"endpoint": "http://127.0.0.1:9000", "path_style": false}, false},
	} {
		c.raw["bucket"], c.raw["region"] = "picomq-archive", "eu-west-1"
		cfg, err := s3sinkconfig.Load(c.raw, envPrefix, noEnv)
		if err != nil {
			t.Fatal(err)
		}
		if o := fromConfig(cfg); o.PathStyle != c.want {
			t.Errorf("%v: path style %v, want %v", c.raw, o.PathStyle, c.want)
		}
	}
}
