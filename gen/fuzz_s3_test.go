package gen_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/generated/s3sinkconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
)

// FuzzS3Load feeds arbitrary plugin_config tables (as JSON) and env values
// to the generated Load: it must never panic, must return Problems on
// failure, and must never put the secret's value in an error.
func FuzzS3Load(f *testing.F) {
	f.Add(`{"bucket": "abc", "region": "eu-west-1"}`, "")
	f.Add(`{"bucket": "abc", "region": "x", "max_file_size": "6GiB", "file_rotation": "messages"}`, "lots")
	f.Add(`{"bucket": 1, "region": [], "max_retries": {}, "path_template": "{", "retry_delay": -1}`, "[1,")
	f.Add(`{"bucket": "abc", "region": "eu-west-1", "output_format": "jsonl", "max_file_size": 1e30}`, "true")
	f.Fuzz(func(t *testing.T, doc, envValue string) {
		var raw map[string]any
		if json.Unmarshal([]byte(doc), &raw) != nil {
			return
		}
		const secret = "ZZSECRETZZ"
		raw["secret_access_key"] = secret
		env := func(k string) (string, bool) {
			if strings.HasSuffix(k, "MAX_ATTEMPTS") || strings.HasSuffix(k, "INCLUDE_HEADERS") || strings.HasSuffix(k, "MAX_FILE_SIZE") {
				return envValue, envValue != ""
			}
			return "", false
		}
		c, err := s3sinkconfig.Load(raw, "P_", env)
		if err != nil {
			if _, ok := confkit.AsProblems(err); !ok {
				t.Fatalf("error is not Problems: %v", err)
			}
			if strings.Contains(err.Error(), secret) {
				t.Fatalf("secret in error: %v", err)
			}
			return
		}
		if c.MaxFileSize <= 0 || c.MaxFileSize > 5*confkit.GiB || c.MaxAttempts < 1 || c.Bucket == "" {
			t.Fatalf("accepted an invalid config: %+v", c)
		}
	})
}
