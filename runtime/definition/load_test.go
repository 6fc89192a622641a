package definition

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

type testConfig struct{ raw map[string]any }

func (c testConfig) Redacted() map[string]any {
	out := map[string]any{}
	for k, v := range c.raw {
		if k == "password" {
			v = confkit.Mask
		}
		out[k] = v
	}
	return out
}

// testLoad accepts keys "bucket" (string) and "password"; env overrides
// prefix+BUCKET.
func testLoad(raw map[string]any, prefix string, env sdk.LookupEnv) (sdk.Config, error) {
	out := map[string]any{}
	var errs []error
	for k, v := range raw {
		switch k {
		case "bucket", "password", "field":
			out[k] = v
		default:
			errs = append(errs, fmt.Errorf("%s: unknown key", k))
		}
	}
	if v, ok := env(prefix + "BUCKET"); ok {
		out["bucket"] = v
	}
	return testConfig{out}, errors.Join(errs...)
}

func init() {
	sdk.Register(sdk.Registration{Name: "test_sink", Path: "libpicomq_connector_test_sink", Kind: sdk.KindSink, Load: testLoad})
	sdk.Register(sdk.Registration{Name: "test_source", Path: "libpicomq_connector_test_source", Kind: sdk.KindSource, Load: testLoad})
	sdk.Register(sdk.Registration{Name: "add_fields", Path: "add_fields", Kind: sdk.KindTransform, Load: testLoad})
}

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "runtime.toml")
}

const goodSink = `type = "sink"
key = "orders_s3"
version = 0
name = "Orders"
path = "libpicomq_connector_test_sink"

[[topics]]
pattern = 'orders\..*'
batch_length = 10
[topics.properties]
"fetch.min.bytes" = 1

[plugin_config]
bucket = "b"
password = "hunter2"
`

const goodSource = `type = "source"
key = "gen"
enabled = false
path = "libpicomq_connector_test_source"

[[topics]]
topic = { strategy = "field", path = "tenant", template = "orders.{value}" }
linger_time = "1ms"

[transforms.add_fields]
field = "x"

[plugin_config]
bucket = "c"
`

func TestLoadGood(t *testing.T) {
	path := writeFiles(t, map[string]string{
		"runtime.toml":         "[state]\npath = \"st\"\n[http]\napi_key = \"k\"\n",
		"connectors/a.toml":    goodSink,
		"connectors/b.toml":    goodSource,
		"connectors/notes.txt": "ignored",
	})
	env := map[string]string{
		"PICOMQ_CONNECTORS_BROKER_BOOTSTRAP_SERVERS":                           "127.0.0.1:1",
		"PICOMQ_CONNECTORS_BROKER_PROPERTIES_LINGER_MS":                        "7",
		"PICOMQ_CONNECTORS_STATE_HTTP_MAX_ATTEMPTS":                            "9",
		"PICOMQ_CONNECTORS_SINK_ORDERS_S3_TOPICS_0_BATCH_LENGTH":               "20",
		"PICOMQ_CONNECTORS_SINK_ORDERS_S3_TOPICS_0_PROPERTIES_FETCH_MIN_BYTES": "2",
		"PICOMQ_CONNECTORS_SINK_ORDERS_S3_TOPICS_1_TOPIC":                      "extra",
		"PICOMQ_CONNECTORS_SINK_ORDERS_S3_PLUGIN_CONFIG_BUCKET":                "from-env",
		"PICOMQ_CONNECTORS_SOURCE_GEN_ENABLED":                                 "true",
		"PICOMQ_CONNECTORS_SOURCE_GEN_TOPICS_0_TOPIC_FALLBACK":                 "orders.unrouted",
		"PICOMQ_CONNECTORS_SOURCE_GEN_TRANSFORMS_ADD_FIELDS_BUCKET":            "tb",
		"UNRELATED": "x",
	}
	cfg, err := Load(path, env)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	r := cfg.Runtime
	if r.Broker.BootstrapServers != "127.0.0.1:1" || r.Broker.Properties["linger.ms"] != "7" || r.State.HTTP.MaxAttempts != 9 || r.State.Path != "st" || r.HTTP.Address != DefaultHTTPAddress {
		t.Errorf("runtime = %+v", r)
	}
	if len(cfg.Connectors) != 2 {
		t.Fatalf("connectors = %d", len(cfg.Connectors))
	}
	sink, ok := cfg.Find("sink", "orders_s3")
	if !ok {
		t.Fatal("sink not found")
	}
	if !sink.Enabled || len(sink.Topics) != 2 || sink.Topics[0].BatchLength != 20 || sink.Topics[1].Topic.Literal != "extra" ||
		sink.Topics[0].Properties["fetch.min.bytes"] != "2" || sink.Topics[1].BatchLength != DefaultBatchLength || sink.Topics[0].PollInterval != DefaultPollInterval {
		t.Errorf("sink = %+v", sink.Connector)
	}
	if got := sink.Plugin.Redacted(); got["bucket"] != "from-env" || got["password"] != confkit.Mask {
		t.Errorf("plugin = %v", got)
	}
	src, _ := cfg.Find("source", "gen")
	if !src.Enabled || src.Topics[0].Topic.Strategy != "field" || src.Topics[0].Topic.Fallback != "orders.unrouted" || src.Topics[0].Partitions != 1 {
		t.Errorf("source = %+v", src.Connector)
	}
	if len(src.Transforms) != 1 || src.Transforms[0].Type != "add_fields" || src.Transforms[0].Config.Redacted()["bucket"] != "tb" {
		t.Errorf("transforms = %+v", src.Transforms)
	}
	red := r.Redacted()
	if red["http"].(map[string]any)["api_key"] != confkit.Mask {
		t.Errorf("api key not masked: %v", red)
	}
}

func TestLoadProblems(t *testing.T) {
	path := writeFiles(t, map[string]string{
		"runtime.toml": "shutdown_grce = \"1s\"\n[log]\nformat = \"xml\"\n",
		"connectors/a.toml": `type = "sink"
key = "a"
enabled = "yes"
path = "libpicomq_connector_test_snk"
[[topics]]
pattern = "orders(("
poll_interval = "soon"
`,
		"connectors/b.toml": `type = "source"
key = "b"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "t"
partitions = 3
[plugin_config]
nope = 1
`,
		"connectors/c.toml": `type = "source"
key = "b"
[[topics]]
topic = "t"
`,
		"connectors/bad.toml": "type = \n",
		"connectors/d.toml": `type = "source"
key = "d"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "t"
batch_length = 2000000
linger_time = "1000h"
`,
		"connectors/e.toml": `type = "sink"
key = "e"
path = "libpicomq_connector_test_sink"
[[topics]]
topic = "t"
batch_length = 1000000000
`,
	})
	env := map[string]string{
		"PICOMQ_CONNECTORS_SOURCE_B_TOPICS_0_BATCH_LENGTH": "many",
		"PICOMQ_CONNECTORS_SOURCE_B_ENABLD":                "true",
		"PICOMQ_CONNECTORS_SINK_ZZZ_ENABLED":               "true",
	}
	_, err := Load(path, env)
	var ps confkit.Problems
	if !errors.As(err, &ps) {
		t.Fatalf("err = %v", err)
	}
	text := err.Error()
	t.Log("\n" + text)
	for _, want := range []string{
		`runtime.toml: shutdown_grce: unknown top-level key "shutdown_grce" (did you mean "shutdown_grace"?)`,
		`runtime.toml: log.format: "xml" is not allowed; use "text" or "json"`,
		`a.toml: enabled: expected a boolean (true or false), got a string ("yes")`,
		`a.toml: path: unknown plugin "libpicomq_connector_test_snk" (did you mean "libpicomq_connector_test_sink"?)`,
		`a.toml: topics[0].pattern: "orders((" is not a valid regular expression`,
		`a.toml: topics[0].poll_interval: "soon" is not a duration`,
		`b.toml: topics[0].partitions: partitions = 3 is not supported: PicoMQ topics have one partition; set partitions = 1 or remove it`,
		`b.toml: topics[0].batch_length: environment variable PICOMQ_CONNECTORS_SOURCE_B_TOPICS_0_BATCH_LENGTH = "many" is not an integer`,
		`b.toml: plugin_config: nope: unknown key`,
		`b.toml: environment variable PICOMQ_CONNECTORS_SOURCE_B_ENABLD matches no key of this definition (did you mean "PICOMQ_CONNECTORS_SOURCE_B_ENABLED"?)`,
		`c.toml: path: missing`,
		`c.toml: key: source key "b" is already used by`,
		`bad.toml: line 1 (type): expected value`,
		`d.toml: topics[0].batch_length: 2000000: must be 1 to 1000000`,
		`d.toml: topics[0].linger_time: "1000h" is too long; use at most 15m`,
		`e.toml: topics[0].batch_length: 1000000000: must be 1 to 1000000`,
		`environment variable PICOMQ_CONNECTORS_SINK_ZZZ_ENABLED names no sink definition`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing problem %q", want)
		}
	}
}

func TestRouteUnmarshalTOML(t *testing.T) {
	var r Route
	if err := r.UnmarshalTOML("orders"); err != nil || r.Literal != "orders" {
		t.Fatalf("%v %+v", err, r)
	}
	if err := r.UnmarshalTOML(map[string]any{"strategy": "key", "template": "t.{value}"}); err != nil || r.Strategy != "key" || r.IsZero() || !r.IsRule() {
		t.Fatalf("%v %+v", err, r)
	}
	if err := r.UnmarshalTOML(map[string]any{"stratgy": "key"}); err == nil || !strings.Contains(err.Error(), `did you mean "strategy"`) {
		t.Fatalf("err = %v", err)
	}
	b, _ := Route{Literal: "x"}.MarshalJSON()
	if string(b) != `"x"` {
		t.Fatal(string(b))
	}
}

func TestVariables(t *testing.T) {
	names := map[string]bool{}
	for _, v := range append(RuntimeVariables(), ConnectorVariables()...) {
		names[v.Name] = true
	}
	for _, want := range []string{
		"PICOMQ_CONNECTORS_BROKER_BOOTSTRAP_SERVERS", "PICOMQ_CONNECTORS_STATE_HTTP_URL", "PICOMQ_CONNECTORS_CONNECTORS_DIR",
		"PICOMQ_CONNECTORS_HTTP_API_KEY", "PICOMQ_CONNECTORS_{T}_{KEY}_ENABLED", "PICOMQ_CONNECTORS_{T}_{KEY}_TOPICS_{i}_LINGER_TIME",
		"PICOMQ_CONNECTORS_{T}_{KEY}_TOPICS_{i}_TOPIC_STRATEGY", "PICOMQ_CONNECTORS_BROKER_PROPERTIES_{NAME}",
	} {
		if !names[want] {
			t.Errorf("missing %s", want)
		}
	}
}

func TestLoadRoutesTransformsAndKinds(t *testing.T) {
	path := writeFiles(t, map[string]string{
		"runtime.toml": "",
		"connectors/a.toml": `type = "source"
key = "a"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "plain"
[[transforms]]
type = "add_fields"
field = "x"
[[transforms]]
type = "add_feilds"
`,
		"connectors/b.toml": `type = "source"
key = "b"
path = "libpicomq_connector_test_sink"
[[topics]]
topic = { strategy = "header", template = "t.{value}", colour = "red" }
pattern = "x"
`,
		"connectors/c.toml": `type = "sink"
key = "c"
path = "libpicomq_connector_test_sink"
[[topics]]
topic = { strategy = "key", template = "t.{value}" }
linger_time = "5ms"
`,
	})
	env := map[string]string{
		"PICOMQ_CONNECTORS_SOURCE_A_TOPICS_0_TOPIC":       `{"strategy":"field","path":"tenant","template":"orders.{value}","fallback":"orders.other"}`,
		"PICOMQ_CONNECTORS_SOURCE_A_TRANSFORMS_0_ENABLED": "false",
		"PICOMQ_CONNECTORS_SOURCE_A_TRANSFORMS_0_BUCKET":  "tb",
	}
	cfg, err := Load(path, env)
	text := fmt.Sprint(err)
	t.Log("\n" + text)
	for _, want := range []string{
		`a.toml: transforms[1].type: unknown transform "add_feilds" (did you mean "add_fields"?)`,
		`b.toml: path: "libpicomq_connector_test_sink" is a sink plugin, but type = "source"`,
		`b.toml: topics[0].topic.colour: unknown key "colour" in a routing rule`,
		`b.toml: topics[0].topic.path: missing: strategy = "header" needs the header to route by`,
		`b.toml: topics[0].pattern: pattern is a sink setting`,
		`c.toml: topics[0].linger_time: linger_time is a source setting; remove it from this sink`,
		`c.toml: topics[0].topic: a sink consumes a literal topic or a pattern; routing rules are for sources`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing %q", want)
		}
	}
	a, _ := cfg.Find("source", "a")
	if r := a.Topics[0].Topic; r.Strategy != "field" || r.Path != "tenant" || r.Fallback != "orders.other" || r.Literal != "" {
		t.Errorf("route from env = %+v", r)
	}
	if len(a.Transforms) != 2 || a.Transforms[0].Enabled || a.Transforms[0].Config == nil || a.Transforms[0].Config.Redacted()["bucket"] != "tb" {
		t.Errorf("transforms = %+v", a.Transforms)
	}
}

func TestLoadChecksAvroSchemas(t *testing.T) {
	path := writeFiles(t, map[string]string{
		"runtime.toml": "",
		"connectors/inline.toml": `type = "source"
key = "inline"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "t"
schema = "avro"
avro_schema_json = "{not json"
`,
		"connectors/file.toml": `type = "source"
key = "file"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "t"
schema = "avro"
avro_schema_path = "schemas/missing.avsc"
`,
		"connectors/good.toml": `type = "source"
key = "good"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "t"
schema = "avro"
avro_schema_path = "order.avsc"
`,
		"connectors/order.avsc": `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"}]}`,
	})
	_, err := Load(path, nil)
	if err == nil {
		t.Fatal("Load accepted an Avro schema that does not parse and one that does not exist")
	}
	text := err.Error()
	for _, want := range []string{
		`inline.toml: topics[0]: avro_schema_json: not a valid Avro schema`,
		`file.toml: topics[0]: avro_schema_path "schemas/missing.avsc": open`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing problem %q in:\n%s", want, text)
		}
	}
	if strings.Contains(text, "good.toml") {
		t.Errorf("a valid Avro schema file, relative to the definition, was refused:\n%s", text)
	}
}

func TestLoadRefusesInvalidUTF8Overrides(t *testing.T) {
	path := writeFiles(t, map[string]string{
		"runtime.toml": "",
		"connectors/a.toml": `type = "source"
key = "a"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "t"
`,
	})
	env := map[string]string{
		"PICOMQ_CONNECTORS_SOURCE_A_NAME":           "bad \xff name",
		"PICOMQ_CONNECTORS_SOURCE_A_TOPICS_0_TOPIC": "t\xfe",
	}
	_, err := Load(path, env)
	if err == nil {
		t.Fatal("Load accepted environment values that are not UTF-8")
	}
	for _, v := range []string{"PICOMQ_CONNECTORS_SOURCE_A_NAME", "PICOMQ_CONNECTORS_SOURCE_A_TOPICS_0_TOPIC"} {
		if !strings.Contains(err.Error(), "environment variable "+v+" is not valid UTF-8 text") {
			t.Errorf("no problem names %s:\n%v", v, err)
		}
	}
}

// TestLoadRefusesUnsafeProducersAndDeadLetters: properties that would void
// the delivery promise, dead-letter topics a block writes or reads itself,
// and a data_dir or state.path that is a file are each a problem naming the key.
func TestLoadRefusesUnsafeProducersAndDeadLetters(t *testing.T) {
	path := writeFiles(t, map[string]string{
		"runtime.toml": "[state]\npath = \"runtime.toml\"\n[broker]\ndata_dir = \"runtime.toml/sub\"\n[broker.properties]\nacks = \"0\"\n\"max.in.flight.requests.per.connection\" = \"6\"\n",
		"connectors/a.toml": `type = "sink"
key = "a"
path = "libpicomq_connector_test_sink"
[[topics]]
pattern = 'orders\..*'
dead_letter_topic = "orders.dlq"
[[topics]]
topic = "t"
dead_letter_topic = "t"
[plugin_config]
`,
		"connectors/b.toml": `type = "source"
key = "b"
path = "libpicomq_connector_test_source"
[[topics]]
topic = "t"
dead_letter_topic = "bad name"
[topics.properties]
"enable.idempotence" = "false"
"request.required.acks" = "1"
"acks" = "all"
[plugin_config]
`,
	})
	_, err := Load(path, map[string]string{"PICOMQ_CONNECTORS_SOURCE_B_TOPICS_0_PROPERTIES_MAX_IN_FLIGHT": "10"})
	if err == nil {
		t.Fatal("loaded")
	}
	text := err.Error()
	t.Log("\n" + text)
	for _, want := range []string{
		`runtime.toml: broker.data_dir: "runtime.toml/sub":`,
		`is a file, not a folder; name a folder for the embedded broker's data`,
		`runtime.toml: state.path: "runtime.toml":`,
		`is a file, not a folder; name a folder for the checkpoints`,
		`runtime.toml: broker.properties.acks: the runtime produces with acks=all`,
		`runtime.toml: broker.properties."max.in.flight.requests.per.connection": "6": an idempotent producer keeps records in order only with 1 to 5`,
		`a.toml: topics[0].dead_letter_topic: "orders.dlq" matches this block's pattern`,
		`a.toml: topics[1].dead_letter_topic: "t" is the topic this block consumes`,
		`b.toml: topics[0].dead_letter_topic: "bad name" contains ' '`,
		`b.toml: topics[0].properties."enable.idempotence": `,
		`(from environment variable PICOMQ_CONNECTORS_SOURCE_B_TOPICS_0_PROPERTIES_MAX_IN_FLIGHT)`,
		`b.toml: topics[0].properties."request.required.acks": `,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("missing problem %q", want)
		}
	}
	if strings.Contains(text, "b.toml: topics[0].properties.acks") {
		t.Errorf("acks = all refused:\n%s", text)
	}
	for k, v := range map[string]string{"acks": "-1", "enable.idempotence": "true", "max.in.flight": "5", "linger.ms": "0"} {
		if msg := WeakensProducer(k, v); msg != "" {
			t.Errorf("%s=%s refused: %s", k, v, msg)
		}
	}
}

// CheckSinkTarget is the one statement of a sink block's pattern-or-topic
// rule, for blocks Load reads and for blocks built in code.
func TestCheckSinkTarget(t *testing.T) {
	for _, c := range []struct {
		name string
		t    Topics
		want string // "" for no problem
	}{
		{"pattern", Topics{Pattern: `orders\..*`}, ""},
		{"topic", Topics{Topic: Route{Literal: "orders"}}, ""},
		{"neither", Topics{}, "topics[2]: missing: set pattern"},
		{"both", Topics{Pattern: "a.*", Topic: Route{Literal: "a"}}, "topics[2]: set either pattern or topic, not both"},
		{"rule", Topics{Topic: Route{Strategy: "key", Template: "t.{value}"}}, "topics[2].topic: a sink consumes a literal topic or a pattern"},
		{"bad pattern", Topics{Pattern: "orders(("}, `topics[2].pattern: "orders((" is not a valid regular expression: missing closing )`},
		{"bad topic name", Topics{Topic: Route{Literal: "a b"}}, `topics[2].topic: "a b" contains ' '`},
	} {
		err := c.t.CheckSinkTarget("topics[2]")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v", c.name, err)
		case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
			t.Errorf("%s: %v, want %q...", c.name, err, c.want)
		}
		var p confkit.Problem
		if err != nil && !errors.As(err, &p) {
			t.Errorf("%s: %T is not a confkit.Problem", c.name, err)
		}
	}
}

// Route.Check is the one statement of a source's routing rules, for routes
// Load reads and for routes built in code.
func TestRouteCheck(t *testing.T) {
	for _, c := range []struct {
		name string
		r    Route
		want []string // problems, "" for none
	}{
		{"literal", Route{Literal: "orders"}, nil},
		{"field rule", Route{Strategy: "field", Path: "$.customer.region", Template: "orders.{value}", Fallback: "orders.other"}, nil},
		{"key rule", Route{Strategy: "key", Template: "t.{value}"}, nil},
		{"missing", Route{}, []string{"topics[0].topic: missing: set topic"}},
		{"literal and rule", Route{Literal: "a", Strategy: "key"}, []string{"topics[0].topic: give a topic name or a routing rule, not both"}},
		{"bad literal", Route{Literal: "a/b"}, []string{`topics[0].topic: "a/b" contains '/'`}},
		{"field without path", Route{Strategy: "field", Template: "t.{value}"}, []string{"topics[0].topic.path: missing: strategy = \"field\" needs"}},
		{"empty segment", Route{Strategy: "field", Path: "a..b", Template: "t.{value}"}, []string{`topics[0].topic.path: "a..b" has an empty segment`}},
		{"header without path", Route{Strategy: "header", Template: "t.{value}"}, []string{"topics[0].topic.path: missing: strategy = \"header\" needs"}},
		{"key with path", Route{Strategy: "key", Path: "x", Template: "t.{value}"}, []string{"topics[0].topic.path: strategy = \"key\" routes by the record key"}},
		{"no strategy", Route{Template: "t.{value}"}, []string{"topics[0].topic.strategy: missing"}},
		{"unknown strategy", Route{Strategy: "feild", Path: "x", Template: "t.{value}"}, []string{`topics[0].topic.strategy: "feild" is not allowed; use "field" or "key" or "header" (did you mean "field"?)`}},
		{"no template: {value}", Route{Strategy: "key"}, nil},
		{"template without value", Route{Strategy: "key", Template: "orders"}, []string{`topics[0].topic.template: "orders" has no {value}`}},
		{"bad fallback", Route{Strategy: "key", Template: "t.{value}", Fallback: ".."}, []string{`topics[0].topic.fallback: ".." must not be . or ..`}},
	} {
		err := c.r.Check("topics[0].topic")
		var ps confkit.Problems
		if err != nil && !errors.As(err, &ps) {
			t.Errorf("%s: %T is not confkit.Problems", c.name, err)
			continue
		}
		if len(ps) != len(c.want) {
			t.Errorf("%s: %v, want %d problems %q", c.name, err, len(c.want), c.want)
			continue
		}
		for i, w := range c.want {
			if !strings.HasPrefix(ps[i].Error(), w) {
				t.Errorf("%s: %q, want %q...", c.name, ps[i].Error(), w)
			}
		}
	}
	if err := CheckTopicName("orders.eu"); err != nil {
		t.Errorf("orders.eu: %v", err)
	}
	if err := CheckTopicName(strings.Repeat("a", 250)); err == nil || !strings.Contains(err.Error(), "longer than 249") {
		t.Errorf("250 characters: %v", err)
	}
}
