package sdk

// TopicSchema is one [[topics]] block of a sink's definition: the topic or
// pattern it names and the schema of its payloads.
type TopicSchema struct {
	// Block is the block's index in the definition: topics[Block].
	Block int
	// Topic is the block's topic name, or its regular expression when
	// Pattern is true. A topic matches the first block that names it.
	Topic   string
	Pattern bool
	// Schema is the block's schema (SchemaJSON when it sets none).
	Schema Schema
	// AvroSchema is the Avro schema's JSON text, from avro_schema_json or
	// the file avro_schema_path names, when Schema is SchemaAvro; empty
	// otherwise.
	AvroSchema string
}

// TopicSchemas is a Sink that needs its topics' schemas, for instance to
// derive the layout of what it writes from an Avro schema. The runtime
// calls SetTopics once, before Open, with every [[topics]] block in order;
// pico-connectors validate calls it too, after building the sink. An error
// stops the sink before Open; it should name the block (topics[i]) and the
// plugin_config key it conflicts with.
type TopicSchemas interface {
	Sink
	SetTopics(topics []TopicSchema) error
}
