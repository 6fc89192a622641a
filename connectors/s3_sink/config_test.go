package s3sink

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

const envPrefix = "PICOMQ_CONNECTORS_SINK_ORDERS_S3_PLUGIN_CONFIG_"

func noEnv(string) (string, bool) { return "", false }

func TestRegistered(t *testing.T) {
	r, ok := sdk.Lookup("libpicomq_connector_s3_sink")
	if !ok || r.Kind != sdk.KindSink || r.NewSink == nil {
		t.Fatalf("registration = %+v, %v", r, ok)
	}
}

// TestRegisteredLoadChecksColumns: the registration's Load (what validate
// runs) applies the column rules the schema cannot state, not only Open.
func TestRegisteredLoadChecksColumns(t *testing.T) {
	reg, _ := sdk.Lookup(s3sinkconfig.Path)
	_, err := reg.Load(map[string]any{"bucket": "picomq-archive", "region": "eu-west-1", "output_format": "parquet",
		"columns": []map[string]any{{"name": "amount", "type": "decimal", "precision": int64(4), "scale": int64(5)}},
	}, envPrefix, noEnv)
	if err == nil || !strings.Contains(err.Error(), "columns[0].scale (5) must be 0 to precision (4)") {
		t.Fatalf("Load = %v; want the decimal column's scale refused", err)
	}
}

func TestFromConfigDefaults(t *testing.T) {
	cfg, err := s3sinkconfig.Load(map[string]any{"bucket": "picomq-archive", "region": "eu-west-1"}, envPrefix, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := s3sinkconfig.Default()
	want.Bucket, want.Region = "picomq-archive", "eu-west-1"
	if !reflect.DeepEqual(cfg, want) {
		t.Fatalf("Load of the required keys = %+v\nDefault() = %+v", cfg, want)
	}
	o := fromConfig(cfg)
	if o.PathTemplate.Source != "{topic}/{date}/{hour}" || len(o.PathTemplate.Parts) != 5 {
		t.Fatalf("template = %+v", o.PathTemplate)
	}
	if o.ParquetCodec != "snappy" || o.MaxFileSize != 8<<20 || o.Format != formatJSONLines || !o.IncludeMetadata || o.IncludeHeaders ||
		o.MaxAttempts != 3 || o.RetryDelay != time.Second || o.RotateByMessages || o.PathStyle || o.Buffered || o.MaxBufferSize != 256<<20 || o.MaxInFlight != 4 || o.Compression != compressNone {
		t.Fatalf("options = %+v", o)
	}
}

func TestFromConfigEverything(t *testing.T) {
	raw := map[string]any{
		"bucket": "picomq-archive", "region": "garage", "prefix": "/raw/", "endpoint": "http://127.0.0.1:9000",
		"access_key_id": "AKIAEXAMPLE", "path_template": "{topic_segment[-1]}/{date}",
		"file_rotation": "messages", "max_messages_per_file": 10, "max_file_size": "10MB",
		"output_format": "jsonl", "include_metadata": false, "include_headers": true,
		"max_retries": 5, "retry_delay": "250ms",
	}
	env := func(name string) (string, bool) {
		if name == envPrefix+"SECRET_ACCESS_KEY" {
			return "from-env-secret", true
		}
		return "", false
	}
	cfg, err := s3sinkconfig.Load(raw, envPrefix, env)
	if err != nil {
		t.Fatal(err)
	}
	o := fromConfig(cfg)
	if o.SecretAccessKey != "from-env-secret" || o.AccessKeyID != "AKIAEXAMPLE" || !o.RotateByMessages || o.MaxMessages != 10 ||
		o.MaxFileSize != 10_000_000 || o.Format != formatJSONLines || o.IncludeMetadata || !o.IncludeHeaders ||
		o.MaxAttempts != 5 || o.RetryDelay != 250*time.Millisecond || !o.PathStyle {
		t.Fatalf("options = %+v", o)
	}
	if o.PathTemplate.Parts[0] != (templatePart{Name: "topic_segment", Arg: -1, HasArg: true}) {
		t.Fatalf("template = %+v", o.PathTemplate)
	}
	if err := o.validate(); err != nil {
		t.Fatal(err)
	}
	s := newSink(o, sdktest.Env(t))
	if s.opts.Prefix != "raw" {
		t.Fatalf("prefix %q", s.opts.Prefix)
	}
	if red := fmt.Sprint(cfg.Redacted()); strings.Contains(red, "from-env") || strings.Contains(fmt.Sprint(cfg), "from-env") {
		t.Fatal("secret not redacted")
	}
}

// TestTroubleshootingThroughLoad checks that the configuration rows of the
// Troubleshooting table show their message when the definition is loaded.
func TestTroubleshootingThroughLoad(t *testing.T) {
	base := func() map[string]any { return map[string]any{"bucket": "picomq-archive", "region": "eu-west-1"} }
	cases := []struct {
		name string
		mod  func(map[string]any)
		want string
	}{
		{"partial credentials, access key only", func(m map[string]any) { m["access_key_id"] = "AKIA" },
			"Partially configured credentials: access_key_id is set but secret_access_key is not"},
		{"partial credentials, secret only", func(m map[string]any) { m["secret_access_key"] = "s" },
			"Partially configured credentials: secret_access_key is set but access_key_id is not"},
		{"invalid region", func(m map[string]any) { m["region"] = "europe" }, "Invalid S3 region 'europe'"},
		{"messages without max", func(m map[string]any) { m["file_rotation"] = "messages" },
			"file_rotation is 'messages' but max_messages_per_file is not configured"},
		{"too large", func(m map[string]any) { m["max_file_size"] = "6TiB" }, "max_file_size (6TiB) exceeds S3's largest object of 5 TiB"},
		{"too many parts", func(m map[string]any) { m["max_file_size"] = "200GiB" },
			"max_file_size (200GiB) needs more than S3's 10,000 parts of part_size (16MiB): raise part_size to at least 21MiB or lower max_file_size to at most 160000MiB"},
	}
	reg, _ := sdk.Lookup(s3sinkconfig.Path) // Load with the rules the schema cannot state, as validate runs it
	for _, c := range cases {
		m := base()
		c.mod(m)
		_, err := reg.Load(m, envPrefix, noEnv)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}

// TestQuickStartAgainstServer builds the sink the way the runtime does,
// through the registration, and runs it against a real server.
func TestQuickStartAgainstServer(t *testing.T) {
	srv := s3test.Start(t)
	reg, _ := sdk.Lookup(s3sinkconfig.Path)
	cfg, err := reg.Load(map[string]any{
		"bucket": srv.Bucket, "region": s3test.Region, "endpoint": srv.Endpoint, "prefix": "raw",
		"path_template": "{topic}/{date}/{hour}", "max_file_size": "64MiB", "output_format": "json_lines",
		"access_key_id": srv.AccessKey, "secret_access_key": srv.SecretKey,
	}, envPrefix, noEnv)
	if err != nil {
		t.Fatal(err)
	}
	sink, err := reg.NewSink(cfg, sdktest.Env(t))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := sink.Open(ctx); err != nil {
		t.Fatal(err)
	}
	if err := sink.Consume(ctx, records("orders.eu", 1000, 3)); err != nil {
		t.Fatal(err)
	}
	if err := sink.Close(ctx); err != nil {
		t.Fatal(err)
	}
	k := "raw/orders.eu/2026-09-03/21/00000-00000000000000001000-00000000000000001002.jsonl"
	if keys := srv.Keys(t); len(keys) != 1 || keys[0] != k {
		t.Fatalf("keys = %v", keys)
	}
	if got := string(srv.MustGet(t, k)); got != lines("orders.eu", 1000, 3) {
		t.Fatalf("body = %s", got)
	}
}
