// Package templates holds the files picogen new renders for a new
// connector, embedded in the picogen binary. Each kind (sink, source) has
// one folder; every *.tmpl file in it is a text/template rendered with a
// Data value, and its output path is given by Outputs.
package templates

import (
	"embed"
	"io/fs"
)

// FS holds sink/, source/ and module/.
//
//go:embed sink source module
var FS embed.FS

// Data is what the templates see.
type Data struct {
	// Name is the connector's name, such as "webhook_sink".
	Name string
	// Short is the name the user gave, such as "webhook".
	Short string
	// Kind is "sink" or "source".
	Kind string
	// Pkg is the connector's Go package name, such as "webhooksink".
	Pkg string
	// ConfigPkg is the generated config package name, "webhooksinkconfig".
	ConfigPkg string
	// Module is the Go module path of the module the connector is written
	// into.
	Module string
	// SDK is the module path of pico-connectors, whose packages the
	// connector imports.
	SDK string
	// ExampleDir is the folder of the example definition, relative to the
	// module root: the runtime config's connectors_dir in a module of its
	// own (examples/connectors), examples in pico-connectors itself.
	ExampleDir string
	// Bin is the name of the module's runtime binary, cmd/Bin.
	Bin string
	// Path is the plugin path a definition names,
	// "libpicomq_connector_webhook_sink".
	Path string
	// Title is a human-readable name, such as "Webhook sink".
	Title string
	// Key is the connector key of the example definition, such as
	// "webhook".
	Key string
	// EnvPrefix is the prefix of the plugin_config environment overrides
	// of the example definition.
	EnvPrefix string
	// Topic is the topic the example definition reads or writes.
	Topic string
}

// Outputs maps each template of kind to the path it renders to, relative
// to the module root, with NAME standing for Data.Name and EXAMPLES for
// Data.ExampleDir.
var Outputs = map[string]map[string]string{
	"sink": {
		"sink/schema.json.tmpl":       "schemas/NAME.json",
		"sink/connector.go.tmpl":      "connectors/NAME/sink.go",
		"sink/connector_test.go.tmpl": "connectors/NAME/sink_test.go",
		"sink/example.toml.tmpl":      "EXAMPLES/NAME.toml",
	},
	"source": {
		"source/schema.json.tmpl":       "schemas/NAME.json",
		"source/connector.go.tmpl":      "connectors/NAME/source.go",
		"source/connector_test.go.tmpl": "connectors/NAME/source_test.go",
		"source/example.toml.tmpl":      "EXAMPLES/NAME.toml",
	},
}

// ModuleOutputs are the files the first picogen new writes into a module
// other than pico-connectors: the runtime binary and a runtime config that
// runs the example definitions. Each is written only when missing.
var ModuleOutputs = map[string]string{
	"module/main.go.tmpl":      "cmd/BIN/main.go",
	"module/runtime.toml.tmpl": "examples/runtime.toml",
	"module/random.toml.tmpl":  "EXAMPLES/random.toml",
	"module/gitignore.tmpl":    "examples/.gitignore",
}

// InSDK reports whether the connector is written into pico-connectors
// itself rather than a module of its own.
func (d Data) InSDK() bool { return d.Module == d.SDK }

// Files lists the templates of kind, as paths in FS.
func Files(kind string) ([]string, error) {
	return fs.Glob(FS, kind+"/*.tmpl")
}
