package definition

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

// envLookup returns a sdk.LookupEnv over env that records what it found.
func envLookup(env map[string]string, used map[string]bool) sdk.LookupEnv {
	return func(name string) (string, bool) {
		v, ok := env[name]
		if ok {
			used[name] = true
		}
		return v, ok
	}
}

// loadPlugin runs the registration's Load on plugin_config and each
// transform's Load on its block, collecting their problems.
func (def *Definition) loadPlugin(d *decoder, env map[string]string, used map[string]bool, transformPrefixes []string) {
	if def.EnvPrefix == "" {
		env = map[string]string{}
	}
	lookup := envLookup(env, used)
	if reg, ok := sdk.Lookup(def.Path); ok && string(reg.Kind) == def.Type {
		def.Registration = reg
		if reg.Load == nil {
			d.add("path", "plugin %q has no Load function; rebuild with picogen gen", def.Path)
		} else {
			raw := def.PluginConfig
			if raw == nil {
				raw = map[string]any{}
			}
			cfg, err := safeLoad(reg.Load, raw, def.EnvPrefix+"PLUGIN_CONFIG_", lookup)
			if err != nil {
				d.problems = append(d.problems, convertProblems(d.file, "plugin_config", err)...)
			} else {
				def.Plugin = cfg
			}
		}
	}
	for i, m := range def.Connector.Transforms {
		t := Transform{Enabled: true}
		if i < len(transformPrefixes) && def.EnvPrefix != "" {
			t.EnvPrefix = transformPrefixes[i]
		}
		key := fmt.Sprintf("transforms[%d]", i)
		t.Type, _ = m["type"].(string)
		if b, ok := m["enabled"].(bool); ok {
			t.Enabled = b
		}
		body := map[string]any{}
		for k, v := range m {
			if k != "type" && k != "enabled" {
				body[k] = v
			}
		}
		if t.Type != "" {
			reg, ok := sdk.Lookup(t.Type)
			if !ok || reg.Kind != sdk.KindTransform {
				d.add(key+".type", "unknown transform %q%s", t.Type, confkit.DidYouMeanOrAllowed(t.Type, sdk.Paths(sdk.KindTransform)))
			} else if reg.Load != nil {
				t.Registration = reg
				cfg, err := safeLoad(reg.Load, body, t.EnvPrefix, lookup)
				if err != nil {
					d.problems = append(d.problems, convertProblems(d.file, key, err)...)
				} else {
					t.Config = cfg
				}
			}
		}
		def.Transforms = append(def.Transforms, t)
	}
}

// safeLoad calls a generated Load, turning a panic into an error.
func safeLoad(load func(map[string]any, string, sdk.LookupEnv) (sdk.Config, error), raw map[string]any, prefix string, env sdk.LookupEnv) (cfg sdk.Config, err error) {
	defer func() {
		if r := recover(); r != nil {
			cfg, err = nil, fmt.Errorf("the plugin's config loader failed unexpectedly: %v", r)
		}
	}()
	return load(raw, prefix, env)
}

// convertProblems splits a Load error into problems of file under key:
// each confkit.Problem keeps its own key path below key, its value and its
// rule; anything else becomes one problem per line.
func convertProblems(file, key string, err error) confkit.Problems {
	out := confkit.ProblemsOf(err)
	for i := range out {
		p := &out[i]
		if p.File == "" {
			p.File = file
		}
		if p.Key != "" {
			p.Key = key + "." + p.Key
		} else {
			p.Key = key
		}
	}
	return out
}

// unknownVariables reports PICOMQ_CONNECTORS_ variables that changed
// nothing: a misspelt name would otherwise be ignored silently.
func unknownVariables(cfg *Config, env map[string]string, used map[string]bool, known []string) confkit.Problems {
	var out confkit.Problems
	names := slices.Sorted(maps.Keys(env))
	for _, name := range names {
		if !strings.HasPrefix(name, EnvPrefix) || used[name] {
			continue
		}
		rest := strings.TrimPrefix(name, EnvPrefix)
		var kind string
		switch {
		case strings.HasPrefix(rest, "SINK_"):
			kind = "sink"
		case strings.HasPrefix(rest, "SOURCE_"):
			kind = "source"
		}
		if kind == "" {
			msg := fmt.Sprintf("environment variable %s matches no key of the runtime config", name)
			msg += confkit.DidYouMean(name, known)
			out = append(out, confkit.Problem{File: cfg.File, Message: msg})
			continue
		}
		var owner *Definition
		for _, d := range cfg.Connectors {
			if d.EnvPrefix != "" && strings.HasPrefix(name, d.EnvPrefix) && (owner == nil || len(d.EnvPrefix) > len(owner.EnvPrefix)) {
				owner = d
			}
		}
		if owner == nil {
			var keys []string
			for _, d := range cfg.Connectors {
				if d.Type == kind {
					keys = append(keys, d.Key)
				}
			}
			slices.Sort(keys)
			msg := fmt.Sprintf("environment variable %s names no %s definition in %s", name, kind, cfg.Dir)
			if len(keys) > 0 {
				msg += fmt.Sprintf(" (%ss: %s)", kind, strings.Join(keys, ", "))
			}
			out = append(out, confkit.Problem{File: cfg.File, Message: msg})
			continue
		}
		msg := fmt.Sprintf("environment variable %s matches no key of this definition", name)
		if strings.HasPrefix(name, owner.EnvPrefix+"PLUGIN_CONFIG_") {
			msg = fmt.Sprintf("environment variable %s matches no plugin_config key of %s", name, owner.Path)
		} else {
			msg += confkit.DidYouMean(name, known)
		}
		out = append(out, confkit.Problem{File: owner.File, Message: msg})
	}
	return out
}
