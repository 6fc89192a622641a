package fleet

import "fmt"

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
