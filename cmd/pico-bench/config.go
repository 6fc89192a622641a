package main

import (
	"time"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

// s3Doc is a full S3 plugin_config as the TOML decoder hands it over.
func s3Doc() map[string]any {
	return map[string]any{
		"bucket": "picomq-archive", "region": "eu-west-1", "prefix": "raw", "endpoint": "http://127.0.0.1:9000",
		"access_key_id": "AKIA", "secret_access_key": "secret", "path_template": "{topic}/{date}/{hour}",
		"file_rotation": "messages", "max_file_size": "64MiB", "max_messages_per_file": int64(10000),
		"output_format": "jsonl", "include_metadata": true, "include_headers": false, "max_retries": int64(5),
		"retry_delay": "500ms", "path_style": true,
	}
}

// configRows times the generated Load (env overrides, aliases, JSON Schema
// check, typed decode, cross-key rules) against validating the same
// document with santhosh-tekuri/jsonschema alone, in alternating rounds.
func (b *bench) configRows() []row {
	s, err := confgen.CompileSchema("s3_sink", s3sinkconfig.Schema)
	b.must(err)
	doc := s3Doc()
	plain := s3Doc()
	plain["max_attempts"] = plain["max_retries"]
	delete(plain, "max_retries")
	plain["output_format"] = "json_lines"
	env := func(string) (string, bool) { return "", false }
	const round = 200
	var loadT, schemaT time.Duration
	n := 0
	b.logf("config: generated Load vs santhosh-tekuri Validate, 2 s")
	for stop := time.Now().Add(2 * time.Second); time.Now().Before(stop); n += round {
		t0 := time.Now()
		for j := 0; j < round; j++ {
			if _, err := s3sinkconfig.Load(doc, "PICOMQ_CONNECTORS_SINK_ORDERS_S3_PLUGIN_CONFIG_", env); err != nil {
				b.must(err)
			}
		}
		t1 := time.Now()
		for j := 0; j < round; j++ {
			b.must(s.Validate(plain))
		}
		loadT += t1.Sub(t0)
		schemaT += time.Since(t1)
	}
	load, schema := float64(n)/loadT.Seconds(), float64(n)/schemaT.Seconds()
	return []row{{
		Name: "Config decode+validate (generated s3sinkconfig.Load)", Value: load, Unit: "loads/s",
		BaseName: "santhosh-tekuri Validate alone", BaseValue: schema, BaseUnit: "validations/s",
		Ratio: load / schema, Note: "Load also applies env overrides, aliases, defaults, typed decode",
	}}
}
