package sdk

import "runtime/debug"

// ModulePath is the module path of pico-connectors, the module this
// package belongs to.
const ModulePath = "github.com/picomq/pico-connectors"

// Version returns the version of pico-connectors linked into the running
// binary, from its build information: a release tag such as v0.3.0, a
// pseudo-version, "(devel)" when the binary is built inside the
// pico-connectors module itself, or, for a replaced module, the version
// required with " => " and the replacement.
func Version() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	return versionIn(info)
}

func versionIn(info *debug.BuildInfo) string {
	if info.Main.Path == ModulePath {
		return moduleVersion(&info.Main)
	}
	for _, m := range info.Deps {
		if m.Path == ModulePath {
			return moduleVersion(m)
		}
	}
	return "(unknown: " + ModulePath + " is not in the build information)"
}

func moduleVersion(m *debug.Module) string {
	v := m.Version
	if v == "" {
		v = "(devel)"
	}
	if m.Replace != nil {
		r := m.Replace.Path
		if m.Replace.Version != "" {
			r += " " + m.Replace.Version
		}
		v += " => " + r
	}
	return v
}
