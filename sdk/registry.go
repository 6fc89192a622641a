package sdk

import (
	"fmt"
	"sort"
	"sync"
)

// LookupEnv reads an environment variable; os.LookupEnv is one.
type LookupEnv func(name string) (string, bool)

// Registration describes one connector or transform to the runtime. picogen
// generates it from the schema; connectors never fill it in by hand.
type Registration struct {
	// Name is the schema's name, such as "s3_sink".
	Name string
	// Path is what a definition file's path key names, such as
	// "libpicomq_connector_s3_sink". Transforms use their name.
	Path string
	Kind Kind
	// Summary is the one-line description from the schema.
	Summary string
	// Schema is the JSON Schema of the plugin_config table.
	Schema []byte
	// Load decodes and validates a plugin_config table, after applying
	// overrides read from environment variables named envPrefix + FIELD.
	Load func(raw map[string]any, envPrefix string, env LookupEnv) (Config, error)
	// NewSink builds a sink from a config Load returned (sinks only).
	NewSink func(cfg Config, env Env) (Sink, error)
	// NewSource builds a source from a config Load returned (sources only).
	NewSource func(cfg Config, env Env) (Source, error)
	// NewTransform builds a transform (transforms only).
	NewTransform func(cfg Config) (Transform, error)
}

var registry = struct {
	sync.RWMutex
	byPath map[string]Registration
}{byPath: map[string]Registration{}}

// Register adds a connector or transform. It panics on a duplicate path,
// which is a programming error caught by the first test that links both.
func Register(r Registration) {
	registry.Lock()
	defer registry.Unlock()
	if _, dup := registry.byPath[r.Path]; dup {
		panic(fmt.Sprintf("plugin: %q registered twice", r.Path))
	}
	registry.byPath[r.Path] = r
}

// Lookup finds the registration for a definition's path.
func Lookup(path string) (Registration, bool) {
	registry.RLock()
	defer registry.RUnlock()
	r, ok := registry.byPath[path]
	return r, ok
}

// All returns every registration, sorted by path.
func All() []Registration {
	registry.RLock()
	defer registry.RUnlock()
	out := make([]Registration, 0, len(registry.byPath))
	for _, r := range registry.byPath {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// Paths returns the registered paths of one kind, sorted; used for
// "did you mean" suggestions.
func Paths(kind Kind) []string {
	var out []string
	for _, r := range All() {
		if r.Kind == kind {
			out = append(out, r.Path)
		}
	}
	return out
}

// TypedLoad adapts a generated, typed Load to Registration.Load. A failed
// load returns a nil Config, never a typed zero value.
func TypedLoad[C Config](load func(raw map[string]any, envPrefix string, env LookupEnv) (C, error)) func(map[string]any, string, LookupEnv) (Config, error) {
	return func(raw map[string]any, envPrefix string, env LookupEnv) (Config, error) {
		c, err := load(raw, envPrefix, env)
		if err != nil {
			return nil, err
		}
		return c, nil
	}
}

// TypedSink adapts a connector's typed constructor to Registration.NewSink.
func TypedSink[C Config](name string, newSink func(cfg C, env Env) (Sink, error)) func(Config, Env) (Sink, error) {
	return typedConstructor(name, newSink)
}

// TypedSource adapts a connector's typed constructor to Registration.NewSource.
func TypedSource[C Config](name string, newSource func(cfg C, env Env) (Source, error)) func(Config, Env) (Source, error) {
	return typedConstructor(name, newSource)
}

// typedConstructor adapts newPlugin, which takes the plugin's own config
// type C, to a Registration constructor, which takes a Config.
func typedConstructor[C Config, P any](name string, newPlugin func(cfg C, env Env) (P, error)) func(Config, Env) (P, error) {
	return func(cfg Config, env Env) (P, error) {
		c, err := typed[C](name, cfg)
		if err != nil {
			var none P
			return none, err
		}
		return newPlugin(c, env)
	}
}

// TypedTransform adapts a transform's typed constructor to
// Registration.NewTransform.
func TypedTransform[C Config](name string, newTransform func(cfg C) (Transform, error)) func(Config) (Transform, error) {
	return func(cfg Config) (Transform, error) {
		c, err := typed[C](name, cfg)
		if err != nil {
			return nil, err
		}
		return newTransform(c)
	}
}

// typed checks that cfg came from the plugin's own Load.
func typed[C Config](name string, cfg Config) (C, error) {
	c, ok := cfg.(C)
	if !ok {
		var want C
		return want, fmt.Errorf("%s: config is %T, not %T", name, cfg, want)
	}
	return c, nil
}
