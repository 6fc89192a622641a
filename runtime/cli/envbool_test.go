package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestOneBooleanRule sets booleans through the environment for a
// definition key (enabled), a [[topics]] key (create_topics) and a
// plugin_config key (the S3 sink's include_headers): every spelling reads
// the same for all three, and a bad one is refused by all three with the
// same words. One parser, confgen.EnvValue, reads them all.
func TestOneBooleanRule(t *testing.T) {
	source := `type = "source"
key = "gen"
path = "libpicomq_connector_random_source"

[[topics]]
topic = "numbers"
`
	sink := `type = "sink"
key = "lake"
path = "libpicomq_connector_s3_sink"

[[topics]]
topic = "numbers"

[plugin_config]
bucket = "lake-bucket"
region = "us-east-1"
`
	path := setup(t, "", map[string]string{"gen.toml": source, "lake.toml": sink})
	vars := func(v string) []string {
		return []string{
			"PICOMQ_CONNECTORS_SOURCE_GEN_ENABLED=" + v,
			"PICOMQ_CONNECTORS_SOURCE_GEN_TOPICS_0_CREATE_TOPICS=" + v,
			"PICOMQ_CONNECTORS_SINK_LAKE_PLUGIN_CONFIG_INCLUDE_HEADERS=" + v,
		}
	}
	effective := func(env []string, key string) map[string]any {
		t.Helper()
		var out, errOut bytes.Buffer
		if code := Main([]string{"config", "--config", path, key, "--json"}, &out, &errOut, env); code != 0 {
			t.Fatalf("config %s with %q: exit %d\n%s", key, env, code, errOut.String())
		}
		var m map[string]any
		if err := json.Unmarshal(out.Bytes(), &m); err != nil {
			t.Fatalf("config %s --json: %v\n%s", key, err, out.String())
		}
		return m
	}
	for _, c := range []struct {
		text string
		want bool
	}{{"true", true}, {"TRUE", true}, {"t", true}, {"1", true}, {"yes", true}, {"on", true}, {" On ", true},
		{"false", false}, {"F", false}, {"0", false}, {"no", false}, {"off", false}} {
		env := vars(c.text)
		src, lake := effective(env, "source/gen"), effective(env, "sink/lake")
		createTopics, ok := src["topics"].([]any)[0].(map[string]any)["create_topics"]
		if !ok {
			createTopics = false // the view leaves out create_topics = false
		}
		got := []any{src["enabled"], createTopics, lake["plugin_config"].(map[string]any)["include_headers"]}
		for i, g := range got {
			if g != c.want {
				t.Errorf("%q: %s reads %v, want %v", c.text, strings.Split(env[i], "=")[0], g, c.want)
			}
		}
	}

	var out, errOut bytes.Buffer
	if code := Main([]string{"validate", "--config", path}, &out, &errOut, vars("maybe")); code != 1 {
		t.Fatalf("validate with \"maybe\" booleans: exit %d\n%s%s", code, out.String(), errOut.String())
	}
	for _, v := range vars("maybe") {
		name := strings.Split(v, "=")[0]
		if want := fmt.Sprintf(`environment variable %s = "maybe" is not a boolean; use true or false`, name); !strings.Contains(out.String()+errOut.String(), want) {
			t.Errorf("validate does not say %q:\n%s%s", want, out.String(), errOut.String())
		}
	}
}
