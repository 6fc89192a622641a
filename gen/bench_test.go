package gen_test

import (
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

// benchDoc is a full S3 plugin_config as the TOML decoder hands it over.
func benchDoc() map[string]any {
	return map[string]any{
		"bucket": "picomq-archive", "region": "eu-west-1", "prefix": "raw", "endpoint": "http://127.0.0.1:9000",
		"access_key_id": "AKIA", "secret_access_key": "secret", "path_template": "{topic}/{date}/{hour}",
		"file_rotation": "messages", "max_file_size": "64MiB", "max_messages_per_file": int64(10000),
		"output_format": "jsonl", "include_metadata": true, "include_headers": false, "max_retries": int64(5),
		"retry_delay": "500ms", "path_style": true,
	}
}

// BenchmarkS3Load is the generated path: env lookup, aliases, the JSON
// Schema check, typed decode with defaults and the cross-key rules.
func BenchmarkS3Load(b *testing.B) {
	doc := benchDoc()
	env := func(string) (string, bool) { return "", false }
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s3sinkconfig.Load(doc, "PICOMQ_CONNECTORS_SINK_ORDERS_S3_PLUGIN_CONFIG_", env); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkS3SchemaOnly is the baseline: validating the same document
// with santhosh-tekuri/jsonschema alone (aliases resolved beforehand, since
// the schema alone does not know them; no typed result).
func BenchmarkS3SchemaOnly(b *testing.B) {
	s, err := confgen.CompileSchema("s3_sink", s3sinkconfig.Schema)
	if err != nil {
		b.Fatal(err)
	}
	doc := benchDoc()
	doc["max_attempts"] = doc["max_retries"]
	delete(doc, "max_retries")
	doc["output_format"] = "json_lines"
	b.ReportAllocs()
	for b.Loop() {
		if err := s.Validate(doc); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkS3LoadVsSchemaOnly runs both paths in alternating rounds, so a
// busy machine slows both alike, and reports generated/baseline as "ratio".
func BenchmarkS3LoadVsSchemaOnly(b *testing.B) {
	s, err := confgen.CompileSchema("s3_sink", s3sinkconfig.Schema)
	if err != nil {
		b.Fatal(err)
	}
	doc := benchDoc()
	plain := benchDoc()
	plain["max_attempts"] = plain["max_retries"]
	delete(plain, "max_retries")
	plain["output_format"] = "json_lines"
	var loadNs, schemaNs int64
	const round = 50
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := nowNs()
		for j := 0; j < round; j++ {
			if _, err := s3sinkconfig.Load(doc, "P_", nil); err != nil {
				b.Fatal(err)
			}
		}
		t1 := nowNs()
		for j := 0; j < round; j++ {
			if err := s.Validate(plain); err != nil {
				b.Fatal(err)
			}
		}
		t2 := nowNs()
		loadNs += t1 - t0
		schemaNs += t2 - t1
	}
	b.ReportMetric(float64(loadNs)/float64(b.N*round), "load-ns/op")
	b.ReportMetric(float64(schemaNs)/float64(b.N*round), "schema-ns/op")
	b.ReportMetric(float64(loadNs)/float64(schemaNs), "ratio")
}

func nowNs() int64 { return time.Now().UnixNano() }
