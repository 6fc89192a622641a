package definition

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/runtime/codec"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

// EnvPrefix starts every environment variable the runtime reads.
const EnvPrefix = "PICOMQ_CONNECTORS_"

// Defaults of the runtime config.
const (
	DefaultConnectorsDir   = "connectors"
	DefaultEmbeddedAddress = "127.0.0.1:9092"
	DefaultHTTPAddress     = "127.0.0.1:8081"
	DefaultStatePath       = "state"
	DefaultShutdownGrace   = "30s"
	DefaultStateTimeout    = "5s"
	DefaultStateAttempts   = 5
	DefaultStateRetryDelay = "200ms"
)

// Defaults of a [[topics]] block.
const (
	DefaultSchema       = "json"
	DefaultBatchLength  = 1000
	DefaultPollInterval = "100ms"
	DefaultLingerTime   = "5ms"
)

// Bounds of a [[topics]] block, librdkafka's own: batch.num.messages for a
// source's batch_length (a sink holds one batch in memory, so the same
// bound keeps it sane), queue.buffering.max.ms for linger_time.
const (
	MaxBatchLength = 1_000_000
	MaxLingerTime  = 15 * time.Minute
)

// Config is a loaded runtime config with every definition in its
// connectors_dir, after environment overrides, defaults and validation.
type Config struct {
	// File is the runtime config file as given.
	File string
	// Runtime is the runtime config, with defaults filled in.
	Runtime Runtime
	// Dir is connectors_dir resolved against the config file's folder;
	// empty when the runtime config file could not be read or parsed
	// (then Runtime holds nothing of it either).
	Dir string
	// Connectors are the definitions, sorted by file name.
	Connectors []*Definition
}

// Definition is one loaded definition file.
type Definition struct {
	// File is the definition file's path.
	File string
	// Connector is the definition after env overrides, with defaults
	// filled in. PluginConfig holds the raw table (secrets in clear): show
	// Plugin.Redacted() instead.
	Connector
	// EnvPrefix is PICOMQ_CONNECTORS_{SINK|SOURCE}_{KEY}_.
	EnvPrefix string
	// Registration is the plugin named by path (zero when unknown).
	Registration sdk.Registration
	// Plugin is plugin_config as the registration's Load returned it, nil
	// when it did not load.
	Plugin sdk.Config
	// Transforms are the loaded configs of Connector.Transforms, index for
	// index.
	Transforms []Transform
}

// Transform is one loaded transform of a definition.
type Transform struct {
	// Type names the transform, such as add_fields.
	Type string
	// Enabled is false when the block says enabled = false.
	Enabled bool
	// EnvPrefix is where the transform's own keys are overridden from.
	EnvPrefix string
	// Registration is the transform's registration (zero when unknown).
	Registration sdk.Registration
	// Config is what the registration's Load returned, nil on failure.
	Config sdk.Config
}

// Kind returns the definition's kind, sink or source.
func (d *Definition) Kind() sdk.Kind { return sdk.Kind(d.Type) }

// TransformConfigs returns the loaded configs of Connector.Transforms,
// index for index (nil where one did not load).
func (d *Definition) TransformConfigs() []sdk.Config {
	out := make([]sdk.Config, len(d.Transforms))
	for i, t := range d.Transforms {
		out[i] = t.Config
	}
	return out
}

// Find returns the definition of kind (sink or source) with key.
func (c *Config) Find(kind, key string) (*Definition, bool) {
	for _, d := range c.Connectors {
		if d.Type == kind && d.Key == key {
			return d, true
		}
	}
	return nil, false
}

// Environ turns os.Environ-style "NAME=value" pairs into a map.
func Environ(pairs []string) map[string]string {
	env := make(map[string]string, len(pairs))
	for _, kv := range pairs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env
}

// Load reads the runtime config file at path and every *.toml definition
// in its connectors_dir, applies overrides from env (variable name to
// value, such as Environ(os.Environ())), fills in defaults and validates
// everything, plugin configs included. It returns the config and, when
// anything is wrong, a confkit.Problems error listing every problem; the config is
// then only good for display.
func Load(path string, env map[string]string) (*Config, error) {
	cfg := &Config{File: path}
	used := map[string]bool{}
	var problems confkit.Problems
	var known []string

	d := newDecoder(path, env, used)
	raw, md, err := parseFile(path)
	if err != nil {
		return cfg, clipProblems(confkit.Problems{{File: path, Message: err.Error()}})
	}
	d.order = keyOrder(md)
	d.decodeStruct(reflect.ValueOf(&cfg.Runtime).Elem(), raw, "", EnvPrefix)
	cfg.Runtime.fillDefaults(d.defined)
	cfg.Runtime.validate(d)
	problems = append(problems, d.problems...)
	known = append(known, d.known...)

	cfg.Dir = cfg.Runtime.ConnectorsDir
	if !filepath.IsAbs(cfg.Dir) {
		cfg.Dir = filepath.Join(filepath.Dir(path), cfg.Dir)
	}
	files, err := filepath.Glob(filepath.Join(cfg.Dir, "*.toml"))
	if err == nil && len(files) == 0 {
		if _, statErr := os.Stat(cfg.Dir); statErr != nil {
			problems = append(problems, confkit.Problem{File: path, Key: "connectors_dir", Message: fmt.Sprintf("folder %s does not exist; create it with one definition file (*.toml) per connector, or point connectors_dir at one", cfg.Dir)})
		}
	}
	slices.Sort(files)
	seen := map[string]string{}
	for _, file := range files {
		if strings.HasPrefix(filepath.Base(file), ".") {
			continue // editor and backup files
		}
		def, ps, kn := loadDefinition(file, env, used)
		problems = append(problems, ps...)
		known = append(known, kn...)
		if def == nil {
			continue
		}
		if def.Type != "" && def.Key != "" {
			id := def.Type + "/" + def.Key
			if other, dup := seen[id]; dup {
				problems = append(problems, confkit.Problem{File: file, Key: "key", Message: fmt.Sprintf("%s key %q is already used by %s; every %s needs its own key", def.Type, def.Key, other, def.Type)})
			} else {
				seen[id] = file
			}
		}
		cfg.Connectors = append(cfg.Connectors, def)
	}
	problems = append(problems, unknownVariables(cfg, env, used, known)...)
	if len(problems) > 0 {
		return cfg, clipProblems(problems)
	}
	return cfg, nil
}

// parseFile reads a TOML file into a table.
// It refuses a file larger than MaxFileSize or nested deeper than
// MaxNesting.
func parseFile(path string) (map[string]any, toml.MetaData, error) {
	data, err := readLimited(path)
	if err != nil {
		if u := errors.Unwrap(err); u != nil {
			err = u
		}
		return nil, toml.MetaData{}, fmt.Errorf("cannot read: %v", err)
	}
	if err := checkBrackets(data); err != nil {
		return nil, toml.MetaData{}, err
	}
	raw := map[string]any{}
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, md, errors.New(parseProblem(pe))
		}
		return nil, md, fmt.Errorf("not valid TOML: %v", err)
	}
	if key := checkNesting(raw); key != "" {
		return nil, md, fmt.Errorf("%s: tables and arrays nest more than %d levels deep; a runtime config or definition needs only a few", key, MaxNesting)
	}
	return raw, md, nil
}

// quotedText is a double-quoted fragment of a TOML parse error's message:
// text of the file, such as the bare word after "key =".
var quotedText = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// parseProblem words a TOML syntax error with its line and key but without
// the file's text, which can be a secret whose quotes were forgotten
// (secret_access_key = abc... gave `expected value but found "abc..."`).
func parseProblem(pe toml.ParseError) string {
	where := fmt.Sprintf("line %d", pe.Position.Line)
	if pe.LastKey != "" {
		where += fmt.Sprintf(" (%s)", pe.LastKey)
	}
	msg := pe.Message
	if quotedText.MatchString(msg) {
		msg = quotedText.ReplaceAllString(msg, "text not shown")
		if strings.HasPrefix(pe.Message, "expected value but found") && pe.LastKey != "" {
			k := pe.LastKey[strings.LastIndexByte(pe.LastKey, '.')+1:]
			msg += fmt.Sprintf(" (it may be a secret); a string needs quotes, as in %s = \"...\"", k)
		} else {
			msg += " (it may be a secret)"
		}
	}
	return where + ": " + msg
}

func keyOrder(md toml.MetaData) map[string]int {
	order := map[string]int{}
	for i, k := range md.Keys() {
		order[k.String()] = i
	}
	return order
}

func loadDefinition(file string, env map[string]string, used map[string]bool) (*Definition, confkit.Problems, []string) {
	raw, md, err := parseFile(file)
	if err != nil {
		return nil, confkit.Problems{{File: file, Message: err.Error()}}, nil
	}
	def := &Definition{File: file}
	d := newDecoder(file, env, used)
	d.order = keyOrder(md)
	d.skipEnv["type"], d.skipEnv["key"] = true, true

	// type and key name the variables, so they come from the file alone.
	typ, _ := raw["type"].(string)
	key, _ := raw["key"].(string)
	prefix := ""
	if (typ == "sink" || typ == "source") && keyPattern.MatchString(key) {
		prefix = confgen.EnvName(EnvPrefix, typ, key) + "_"
	} else {
		// No usable variable names: decode without overrides.
		d.env = map[string]string{}
	}
	def.EnvPrefix = prefix
	d.decodeStruct(reflect.ValueOf(&def.Connector).Elem(), raw, "", prefix)
	def.validate(d)
	def.fillDefaults(d.defined)
	def.loadPlugin(d, env, used, d.transformPrefixes)
	if prefix == "" {
		d.known = nil
	}
	return def, d.problems, d.known
}

var keyPattern = regexp.MustCompile(`^[a-z0-9_]+$`)

func (r *Runtime) fillDefaults(defined map[string]bool) {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&r.ConnectorsDir, DefaultConnectorsDir)
	def(&r.Broker.EmbeddedAddress, DefaultEmbeddedAddress)
	if !defined["broker.data_dir"] {
		r.Broker.DataDir = DefaultBrokerDataDir
	}
	def(&r.HTTP.Address, DefaultHTTPAddress)
	def(&r.State.Storage, "file")
	def(&r.State.Path, DefaultStatePath)
	def(&r.State.HTTP.Timeout, DefaultStateTimeout)
	def(&r.State.HTTP.RetryDelay, DefaultStateRetryDelay)
	if !defined["state.http.max_attempts"] {
		r.State.HTTP.MaxAttempts = DefaultStateAttempts
	}
	def(&r.Log.Format, "text")
	def(&r.Log.Level, "info")
	def(&r.ShutdownGrace, DefaultShutdownGrace)
}

// origin names where a key's value came from, for messages.
func (d *decoder) origin(key string) string {
	if v, ok := d.fromEnv[key]; ok {
		return " (from environment variable " + v + ")"
	}
	return ""
}

func (d *decoder) duration(key, value string) {
	if value == "" {
		return
	}
	switch _, err := parseDuration(value); {
	case errors.Is(err, confkit.ErrDurationTooLarge):
		d.add(key, "%q%s is too long for a duration (about 292 years at most); use a number with a unit such as 100ms, 5s or 1m30s", value, d.origin(key))
	case errors.Is(err, confkit.ErrDurationNegative):
		d.add(key, "%q%s is negative; use 0s or a number with a unit such as 100ms, 5s or 1m30s", value, d.origin(key))
	case err != nil:
		d.add(key, "%q%s is not a duration; use a number with a unit such as 100ms, 5s or 1m30s", value, d.origin(key))
	}
}

func (d *decoder) oneOf(key, value string, allowed ...string) {
	if !slices.Contains(allowed, value) {
		d.add(key, "%s", notAllowed(value, d.origin(key), allowed))
	}
}

// notAllowed says that value (from origin, see decoder.origin) is none of
// allowed, and which one it may be a typo of.
func notAllowed(value, origin string, allowed []string) string {
	return fmt.Sprintf("%q%s is not allowed; use %s%s", value, origin, strings.Join(quoteAll(allowed), " or "), confkit.DidYouMean(value, allowed))
}

func quoteAll(list []string) []string {
	out := make([]string, len(list))
	for i, s := range list {
		out[i] = fmt.Sprintf("%q", s)
	}
	return out
}

func (d *decoder) hostPort(key, value string) {
	if value == "" {
		return
	}
	if _, _, err := net.SplitHostPort(value); err != nil {
		d.add(key, "%q%s is not host:port, such as 127.0.0.1:8081", value, d.origin(key))
	}
}

func (r *Runtime) validate(d *decoder) {
	d.hostPort("broker.embedded_address", r.Broker.EmbeddedAddress)
	if r.Broker.BootstrapServers != "" {
		for _, s := range strings.Split(r.Broker.BootstrapServers, ",") {
			if _, _, err := net.SplitHostPort(strings.TrimSpace(s)); err != nil {
				d.add("broker.bootstrap_servers", "%q%s is not a comma-separated list of host:port", r.Broker.BootstrapServers, d.origin("broker.bootstrap_servers"))
				break
			}
		}
	}
	if r.Broker.BootstrapServers == "" {
		r.validateEmbedded(d)
	}
	d.hostPort("http.address", r.HTTP.Address)
	if (r.HTTP.TLSCert == "") != (r.HTTP.TLSKey == "") {
		d.add("http", "set both tls_cert and tls_key to serve HTTPS, or neither")
	}
	r.validateFleet(d) // state.storage, mode, id, [fleet] (fleet.go)
	if r.State.Storage == "http" {
		if r.State.HTTP.URL == "" {
			d.add("state.http.url", "missing: state.storage = \"http\" needs [state.http] url = \"https://...\"")
		} else if u, err := url.Parse(r.State.HTTP.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.add("state.http.url", "%q%s is not an http:// or https:// URL", confkit.MaskURL(r.State.HTTP.URL), d.origin("state.http.url"))
		}
	}
	if r.State.Storage == "file" {
		d.checkFolder("state.path", d.file, r.State.Path, DefaultStatePath, "the checkpoints")
	}
	if k := r.State.SigningKey.Reveal(); k != "" {
		// The value is a secret: only its length is shown.
		switch {
		case r.State.Storage != "broker":
			d.add("state.signing_key", "is set%s, but state.storage = %q: only the broker store signs its checkpoints; set state.storage = \"broker\" or remove state.signing_key", d.origin("state.signing_key"), r.State.Storage)
		case len(k) < MinSigningKey:
			d.add("state.signing_key", "is %d bytes long%s; use at least %d bytes, such as the output of openssl rand -hex 32", len(k), d.origin("state.signing_key"), MinSigningKey)
		}
	}
	d.duration("state.http.timeout", r.State.HTTP.Timeout)
	d.duration("state.http.retry_delay", r.State.HTTP.RetryDelay)
	if r.State.HTTP.MaxAttempts < 1 {
		d.add("state.http.max_attempts", "%d%s: must be at least 1", r.State.HTTP.MaxAttempts, d.origin("state.http.max_attempts"))
	}
	d.oneOf("log.format", r.Log.Format, "text", "json")
	d.oneOf("log.level", r.Log.Level, "debug", "info", "warn", "error")
	d.duration("shutdown_grace", r.ShutdownGrace)
	if r.Broker.BootstrapServers == "" {
		d.checkFolder("broker.data_dir", d.file, r.Broker.DataDir, DefaultBrokerDataDir, "the embedded broker's data")
	}
	d.checkProducerProperties("broker.properties", r.Broker.Properties)
	var rs []reservation
	if r.Distributed() {
		rs = append(rs, reservation{` for mode = "distributed" (its leases; set fleet.session_timeout or id instead)`, ReservedLease})
	}
	if r.State.Storage == "broker" {
		rs = append(rs, reservation{` for state.storage = "broker" (its checkpoints are written transactionally)`, ReservedStateStore})
	}
	rs = append(rs, reservation{"", ReservedConsumer}, reservation{"", ReservedProducer})
	d.checkReserved("broker.properties", r.Broker.Properties, rs...)
}

// MinEmbeddedPassword is the shortest broker.embedded_password allowed.
const MinEmbeddedPassword = 12

// validateEmbedded checks the embedded broker's password and refuses a
// listen address beyond loopback without one: a generated password is
// kept on this host, so remote clients could not log in, and an operator
// must choose the password they share.
func (r *Runtime) validateEmbedded(d *decoder) {
	pw := r.Broker.EmbeddedPassword.Reveal()
	if pw != "" && len(pw) < MinEmbeddedPassword {
		d.add("broker.embedded_password", "has %d characters%s; use at least %d (the value is not shown: it is a secret)", len(pw), d.origin("broker.embedded_password"), MinEmbeddedPassword)
	}
	addr := r.Broker.EmbeddedAddress
	host, _, err := net.SplitHostPort(addr)
	if err != nil || pw != "" {
		return
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return
	}
	d.add("broker.embedded_address", "%q%s listens beyond loopback, where anyone who reaches it could use the broker; set broker.embedded_password (or %sBROKER_EMBEDDED_PASSWORD, at least %d characters) so that every client must log in, or listen on 127.0.0.1", addr, d.origin("broker.embedded_address"), EnvPrefix, MinEmbeddedPassword)
}

// Source-only and sink-only keys of a [[topics]] block.
var (
	sourceOnlyKeys = []string{"linger_time", "create_topics", "partitions", "replication_factor"}
	sinkOnlyKeys   = []string{"pattern", "poll_interval"}
	schemas        = []string{"json", "raw", "text", "proto", "flatbuffer", "avro"}
)

func (c *Definition) validate(d *decoder) {
	switch {
	case !d.defined["type"]:
		d.add("type", "missing: set type = \"sink\" or type = \"source\"")
	default:
		d.oneOf("type", c.Type, "sink", "source")
	}
	switch {
	case !d.defined["key"] || c.Key == "":
		d.add("key", "missing: set a unique key of lowercase letters, digits and _, such as key = \"orders_s3\"")
	case !keyPattern.MatchString(c.Key):
		d.add("key", "%q is not allowed; use lowercase letters, digits and _ only, such as \"orders_s3\"", c.Key)
	}
	if c.Version < 0 {
		d.add("version", "%d%s: must not be negative", c.Version, d.origin("version"))
	}
	isSink, isSource := c.Type == "sink", c.Type == "source"
	if !d.defined["path"] || c.Path == "" {
		d.add("path", "missing: name the plugin, such as path = %q", examplePath(c.Type))
	} else if reg, ok := sdk.Lookup(c.Path); !ok || reg.Kind == sdk.KindTransform {
		var options []string
		switch {
		case isSink:
			options = sdk.Paths(sdk.KindSink)
		case isSource:
			options = sdk.Paths(sdk.KindSource)
		default:
			options = append(sdk.Paths(sdk.KindSink), sdk.Paths(sdk.KindSource)...)
		}
		msg := fmt.Sprintf("unknown plugin %q%s", c.Path, d.origin("path"))
		if s := confkit.DidYouMean(c.Path, options); s != "" {
			msg += s
		} else if len(options) > 0 {
			msg += "; this binary has " + strings.Join(options, ", ")
		} else {
			msg += "; this binary links no " + c.Type + " plugins"
		}
		d.add("path", "%s", msg)
	} else if (isSink || isSource) && string(reg.Kind) != c.Type {
		d.add("path", "%q is a %s plugin, but type = %q", c.Path, reg.Kind, c.Type)
	}
	if len(c.Topics) == 0 && (isSink || isSource) {
		if isSink {
			d.add("topics", "missing: a sink needs at least one [[topics]] block with pattern = '...' or topic = \"...\"")
		} else {
			d.add("topics", "missing: a source needs at least one [[topics]] block with topic = \"...\" or a routing rule")
		}
	}
	for i := range c.Topics {
		c.Topics[i].validate(d, fmt.Sprintf("topics[%d]", i), c.Type)
	}
}

func examplePath(typ string) string {
	if typ == "source" {
		return "libpicomq_connector_random_source"
	}
	return "libpicomq_connector_s3_sink"
}

// CheckSinkTarget checks what a sink's [[topics]] block consumes: exactly
// one of pattern (a regular expression that compiles) and topic (a valid
// literal name; routing rules are for sources). It returns a
// confkit.Problem whose key starts with block (such as "topics[0]"), or
// nil. Load reports it for every block it reads; the sink loop asks again
// for blocks built in code, so the rule is written once, here.
func (t Topics) CheckSinkTarget(block string) error {
	if p := t.sinkTarget(block, func(string) string { return "" }); p != nil {
		return *p
	}
	return nil
}

// sinkTarget is CheckSinkTarget; origin says where a key's value came from
// (" (from environment variable X)"), or "".
func (t Topics) sinkTarget(block string, origin func(key string) string) *confkit.Problem {
	k := func(name string) string { return block + "." + name }
	switch {
	case t.Pattern == "" && t.Topic.IsZero():
		return &confkit.Problem{Key: block, Message: "missing: set pattern = 'orders\\..*' (a regular expression) or topic = \"orders\""}
	case t.Pattern != "" && !t.Topic.IsZero():
		return &confkit.Problem{Key: block, Message: "set either pattern or topic, not both"}
	case t.Topic.IsRule():
		return &confkit.Problem{Key: k("topic"), Message: "a sink consumes a literal topic or a pattern; routing rules are for sources"}
	case t.Pattern != "":
		if _, err := regexp.Compile(t.Pattern); err != nil {
			msg := strings.TrimPrefix(err.Error(), "error parsing regexp: ")
			return &confkit.Problem{Key: k("pattern"), Value: t.Pattern,
				Message: fmt.Sprintf("%q%s is not a valid regular expression: %s", t.Pattern, origin(k("pattern")), msg)}
		}
	default:
		if msg := validTopicName(t.Topic.Literal); msg != "" {
			return &confkit.Problem{Key: k("topic"), Value: t.Topic.Literal, Message: fmt.Sprintf("%q %s", t.Topic.Literal, msg)}
		}
	}
	return nil
}

func (t *Topics) validate(d *decoder, key, typ string) {
	k := func(name string) string { return key + "." + name }
	switch typ {
	case "sink":
		for _, name := range sourceOnlyKeys {
			if d.defined[k(name)] {
				d.add(k(name), "%s is a source setting; remove it from this sink", name)
			}
		}
		if p := t.sinkTarget(key, d.origin); p != nil {
			d.add(p.Key, "%s", p.Message)
		}
		d.duration(k("poll_interval"), t.PollInterval)
	case "source":
		for _, name := range sinkOnlyKeys {
			if d.defined[k(name)] {
				d.add(k(name), "%s is a sink setting; a source names its destination with topic", name)
			}
		}
		for _, p := range t.Topic.check(k("topic"), d.origin) {
			d.add(p.Key, "%s", p.Message)
		}
		d.duration(k("linger_time"), t.LingerTime)
		if l, err := parseDuration(t.LingerTime); err == nil && l > MaxLingerTime {
			d.add(k("linger_time"), "%q%s is too long; use at most 15m (librdkafka's queue.buffering.max.ms bound)", t.LingerTime, d.origin(k("linger_time")))
		}
		for _, f := range []struct {
			name string
			v    int
		}{{"partitions", t.Partitions}, {"replication_factor", t.ReplicationFactor}} {
			if d.defined[k(f.name)] && f.v != 1 {
				d.add(k(f.name), "%s = %d%s is not supported: PicoMQ topics have one partition; set %s = 1 or remove it", f.name, f.v, d.origin(k(f.name)), f.name)
			}
		}
	}
	// A source encodes with the Avro schema; a sink hands it to the
	// plugin (sdk.TopicSchemas), such as the S3 sink's Parquet columns.
	if t.Schema == "avro" {
		switch {
		case t.AvroSchemaJSON == "" && t.AvroSchemaPath == "":
			d.add(key, "schema = \"avro\" needs avro_schema_json or avro_schema_path")
		case t.AvroSchemaJSON != "" && t.AvroSchemaPath != "":
			d.add(key, "set avro_schema_json or avro_schema_path, not both")
		default:
			// Parse it now, as the loop will: a schema that does not
			// parse, or a file that is not there, fails validate rather
			// than the first batch.
			if _, err := codec.New(codec.Options{Schema: t.Schema, AvroSchemaJSON: t.AvroSchemaJSON,
				AvroSchemaPath: t.AvroSchemaPath, BaseDir: filepath.Dir(d.file)}); err != nil {
				d.add(key, "%v (paths are relative to the definition file)", err)
			}
		}
	} else if t.AvroSchemaJSON != "" || t.AvroSchemaPath != "" {
		d.add(key, "avro_schema_json and avro_schema_path apply only with schema = \"avro\"")
	}
	if d.defined[k("schema")] {
		d.oneOf(k("schema"), t.Schema, schemas...)
	}
	t.checkDeadLetterTopic(d, key, typ)
	d.checkProducerProperties(k("properties"), t.Properties)
	if d.defined[k("batch_length")] && (t.BatchLength < 1 || t.BatchLength > MaxBatchLength) {
		d.add(k("batch_length"), "%d%s: must be 1 to %d", t.BatchLength, d.origin(k("batch_length")), MaxBatchLength)
	}
}

func (c *Definition) fillDefaults(defined map[string]bool) {
	if !defined["enabled"] {
		c.Enabled = true
	}
	for i := range c.Topics {
		t := &c.Topics[i]
		if t.Schema == "" {
			t.Schema = DefaultSchema
		}
		if t.BatchLength == 0 {
			t.BatchLength = DefaultBatchLength
		}
		switch c.Type {
		case "sink":
			if t.PollInterval == "" {
				t.PollInterval = DefaultPollInterval
			}
		case "source":
			if t.LingerTime == "" {
				t.LingerTime = DefaultLingerTime
			}
			if t.Partitions == 0 {
				t.Partitions = 1
			}
			if t.ReplicationFactor == 0 {
				t.ReplicationFactor = 1
			}
		}
	}
}

// parseDuration is the duration syntax of both files, the generated
// configs' too.
func parseDuration(s string) (time.Duration, error) { return confkit.ParseDuration(s) }

func mustDuration(s, def string) time.Duration {
	if s == "" {
		s = def
	}
	d, err := parseDuration(s)
	if err != nil {
		d, _ = parseDuration(def)
	}
	return d
}

// ShutdownGraceDuration is shutdown_grace parsed (the default on a bad value).
func (r Runtime) ShutdownGraceDuration() time.Duration {
	return mustDuration(r.ShutdownGrace, DefaultShutdownGrace)
}

// TimeoutDuration is timeout parsed.
func (s StateHTTP) TimeoutDuration() time.Duration {
	return mustDuration(s.Timeout, DefaultStateTimeout)
}

// RetryDelayDuration is retry_delay parsed.
func (s StateHTTP) RetryDelayDuration() time.Duration {
	return mustDuration(s.RetryDelay, DefaultStateRetryDelay)
}

// PollIntervalDuration is poll_interval parsed.
func (t Topics) PollIntervalDuration() time.Duration {
	return mustDuration(t.PollInterval, DefaultPollInterval)
}

// LingerTimeDuration is linger_time parsed.
func (t Topics) LingerTimeDuration() time.Duration {
	return mustDuration(t.LingerTime, DefaultLingerTime)
}
