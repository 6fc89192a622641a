package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// doc is a TOML definition built from sections of key = raw-value lines,
// so each bad-input case changes exactly one thing.
type doc struct {
	top, topics, plugin [][2]string
	raw                 string // appended verbatim
}

func (d doc) set(section, key, val string) doc {
	list := map[string]*[][2]string{"top": &d.top, "topics": &d.topics, "plugin": &d.plugin}[section]
	out := make([][2]string, 0, len(*list)+1)
	found := false
	for _, kv := range *list {
		if kv[0] == key {
			found = true
			if val != "" {
				out = append(out, [2]string{key, val})
			}
			continue
		}
		out = append(out, kv)
	}
	if !found && val != "" {
		out = append(out, [2]string{key, val})
	}
	*list = out
	return d
}

func (d doc) String() string {
	var b strings.Builder
	for _, kv := range d.top {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	if d.topics != nil {
		b.WriteString("[[topics]]\n")
		for _, kv := range d.topics {
			fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
		}
	}
	b.WriteString(d.raw)
	b.WriteString("[plugin_config]\n")
	for _, kv := range d.plugin {
		fmt.Fprintf(&b, "%s = %s\n", kv[0], kv[1])
	}
	return b.String()
}

// badCase is one malformed input; want must appear in the output.
type badCase struct {
	name    string
	files   map[string]string // connectors/<name> (runtime.toml for the runtime config)
	env     []string
	want    string
	mustNot string // never printed (a secret)
	maxLine int    // when set, no output line is longer (values are cut)
}

// badRun is a bad input that needs a running runtime (a record, a
// checkpoint, a request). run returns what went wrong, or "" when the
// runtime refused or skipped the input and kept running.
type badRun struct {
	name string
	run  func() string
}

// counter accepts TCP connections and counts them: the bad-input cases
// point the broker, S3 and Postgres at counters that must stay at zero.
type counter struct {
	addr string
	n    atomic.Int64
	l    net.Listener
}

func (s *suite) newCounter() *counter {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	c := &counter{addr: l.Addr().String(), l: l}
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			conn.Close()
		}
	}()
	s.cleanups.Add(func() { l.Close() })
	return c
}

// badInput runs pico-connectors validate on malformed definitions, runtime
// configs and environment overrides.
func (s *suite) badInput() {
	brokerC, s3C, pgC := s.newCounter(), s.newCounter(), s.newCounter()
	const secret = "s3cr3t-do-not-print"
	runtimeOK := fmt.Sprintf("connectors_dir = \"connectors\"\n[broker]\nbootstrap_servers = %q\n[http]\naddress = \"127.0.0.1:0\"\n[state]\nstorage = \"file\"\npath = \"state\"\n", brokerC.addr)
	s3 := doc{
		top:    [][2]string{{"type", `"sink"`}, {"key", `"arch"`}, {"path", `"libpicomq_connector_s3_sink"`}},
		topics: [][2]string{{"pattern", `'orders\..*'`}, {"schema", `"json"`}},
		plugin: [][2]string{{"bucket", `"pico-archive"`}, {"region", `"us-east-1"`}, {"endpoint", fmt.Sprintf(`"http://%s"`, s3C.addr)},
			{"access_key_id", `"AKIAPICO"`}, {"secret_access_key", `"` + secret + `"`}, {"max_file_size", `"8MiB"`}},
	}
	rnd := doc{
		top:    [][2]string{{"type", `"source"`}, {"key", `"rnd"`}, {"path", `"libpicomq_connector_random_source"`}},
		topics: [][2]string{{"topic", `"rnd.numbers"`}},
		plugin: [][2]string{{"records_per_batch", "10"}},
	}
	pg := doc{
		top:    [][2]string{{"type", `"source"`}, {"key", `"pgs"`}, {"path", `"libpicomq_connector_postgres_source"`}},
		topics: [][2]string{{"topic", `"pg.rows"`}},
		plugin: [][2]string{{"connection_string", fmt.Sprintf(`"postgres://app:%s@%s/app"`, secret, pgC.addr)}, {"mode", `"cdc"`}, {"tables", `["public.t"]`}},
	}
	one := func(name string, d doc, want string) badCase {
		return badCase{name: name, files: map[string]string{"c.toml": d.String()}, want: want}
	}
	env := func(name string, d doc, v, want string) badCase {
		return badCase{name: name, files: map[string]string{"c.toml": d.String()}, env: []string{v}, want: want}
	}
	rt := func(name, extra, want string) badCase {
		return badCase{name: name, files: map[string]string{"runtime.toml": extra + runtimeOK, "c.toml": rnd.String()}, want: want}
	}
	// embedded: the runtime config with the embedded broker and brokerLine
	// (such as a data_dir) in its [broker] table.
	embedded := func(name, brokerLine, want string) badCase {
		cfg := strings.Replace(runtimeOK, fmt.Sprintf("bootstrap_servers = %q\n", brokerC.addr), brokerLine+"\n", 1)
		return badCase{name: name, files: map[string]string{"runtime.toml": cfg, "c.toml": rnd.String()}, want: want}
	}
	msgs := s3.set("plugin", "file_rotation", `"messages"`)
	cases := []badCase{
		// S3 sink plugin_config.
		one("s3 bucket wrong type", s3.set("plugin", "bucket", "42"), "plugin_config.bucket"),
		one("s3 bucket too short", s3.set("plugin", "bucket", `"b"`), "plugin_config.bucket"),
		one("s3 bucket missing", s3.set("plugin", "bucket", ""), "bucket"),
		one("s3 region not AWS without endpoint", s3.set("plugin", "endpoint", "").set("plugin", "region", `"mars-north-1"`), "region"),
		one("s3 negative size", s3.set("plugin", "max_file_size", `"-5MiB"`), "plugin_config.max_file_size"),
		one("s3 size above 5 TiB", s3.set("plugin", "max_file_size", `"6TiB"`), "max_file_size"),
		one("s3 huge size", s3.set("plugin", "max_file_size", `"99999999999999999999999TiB"`), "plugin_config.max_file_size"),
		one("s3 zero size", s3.set("plugin", "max_file_size", "0"), "plugin_config.max_file_size"),
		one("s3 size not a size", s3.set("plugin", "max_file_size", `"lots"`), "plugin_config.max_file_size"),
		one("s3 messages rotation without count", msgs, "max_messages_per_file"),
		one("s3 negative messages per file", msgs.set("plugin", "max_messages_per_file", "-3"), "plugin_config.max_messages_per_file"),
		one("s3 float messages per file", msgs.set("plugin", "max_messages_per_file", "1e30"), "plugin_config.max_messages_per_file"),
		one("s3 unknown output format", s3.set("plugin", "output_format", `"xml"`), "plugin_config.output_format"),
		one("s3 template with ../", s3.set("plugin", "path_template", `"../{topic}"`), "plugin_config.path_template"),
		one("s3 template unknown placeholder", s3.set("plugin", "path_template", `"{topic}/{tenant}"`), "plugin_config.path_template"),
		one("s3 template bad segment index", s3.set("plugin", "path_template", `"{topic_segment[x]}"`), "plugin_config.path_template"),
		one("s3 template unclosed brace", s3.set("plugin", "path_template", `"{topic"`), "plugin_config.path_template"),
		one("s3 bool as string", s3.set("plugin", "include_metadata", `"yes"`), "plugin_config.include_metadata"),
		one("s3 zero attempts", s3.set("plugin", "max_attempts", "0"), "plugin_config.max_attempts"),
		one("s3 duration not a duration", s3.set("plugin", "retry_delay", `"soon"`), "plugin_config.retry_delay"),
		one("s3 negative duration", s3.set("plugin", "retry_delay", `"-1s"`), "plugin_config.retry_delay"),
		one("s3 half the credentials", s3.set("plugin", "secret_access_key", ""), "access_key_id"),
		one("s3 misspelt key", s3.set("plugin", "buckett", `"x"`), "buckett"),
		one("s3 invalid UTF-8 in prefix", s3.set("plugin", "prefix", "\"raw\xff\xfe\""), "c.toml"),
		// Definition keys.
		one("unknown type", s3.set("top", "type", `"pipe"`), "type"),
		one("bad key", s3.set("top", "key", `"Bad Key!"`), "key"),
		one("missing path", s3.set("top", "path", ""), "path"),
		one("unknown plugin", s3.set("top", "path", `"libpicomq_connector_s4_sink"`), "libpicomq_connector_s4_sink"),
		one("enabled as string", s3.set("top", "enabled", `"yes"`), "enabled"),
		one("version as string", s3.set("top", "version", `"one"`), "version"),
		one("unknown top-level key", s3.set("top", "colour", `"blue"`), "colour"),
		one("regex that does not compile", s3.set("topics", "pattern", `'orders\.('`), "topics[0].pattern"),
		one("sink pattern and topic", s3.set("topics", "topic", `"orders"`), "topics[0]"),
		one("sink routing rule", s3.set("topics", "pattern", "").set("topics", "topic", `{ strategy = "key", template = "t.{value}" }`), "topics[0].topic"),
		one("misspelt routing rule key", rnd.set("topics", "topic", `{ stratgy = "key", template = "t.{value}" }`), "topics[0].topic.stratgy"),
		one("partitions = 3", rnd.set("topics", "partitions", "3"), "topics[0].partitions"),
		one("replication_factor = 2", rnd.set("topics", "replication_factor", "2"), "topics[0].replication_factor"),
		one("unknown schema", rnd.set("topics", "schema", `"yaml"`), "topics[0].schema"),
		one("negative batch_length", s3.set("topics", "batch_length", "-1"), "topics[0].batch_length"),
		one("poll_interval not a duration", s3.set("topics", "poll_interval", `"fast"`), "topics[0].poll_interval"),
		one("negative linger_time", rnd.set("topics", "linger_time", `"-5ms"`), "topics[0].linger_time"),
		one("unknown route strategy", rnd.set("topics", "topic", `{ strategy = "magic", path = "x", template = "t.{value}" }`), "strategy"),
		one("avro without a schema", rnd.set("topics", "schema", `"avro"`), "avro"),
		one("avro schema not JSON", rnd.set("topics", "schema", `"avro"`).set("topics", "avro_schema_json", `'{not json'`), "avro_schema_json"),
		one("avro schema path outside", rnd.set("topics", "schema", `"avro"`).set("topics", "avro_schema_path", `"../../../nope/x.avsc"`), "avro_schema_path"),
		one("sink without topics", doc{top: s3.top, plugin: s3.plugin}, "topics"),
		{name: "duplicate key in two files", files: map[string]string{"a.toml": rnd.String(), "b.toml": rnd.String()}, want: "rnd"},
		{name: "TOML syntax error", files: map[string]string{"c.toml": "type = \"sink\nkey = 1\n"}, want: "c.toml"},
		{name: "invalid UTF-8 outside strings", files: map[string]string{"c.toml": "type = \"source\"\n\xff\xfe = 1\n"}, want: "c.toml"},
		{name: "unknown transform", files: map[string]string{"c.toml": rnd.String() + "[[transforms]]\ntype = \"uppercase_everything\"\n"}, want: "transforms"},
		{name: "transform config wrong type", files: map[string]string{"c.toml": strings.Replace(rnd.String(), "[plugin_config]", "[[transforms]]\ntype = \"add_fields\"\nfields = 7\n[plugin_config]", 1)}, want: "transforms[0]"},
		// Random source.
		one("random negative batch", rnd.set("plugin", "records_per_batch", "-10"), "plugin_config.records_per_batch"),
		one("random huge payload", rnd.set("plugin", "payload_size", `"9000PiB"`), "plugin_config.payload_size"),
		one("random bad interval", rnd.set("plugin", "interval", `"1 fortnight"`), "plugin_config.interval"),
		one("random unknown key shape", rnd.set("plugin", "key_shape", `"triangle"`), "plugin_config.key_shape"),
		one("random seed as string", rnd.set("plugin", "seed", `"abc"`), "plugin_config.seed"),
		one("random negative max_records", rnd.set("plugin", "max_records", "-1"), "plugin_config.max_records"),
		// Postgres source.
		one("pg unknown mode", pg.set("plugin", "mode", `"cdcc"`), "plugin_config.mode"),
		one("pg tables as string", pg.set("plugin", "tables", `"public.t"`), "plugin_config.tables"),
		one("pg zero batch", pg.set("plugin", "batch_size", "0"), "plugin_config.batch_size"),
		one("pg unknown numeric format", pg.set("plugin", "numeric_format", `"roman"`), "plugin_config.numeric_format"),
		one("pg unknown snapshot", pg.set("plugin", "snapshot", `"sometimes"`), "plugin_config.snapshot"),
		one("pg connection string wrong type", pg.set("plugin", "connection_string", "5"), "plugin_config.connection_string"),
		// Runtime config.
		rt("runtime unknown state storage", "[log]\nlevel = \"info\"\n", ""),
		rt("runtime bad shutdown_grace", "shutdown_grace = \"eventually\"\n", "shutdown_grace"),
		rt("runtime bad log level", "[log]\nlevel = \"loud\"\n", "log.level"),
		rt("runtime huge grace", "shutdown_grace = \"9999999999h\"\n", "shutdown_grace"),
		rt("runtime unknown section", "[brokr]\nx = 1\n", "brokr"),
		// Producer safety, dead-letter topics and the embedded broker's data_dir.
		one("acks = 0", rnd.set("topics", "properties", `{ acks = "0" }`), "topics[0].properties.acks: the runtime produces with acks=all"),
		one("request.required.acks = 1", rnd.set("topics", "properties", `{ "request.required.acks" = "1" }`), `topics[0].properties."request.required.acks"`),
		one("idempotence off", rnd.set("topics", "properties", `{ "enable.idempotence" = "false" }`), `topics[0].properties."enable.idempotence"`),
		one("max.in.flight above 5", rnd.set("topics", "properties", `{ "max.in.flight.requests.per.connection" = "6" }`), `"6": an idempotent producer keeps records in order only with 1 to 5`),
		one("max.in.flight not a number", rnd.set("topics", "properties", `{ "max.in.flight" = "lots" }`), `topics[0].properties."max.in.flight"`),
		one("transactional.id (source loop check)", rnd.set("topics", "properties", `{ "transactional.id" = "x" }`), `"transactional.id" is set by the runtime`),
		rt("broker.properties acks = 1", "", ""),
		env("env broker acks = 0", rnd, "PICOMQ_CONNECTORS_BROKER_PROPERTIES_ACKS=0", "broker.properties.acks|PICOMQ_CONNECTORS_BROKER_PROPERTIES_ACKS"),
		env("env idempotence off", rnd, "PICOMQ_CONNECTORS_SOURCE_RND_TOPICS_0_PROPERTIES_ENABLE_IDEMPOTENCE=false", "PICOMQ_CONNECTORS_SOURCE_RND_TOPICS_0_PROPERTIES_ENABLE_IDEMPOTENCE"),
		one("dead_letter_topic not a topic name", rnd.set("topics", "dead_letter_topic", `"dead letters!"`), "topics[0].dead_letter_topic"),
		one("dead_letter_topic empty", rnd.set("topics", "dead_letter_topic", `""`), "topics[0].dead_letter_topic"),
		one("dead_letter_topic wrong type", rnd.set("topics", "dead_letter_topic", "5"), "topics[0].dead_letter_topic"),
		one("dead_letter_topic is the source's topic", rnd.set("topics", "dead_letter_topic", `"rnd.numbers"`), "is the topic this block writes to"),
		one("dead_letter_topic the sink consumes", s3.set("topics", "dead_letter_topic", `"orders.dead"`), "the sink would read its own dead letters"),
		one("dead_letter_topic is the fallback", rnd.set("topics", "topic", `{ strategy = "field", path = "t", template = "t.{value}", fallback = "t.other" }`).set("topics", "dead_letter_topic", `"t.other"`), "topic.fallback"),
		embedded("data_dir is a file", `data_dir = "runtime.toml"`, "broker.data_dir"),
		embedded("data_dir under a file", `data_dir = "runtime.toml/broker"`, "is a file, not a folder"),
		embedded("data_dir blank", `data_dir = "  "`, "broker.data_dir: must not be blank"),
		embedded("data_dir wrong type", `data_dir = 7`, "broker.data_dir"),
		embedded("env data_dir is a file", "", "PICOMQ_CONNECTORS_BROKER_DATA_DIR"),
		// Environment overrides.
		env("env int not a number", s3, "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_MAX_ATTEMPTS=abc", "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_MAX_ATTEMPTS"),
		env("env negative size", s3, "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_MAX_FILE_SIZE=-1", "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_MAX_FILE_SIZE|plugin_config.max_file_size"),
		env("env bool not a bool", s3, "PICOMQ_CONNECTORS_SINK_ARCH_ENABLED=maybe", "PICOMQ_CONNECTORS_SINK_ARCH_ENABLED"),
		env("env topics batch_length", s3, "PICOMQ_CONNECTORS_SINK_ARCH_TOPICS_0_BATCH_LENGTH=ten", "PICOMQ_CONNECTORS_SINK_ARCH_TOPICS_0_BATCH_LENGTH"),
		env("env regex that does not compile", s3, "PICOMQ_CONNECTORS_SINK_ARCH_TOPICS_0_PATTERN=(", "PICOMQ_CONNECTORS_SINK_ARCH_TOPICS_0_PATTERN"),
		env("env huge integer", rnd, "PICOMQ_CONNECTORS_SOURCE_RND_PLUGIN_CONFIG_RECORDS_PER_BATCH=99999999999999999999999", "PICOMQ_CONNECTORS_SOURCE_RND_PLUGIN_CONFIG_RECORDS_PER_BATCH"),
		env("env template with ../", s3, "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_PATH_TEMPLATE=../../{topic}", "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_PATH_TEMPLATE|plugin_config.path_template"),
		env("env unknown placeholder", s3, "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_PATH_TEMPLATE={topic}/{secret}", "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_PATH_TEMPLATE|plugin_config.path_template"),
		env("env invalid UTF-8", s3, "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_PREFIX=raw\xff\xfe", "PICOMQ_CONNECTORS_SINK_ARCH_PLUGIN_CONFIG_PREFIX"),
		env("env bad JSON list", pg, "PICOMQ_CONNECTORS_SOURCE_PGS_PLUGIN_CONFIG_TABLES=[1,2", "PICOMQ_CONNECTORS_SOURCE_PGS_PLUGIN_CONFIG_TABLES"),
		env("env unknown enum", pg, "PICOMQ_CONNECTORS_SOURCE_PGS_PLUGIN_CONFIG_MODE=stream", "PICOMQ_CONNECTORS_SOURCE_PGS_PLUGIN_CONFIG_MODE|plugin_config.mode"),
		env("env partitions", rnd, "PICOMQ_CONNECTORS_SOURCE_RND_TOPICS_0_PARTITIONS=3", "PICOMQ_CONNECTORS_SOURCE_RND_TOPICS_0_PARTITIONS"),
		env("env runtime state storage", rnd, "PICOMQ_CONNECTORS_STATE_STORAGE=ftp", "PICOMQ_CONNECTORS_STATE_STORAGE"),
		env("env runtime grace", rnd, "PICOMQ_CONNECTORS_SHUTDOWN_GRACE=-3s", "PICOMQ_CONNECTORS_SHUTDOWN_GRACE"),
		env("env http max_attempts", rnd, "PICOMQ_CONNECTORS_STATE_HTTP_MAX_ATTEMPTS=lots", "PICOMQ_CONNECTORS_STATE_HTTP_MAX_ATTEMPTS"),
		// Bounded parsers and signed checkpoints (issue 32).
		{name: "200k nested arrays", files: map[string]string{"c.toml": rnd.set("plugin", "x", strings.Repeat("[", 200_000)+strings.Repeat("]", 200_000)).String()}, want: "nest more than"},
		{name: "definition over 1 MiB", files: map[string]string{"c.toml": rnd.String() + "# " + strings.Repeat("x", 1<<20) + "\n"}, want: "larger than 1048576 bytes"},
		{name: "400 KB value is cut", files: map[string]string{"c.toml": s3.set("plugin", "bucket", `"`+strings.Repeat("b", 400_000)+`"`).String()}, want: "plugin_config.bucket", maxLine: 600},
		{name: "400 KB key is cut", files: map[string]string{"c.toml": rnd.set("top", strings.Repeat("k", 400_000), "1").String()}, want: "bytes)", maxLine: 600},
		{name: "signing_key too short", files: map[string]string{"runtime.toml": strings.Replace(runtimeOK, `storage = "file"`, `storage = "broker"`+"\nsigning_key = \""+secret+"\"", 1), "c.toml": rnd.String()}, want: "state.signing_key: is 19 bytes long"},
		{name: "signing_key with the file store", files: map[string]string{"runtime.toml": strings.Replace(runtimeOK, `storage = "file"`, `storage = "file"`+"\nsigning_key = \""+secret+strings.Repeat("x", 32)+"\"", 1), "c.toml": rnd.String()}, want: "only the broker store signs"},
		env("env signing_key too short", rnd, "PICOMQ_CONNECTORS_STATE_SIGNING_KEY="+secret, "PICOMQ_CONNECTORS_STATE_SIGNING_KEY"),
	}
	for i := range cases {
		if cases[i].name == "runtime unknown state storage" {
			cases[i].files["runtime.toml"] = strings.Replace(runtimeOK, `storage = "file"`, `storage = "ftp"`, 1)
			cases[i].want = "state.storage"
		}
		if cases[i].name == "env data_dir is a file" {
			cases[i].env = []string{"PICOMQ_CONNECTORS_BROKER_DATA_DIR=/dev/null"}
		}
		if cases[i].name == "broker.properties acks = 1" {
			cases[i].files["runtime.toml"] = strings.Replace(runtimeOK, "[http]", "[broker.properties]\nacks = \"1\"\n[http]", 1)
			cases[i].want = "broker.properties.acks"
		}
	}

	// The valid base must pass, or every case below proves nothing.
	for _, d := range []doc{s3, rnd, pg} {
		out, code := s.validate(runtimeOK, map[string]string{"c.toml": d.String()}, nil)
		if !s.check(code == 0, "base definition %s is valid (exit %d)", d.top[1][1], code) {
			fmt.Println(out)
			return
		}
	}
	s.inject("%d malformed definition files, runtime configs and environment overrides through `pico-connectors validate`", len(cases))
	failed := 0
	for _, c := range cases {
		rtCfg := runtimeOK
		files := map[string]string{}
		for k, v := range c.files {
			if k == "runtime.toml" {
				rtCfg = v
			} else {
				files[k] = v
			}
		}
		out, code := s.validate(rtCfg, files, c.env)
		panicked := strings.Contains(out, "panic:") || strings.Contains(out, "goroutine ")
		leaked := strings.Contains(out, secret)
		named := c.want == ""
		for _, w := range strings.Split(c.want, "|") {
			named = named || strings.Contains(out, w)
		}
		first := strings.TrimSpace(strings.SplitN(out, "\n", 2)[0])
		longest := 0
		for _, l := range strings.Split(out, "\n") {
			longest = max(longest, len(l))
		}
		long := c.maxLine > 0 && longest > c.maxLine
		if code != 1 || panicked || leaked || !named || long {
			failed++
			s.check(false, "%s: exit %d, panic %v, secret printed %v, names %q: %v, longest line %d bytes\n%s", c.name, code, panicked, leaked, c.want, named, longest, clip(indent(out), 4000))
			continue
		}
		fmt.Printf("      ok  %-38s %s\n", c.name, clip(first, 110))
	}
	s.check(failed == 0, "%d/%d cases: exit 1, a message naming the key or variable, no panic, no secret", len(cases)-failed, len(cases))
	s.check(brokerC.n.Load() == 0 && s3C.n.Load() == 0 && pgC.n.Load() == 0,
		"nothing reached the broker, S3 or Postgres during validation (connections: %d, %d, %d)", brokerC.n.Load(), s3C.n.Load(), pgC.n.Load())

	runs := []badRun{
		{"checkpoints injected into a source's state topic", s.injectedCheckpoint},
		{"a stranger deletes a topic and commits offsets on the embedded broker", s.strangerOnEmbeddedBroker},
		{"a web page's cross-site POST and rebound Host to the API", s.browserRequests},
		{"a state store that answers 302", s.redirectingStateStore},
	}
	s.inject("%d bad inputs to running runtimes", len(runs))
	failed = 0
	for _, r := range runs {
		if why := r.run(); why != "" {
			failed++
			s.check(false, "%s: %s", r.name, why)
			continue
		}
		fmt.Printf("      ok  %s\n", r.name)
	}
	s.check(failed == 0, "%d/%d bad inputs at run time: refused or skipped, the runtime kept running", len(runs)-failed, len(runs))
}

// injectedCheckpoint runs the random source with the broker state store
// and a signing key, stops it, produces checkpoints that would make it
// resume at 900000000 into its state topic (under another key, and under
// its own key unsigned), and starts it again: it resumes from its own
// checkpoint and logs the records it skipped.
func (s *suite) injectedCheckpoint() string {
	const topic, key, evil = "bad.injected", "numbers", 900_000_000
	// A broker of its own, which stays up while the runtime is stopped.
	addr := s.startBroker("127.0.0.1:0", s.tempDir()).addr
	r := s.newRT(addr, "[state]\nstorage = \"broker\"\nsigning_key = \"0123456789abcdef0123456789abcdef\"\n",
		map[string]string{"numbers.toml": randomDef(key, topic, 10, "20ms")})
	must(r.Run())
	before := s.waitEnd(r, addr, topic, 50, 60*time.Second)
	if err := r.Term(30 * time.Second); err != nil {
		return fmt.Sprintf("first stop: %v", err)
	}
	payload := []byte(fmt.Sprintf(`{"next_seq":%d}`, evil))
	if err := produceKeyed(addr, "pico-connectors.state."+key, [][2][]byte{{[]byte("attacker"), payload}, {[]byte(key), payload}}); err != nil {
		return fmt.Sprintf("inject: %v", err)
	}
	must(r.Run())
	s.waitEnd(r, addr, topic, before+50, 60*time.Second)
	if err := r.Term(30 * time.Second); err != nil {
		return fmt.Sprintf("second stop: %v", err)
	}
	recs, err := readTopic(addr, topic)
	if err != nil {
		return err.Error()
	}
	for _, rec := range recs {
		var p struct {
			Seq int64 `json:"seq"`
		}
		if json.Unmarshal(rec.Value, &p) == nil && p.Seq >= evil {
			return fmt.Sprintf("the source resumed from the injected checkpoint: seq %d at offset %d", p.Seq, rec.Offset)
		}
	}
	if !strings.Contains(r.Output(), "skipped records that are not this source's checkpoints") {
		return "the runtime did not log the skipped records:\n" + r.Tail()
	}
	return ""
}

// produceKeyed writes key-value records to topic with franz-go, as any
// client of the broker can, and waits for every ack.
func produceKeyed(addr, topic string, kvs [][2][]byte) error {
	cl, err := newClient(addr, kgo.AllowAutoTopicCreation(), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	recs := make([]*kgo.Record, len(kvs))
	for i, kv := range kvs {
		recs[i] = &kgo.Record{Topic: topic, Key: kv[0], Value: kv[1]}
	}
	return cl.ProduceSync(ctx, recs...).FirstErr()
}

func clip(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func indent(s string) string {
	return "        " + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n        ")
}

// validate writes a config folder and runs pico-connectors validate with
// only env (plus PATH and HOME) in the environment.
func (s *suite) validate(runtimeCfg string, files map[string]string, env []string) (string, int) {
	dir := s.tempDir()
	must(os.MkdirAll(filepath.Join(dir, "connectors"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(runtimeCfg), 0o644))
	for name, body := range files {
		must(os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o644))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, "validate", "--config", filepath.Join(dir, "runtime.toml"))
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}, env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if ctx.Err() != nil {
		return out.String() + "\n(timed out after 20 s)", -1
	}
	if err != nil && cmd.ProcessState == nil {
		return err.Error(), -1
	}
	return out.String(), cmd.ProcessState.ExitCode()
}
