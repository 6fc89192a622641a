package fleet

import (
	"fmt"

	"github.com/picomq/pico-connectors/runtime/servertest/s3test"
)

// S3SinkDef is an S3 sink definition (the default delivery, exactly_once;
// JSON lines with metadata, files of perFile records under key/<topic>/)
// over the topics matching pattern. props, when not empty, is the block's
// properties table body (`"session.timeout.ms" = "6000"`); extra is
// appended to [plugin_config], and may set delivery.
func S3SinkDef(key, pattern string, srv *s3test.Server, perFile int, props, extra string) string {
	return fmt.Sprintf(`type = "sink"
key = %q
path = "libpicomq_connector_s3_sink"
[[topics]]
pattern = %q
schema = "json"
batch_length = 200
poll_interval = "50ms"
properties = { %s }
[plugin_config]
bucket = %q
region = "us-east-1"
endpoint = %q
access_key_id = %q
secret_access_key = %q
prefix = %q
path_template = "{topic}"
file_rotation = "messages"
max_messages_per_file = %d
include_metadata = true
%s`, key, pattern, props, srv.Bucket, srv.Endpoint, srv.AccessKey, srv.SecretKey, key, perFile, extra)
}

// SourceDef is the text of a source definition: key, the plugin at path
// (such as libpicomq_connector_random_source), one [[topics]] block that
// writes topic and creates it when missing, and then pluginConfig, the
// lines of the [plugin_config] table.
func SourceDef(key, path, topic, pluginConfig string) string {
	return fmt.Sprintf(`type = "source"
key = %q
path = %q
[[topics]]
topic = %q
create_topics = true
[plugin_config]
%s`, key, path, topic, pluginConfig)
}
