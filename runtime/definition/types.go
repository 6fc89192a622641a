// Package definition holds the two files an operator writes: the runtime's
// own config and one definition file per connector, as Go structs. Their
// JSON Schemas are reflected from these structs (invopop/jsonschema) into
// schemas/runtime/, so an editor can complete both files.
package definition

import "github.com/picomq/pico-connectors/runtime/confkit"

// Runtime is the runtime config file given to pico-connectors --config.
type Runtime struct {
	// Broker says where PicoMQ is.
	Broker Broker `toml:"broker" json:"broker,omitempty" jsonschema:"description=Where PicoMQ is. With no bootstrap_servers an embedded broker is started."`
	// HTTP is the operator API.
	HTTP HTTP `toml:"http" json:"http,omitempty" jsonschema:"description=The HTTP API, metrics and health endpoint."`
	// State is where sources keep their checkpoints.
	State State `toml:"state" json:"state,omitempty" jsonschema:"description=Where sources keep their checkpoints."`
	// ConnectorsDir holds one definition file (*.toml) per connector.
	ConnectorsDir string `toml:"connectors_dir" json:"connectors_dir,omitempty" jsonschema:"description=Folder with one definition file (*.toml) per connector. Relative to the runtime config file.,default=connectors"`
	// Log configures logging.
	Log Log `toml:"log" json:"log,omitempty" jsonschema:"description=Logging."`
	// ShutdownGrace bounds a graceful stop.
	ShutdownGrace string `toml:"shutdown_grace" json:"shutdown_grace,omitempty" jsonschema:"description=How long a graceful stop may take before the runtime exits anyway.,default=30s"`
	// Mode says whether this runtime shares its connectors with others
	// (see fleet.go).
	Mode string `toml:"mode" json:"mode,omitempty" jsonschema:"enum=standalone,enum=distributed,default=standalone,description=standalone: this runtime runs every source it is given. distributed: runtimes with the same sources share them through the broker's group protocol and each source runs on exactly one of them (needs state.storage = \"broker\")."`
	// ID is this runtime's id, stable across restarts.
	ID string `toml:"id" json:"id,omitempty" jsonschema:"description=This runtime's id in a fleet: the group.instance.id of its sinks and source leases (static membership: a runtime restarted under the same id gets its work back at once). Keep it stable across restarts and unique in the fleet. Default: HOSTNAME-PORT with the port of http.address (two runtimes on one host listen on two ports)."`
	// Fleet tunes how runtimes share sources in distributed mode.
	Fleet Fleet `toml:"fleet" json:"fleet,omitempty" jsonschema:"description=How runtimes in distributed mode share the sources."`
}

// Fleet tunes how runtimes in distributed mode share the sources.
type Fleet struct {
	SessionTimeout string `toml:"session_timeout" json:"session_timeout,omitempty" jsonschema:"description=How long the broker waits for a runtime that stopped answering (crashed or paused) before its sources and sink partitions move to the others: a takeover takes this plus the source's start-up. A runtime that stops gracefully hands its sources over at once; one restarted under the same id within it gets them back at once. It is also the session.timeout.ms of the sinks' consumers: 1s to 5m, or up to a max.poll.interval.ms set in broker.properties. The broker bounds it too (6s at least on the embedded broker).,default=10s"`
	LeaseTopic     string `toml:"lease_topic" json:"lease_topic,omitempty" jsonschema:"description=One-partition topic each source's lease group subscribes to; created when missing. It holds no records.,default=pico-connectors.leases"`
}

// Broker says where PicoMQ is.
type Broker struct {
	BootstrapServers string            `toml:"bootstrap_servers" json:"bootstrap_servers,omitempty" jsonschema:"description=Comma-separated host:port list. Empty starts an embedded broker."`
	EmbeddedAddress  string            `toml:"embedded_address" json:"embedded_address,omitempty" jsonschema:"description=Listen address of the embedded broker. Beyond loopback (0.0.0.0 or another host) it needs embedded_password.,default=127.0.0.1:9092"`
	EmbeddedPassword confkit.Secret    `toml:"embedded_password" json:"embedded_password,omitempty" jsonschema:"description=Password of the embedded broker's SASL/SCRAM-SHA-256 user pico-connectors: the runtime's own clients log in with it and no ACL limits it. At least 12 characters. Every client must log in; other users (made with this password through the Kafka admin API) may only produce and consume the topics named in the definitions. Empty: a random password kept in data_dir/embedded-password (mode 0600) or in memory when data_dir is empty. Needed when embedded_address is beyond loopback. Secret."`
	DataDir          string            `toml:"data_dir" json:"data_dir,omitempty" jsonschema:"description=Folder where the embedded broker keeps its topics, records and committed offsets, written synchronously so an acknowledged record survives a crash. Relative to the runtime config file. Unused with bootstrap_servers.,default=broker-data"`
	Properties       map[string]string `toml:"properties" json:"properties,omitempty" jsonschema:"description=librdkafka settings applied to every client. Producers always run with enable.idempotence=true and acks=all: acks 0 or 1, enable.idempotence=false and max.in.flight.requests.per.connection above 5 are refused."`
}

// HTTP configures the operator API.
type HTTP struct {
	Address string         `toml:"address" json:"address,omitempty" jsonschema:"description=Listen address of the API.,default=127.0.0.1:8081"`
	APIKey  confkit.Secret `toml:"api_key" json:"api_key,omitempty" jsonschema:"description=Optional API key, sent as Authorization: Bearer or api-key. Secret."`
	TLSCert string         `toml:"tls_cert" json:"tls_cert,omitempty" jsonschema:"description=PEM certificate file; with tls_key, serves HTTPS."`
	TLSKey  string         `toml:"tls_key" json:"tls_key,omitempty" jsonschema:"description=PEM private key file."`
	// AllowedHosts are further names the API answers to.
	AllowedHosts []string `toml:"allowed_hosts" json:"allowed_hosts,omitempty" jsonschema:"description=Host names (or host:port) a request's Host header may carry besides an IP address and localhost and the host of address: the names the API is reached by such as a service name. A request for any other name gets 421 which keeps a web page on a rebound name (DNS rebinding) off the API."`
}

// State is where sources keep their checkpoints.
type State struct {
	Storage string    `toml:"storage" json:"storage,omitempty" jsonschema:"enum=file,enum=http,enum=broker,default=file,description=file: one file per source. http: a state service. broker: a compacted topic per source in the broker (needed by mode = \"distributed\")."`
	Topic   string    `toml:"topic" json:"topic,omitempty" jsonschema:"description=The broker store: prefix of the state topics; source KEY keeps its checkpoints in TOPIC.KEY (compacted, one partition, created when missing).,default=pico-connectors.state"`
	Path    string    `toml:"path" json:"path,omitempty" jsonschema:"description=Folder for the file store, one file per source. Relative to the runtime config file.,default=state"`
	HTTP    StateHTTP `toml:"http" json:"http,omitempty" jsonschema:"description=The http store."`
	// SigningKey signs the broker store's checkpoints.
	SigningKey confkit.Secret `toml:"signing_key" json:"signing_key,omitempty" jsonschema:"description=The broker store: a secret of at least 32 bytes (such as the output of openssl rand -hex 32) with which every checkpoint is signed (HMAC-SHA256). A source then resumes only from a checkpoint signed with it: a record that another client produced into the state topic is logged and skipped. Set it before the first start: checkpoints saved without it (or with another key) are skipped too and their sources start as new. Every runtime of a fleet needs the same key. Secret."`
}

// StateHTTP configures the http state store.
type StateHTTP struct {
	URL         string         `toml:"url" json:"url,omitempty" jsonschema:"description=Base URL; the state of source KEY is at URL/KEY."`
	Timeout     string         `toml:"timeout" json:"timeout,omitempty" jsonschema:"description=Timeout of one request.,default=5s"`
	MaxAttempts int            `toml:"max_attempts" json:"max_attempts,omitempty" jsonschema:"description=Attempts per load or save.,default=5"`
	RetryDelay  string         `toml:"retry_delay" json:"retry_delay,omitempty" jsonschema:"description=Base delay between attempts, doubled each time with jitter.,default=200ms"`
	APIKey      confkit.Secret `toml:"api_key" json:"api_key,omitempty" jsonschema:"description=Optional bearer token. Secret."`
}

// Log configures logging.
type Log struct {
	Format string `toml:"format" json:"format,omitempty" jsonschema:"enum=text,enum=json,default=text"`
	Level  string `toml:"level" json:"level,omitempty" jsonschema:"enum=debug,enum=info,enum=warn,enum=error,default=info"`
}

// Connector is one connector's definition file.
type Connector struct {
	Type       string           `toml:"type" json:"type" jsonschema:"enum=sink,enum=source,description=sink or source."`
	Key        string           `toml:"key" json:"key" jsonschema:"pattern=^[a-z0-9_]+$,description=Unique key; names the state file, API paths and env variables."`
	Enabled    bool             `toml:"enabled" json:"enabled" jsonschema:"description=Disabled connectors are loaded and reported but not started.,default=true"`
	Version    int              `toml:"version" json:"version" jsonschema:"description=Definition version, for the operator's own bookkeeping."`
	Name       string           `toml:"name" json:"name,omitempty" jsonschema:"description=Human-readable name."`
	Path       string           `toml:"path" json:"path" jsonschema:"description=The plugin, such as libpicomq_connector_s3_sink."`
	Topics     []Topics         `toml:"topics" json:"topics,omitempty" jsonschema:"description=Sinks: what to consume. Sources: one producer per block."`
	Transforms []map[string]any `toml:"transforms" json:"transforms,omitempty" jsonschema:"description=Transforms run in order between decode and routing; each block has a type and that transform's keys."`
	// PluginConfig is decoded by the plugin's generated Load.
	PluginConfig map[string]any `toml:"plugin_config" json:"plugin_config,omitempty" jsonschema:"description=The plugin's own configuration; see its reference page."`
}

// Topics is one [[topics]] block. Sinks use Pattern (or Topic as a literal
// name) with BatchLength and PollInterval; sources use Topic as a literal
// name or a routing rule, with the producer settings.
type Topics struct {
	// Sink side.
	Pattern      string `toml:"pattern" json:"pattern,omitempty" jsonschema:"description=Sinks: regular expression of topics to consume."`
	PollInterval string `toml:"poll_interval" json:"poll_interval,omitempty" jsonschema:"description=Sinks: longest wait for a batch to fill.,default=100ms"`
	// Both sides.
	Topic       Route  `toml:"topic" json:"topic,omitempty" jsonschema:"description=A literal topic name, or a routing rule (sources)."`
	Schema      string `toml:"schema" json:"schema,omitempty" jsonschema:"enum=json,enum=raw,enum=text,enum=proto,enum=flatbuffer,enum=avro,default=json"`
	BatchLength int    `toml:"batch_length" json:"batch_length,omitempty" jsonschema:"description=Sinks: records per batch. Sources: producer batch size. 1 to 1000000 (librdkafka's batch.num.messages bound).,default=1000,minimum=1,maximum=1000000"`
	// Source side.
	AvroSchemaJSON    string            `toml:"avro_schema_json" json:"avro_schema_json,omitempty" jsonschema:"description=The Avro schema, inline, when schema = avro."`
	AvroSchemaPath    string            `toml:"avro_schema_path" json:"avro_schema_path,omitempty" jsonschema:"description=The Avro schema file, when schema = avro."`
	LingerTime        string            `toml:"linger_time" json:"linger_time,omitempty" jsonschema:"description=Producer linger, passed to librdkafka; at most 15m.,default=5ms"`
	CreateTopics      bool              `toml:"create_topics" json:"create_topics,omitempty" jsonschema:"description=Create missing destination topics through the admin API."`
	Partitions        int               `toml:"partitions" json:"partitions,omitempty" jsonschema:"description=Accepted only as 1.,default=1"`
	ReplicationFactor int               `toml:"replication_factor" json:"replication_factor,omitempty" jsonschema:"description=Accepted only as 1.,default=1"`
	Properties        map[string]string `toml:"properties" json:"properties,omitempty" jsonschema:"description=Any other librdkafka producer or consumer setting. Producers always run with enable.idempotence=true and acks=all: acks 0 or 1, enable.idempotence=false and max.in.flight.requests.per.connection above 5 are refused."`
	// DeadLetterTopic receives the records of this block that can never be
	// delivered, with headers that say why (package deadletter).
	DeadLetterTopic string `toml:"dead_letter_topic" json:"dead_letter_topic,omitempty" jsonschema:"description=Topic for records that can never be delivered: sinks send what the plugin rejects, sources what fails decode, transform or routing. Each carries headers naming the error, the connector and where it came from. Empty: such a record fails its batch."`
}

// Route is a [[topics]] block's topic: a literal name, or a rule.
// In TOML it is either a string or an inline table such as
// { strategy = "field", path = "tenant", template = "orders.{value}" }.
type Route struct {
	// Literal is set when topic is a plain string.
	Literal string `json:"-"`
	// Strategy is field, key or header.
	Strategy string `toml:"strategy" json:"strategy,omitempty" jsonschema:"enum=field,enum=key,enum=header"`
	// Path is the JSON field path (field) or header name (header).
	Path string `toml:"path" json:"path,omitempty"`
	// Template renders the topic; {value} is the routed value.
	Template string `toml:"template" json:"template,omitempty"`
	// Fallback is the topic for records the rule cannot route.
	Fallback string `toml:"fallback" json:"fallback,omitempty"`
}
