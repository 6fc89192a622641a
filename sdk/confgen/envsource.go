package confgen

import (
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// NameEnvSources starts the message of every problem of a key that an
// environment variable of bindings set with "environment variable NAME: ",
// so that a bad value from the environment does not blame the file, which
// may say something else. Problems of BindEnv (rule "env") name it already.
func NameEnvSources(ps confkit.Problems, bindings []EnvBinding, prefix string, lookup func(string) (string, bool)) {
	if lookup == nil || len(ps) == 0 {
		return
	}
	for _, b := range bindings {
		name := prefix + b.Suffix
		if _, set := lookup(name); !set {
			continue
		}
		key := strings.Join(b.Path, ".")
		for i, p := range ps {
			if p.Rule != "env" && (p.Key == key || strings.HasPrefix(p.Key, key+".") || strings.HasPrefix(p.Key, key+"[")) {
				ps[i].Message = "environment variable " + name + ": " + p.Message
			}
		}
	}
}
