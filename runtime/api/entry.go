package api

import (
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// NewEntry builds a connector's entry from its definition and a snapshot
// of its tracker. A supervisor's List and Get can return it as is.
func NewEntry(def definition.Connector, snap status.Snapshot) Entry {
	e := Entry{
		Key:         def.Key,
		Type:        def.Type,
		Name:        def.Name,
		Path:        def.Path,
		Version:     def.Version,
		Enabled:     def.Enabled,
		Status:      snap.Status,
		LastError:   snap.LastError,
		LastErrorAt: snap.LastErrorAt,
		Topics:      TopicNames(def),
		Counters:    snap.Counters,
		Placement:   snap.Placement,
		Snapshots:   snap.Snapshots,
	}
	if e.Key == "" {
		e.Key = snap.Key
	}
	if e.Type == "" {
		e.Type = snap.Kind
	}
	return e
}

// TopicNames lists what each [[topics]] block of def reads or writes: the
// literal topic, a sink's pattern, or a source's routing template (with
// its fallback, if any, as a second name).
func TopicNames(def definition.Connector) []string {
	out := []string{}
	for _, t := range def.Topics {
		switch {
		case t.Pattern != "":
			out = append(out, t.Pattern)
		case t.Topic.Literal != "":
			out = append(out, t.Topic.Literal)
		case t.Topic.Template != "":
			out = append(out, t.Topic.Template)
			if t.Topic.Fallback != "" {
				out = append(out, t.Topic.Fallback)
			}
		}
	}
	return out
}

// Definition builds the effective definition of a connector for GET
// /{kind}/{key}/config: the definition's own keys, its [[topics]] blocks,
// and its plugin_config and transforms as their loaded, typed configs
// render them through Redacted, so secrets are masked by the generated
// code and never by guessing from key names.
//
// def.PluginConfig, which may hold secrets in clear, is never copied: with
// a nil cfg the plugin_config is omitted. transforms[i] is the loaded
// config of def.Transforms[i]; a missing or nil one shows only the
// transform's type. librdkafka properties that librdkafka itself treats
// as sensitive (sasl.password, ssl.key.password and the like) are masked.
func Definition(def definition.Connector, cfg sdk.Config, transforms []sdk.Config) map[string]any {
	out := map[string]any{
		"type":    def.Type,
		"key":     def.Key,
		"enabled": def.Enabled,
		"version": def.Version,
		"path":    def.Path,
	}
	if def.Name != "" {
		out["name"] = def.Name
	}
	topics := make([]map[string]any, 0, len(def.Topics))
	for _, t := range def.Topics {
		topics = append(topics, topicMap(t))
	}
	out["topics"] = topics
	if len(def.Transforms) > 0 {
		ts := make([]map[string]any, 0, len(def.Transforms))
		for i, raw := range def.Transforms {
			m := map[string]any{}
			if i < len(transforms) && transforms[i] != nil {
				for k, v := range transforms[i].Redacted() {
					m[k] = v
				}
			}
			if typ, ok := raw["type"].(string); ok {
				m["type"] = typ
			}
			if on, ok := raw["enabled"].(bool); ok {
				m["enabled"] = on
			}
			ts = append(ts, m)
		}
		out["transforms"] = ts
	}
	if cfg != nil {
		out["plugin_config"] = cfg.Redacted()
	}
	return out
}

func topicMap(t definition.Topics) map[string]any {
	m := map[string]any{}
	switch {
	case t.Topic.Literal != "":
		m["topic"] = t.Topic.Literal
	case t.Topic.Strategy != "" || t.Topic.Template != "":
		r := map[string]any{"strategy": t.Topic.Strategy}
		if t.Topic.Path != "" {
			r["path"] = t.Topic.Path
		}
		if t.Topic.Template != "" {
			r["template"] = t.Topic.Template
		}
		if t.Topic.Fallback != "" {
			r["fallback"] = t.Topic.Fallback
		}
		m["topic"] = r
	}
	set := func(k, v string) {
		if v != "" {
			m[k] = v
		}
	}
	set("pattern", t.Pattern)
	set("poll_interval", t.PollInterval)
	set("schema", t.Schema)
	set("avro_schema_json", t.AvroSchemaJSON)
	set("avro_schema_path", t.AvroSchemaPath)
	set("linger_time", t.LingerTime)
	if t.BatchLength != 0 {
		m["batch_length"] = t.BatchLength
	}
	if t.CreateTopics {
		m["create_topics"] = true
	}
	if t.Partitions != 0 {
		m["partitions"] = t.Partitions
	}
	if t.ReplicationFactor != 0 {
		m["replication_factor"] = t.ReplicationFactor
	}
	if len(t.Properties) > 0 {
		m["properties"] = MaskProperties(t.Properties)
	}
	return m
}

// MaskProperties copies librdkafka properties for display, masking the
// values of those librdkafka treats as sensitive (sasl.password,
// ssl.key.password, ...) and of any whose name ends in password or secret.
// It is definition.MaskProperties, so the API and the config command mask
// the same keys.
func MaskProperties(props map[string]string) map[string]string {
	return definition.MaskProperties(props)
}
