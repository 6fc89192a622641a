package gocode

import (
	"fmt"
	"strings"

	"github.com/picomq/pico-connectors/gen/internal/model"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

// envSuffix is the variable name part of a key path.
func envSuffix(path []string) string { return confgen.EnvName("", path...) }

// EnvSuffix is envSuffix for the docs generator.
func EnvSuffix(path []string) string { return envSuffix(path) }

// envKinds is the confgen.EnvKind of each kind of key that is not read
// as text (EnvString).
var envKinds = map[model.Kind]string{
	model.Int: "EnvInt", model.Number: "EnvNumber", model.Bool: "EnvBool", model.Map: "EnvObject",
	model.StringList: "EnvList", model.IntList: "EnvIntList", model.NumberList: "EnvNumberList", model.ObjectList: "EnvList",
}

func envKind(pr *model.Property) string {
	if k, ok := envKinds[pr.Kind]; ok {
		return k
	}
	return "EnvString"
}

// CheckEnvCollisions reports two keys that map to one variable.
func CheckEnvCollisions(s *model.Schema) error {
	seen := map[string]*model.Property{}
	var errs []string
	s.Root.Walk(func(pr *model.Property) {
		if pr.Kind == model.Nested || pr.InElement() {
			return
		}
		e := envSuffix(pr.Path)
		if other, dup := seen[e]; dup {
			errs = append(errs, fmt.Sprintf("%s: at %s: key %q and key %q at %s both map to the environment variable suffix %s",
				s.File, pr.Pointer, pr.DotPath(), other.DotPath(), other.Pointer, e))
			return
		}
		seen[e] = pr
	})
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return nil
}
