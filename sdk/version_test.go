package sdk

import (
	"runtime/debug"
	"testing"
)

func TestVersionIn(t *testing.T) {
	for _, c := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{Main: debug.Module{Path: ModulePath, Version: "(devel)"}}, "(devel)"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/acme"}, Deps: []*debug.Module{{Path: ModulePath, Version: "v0.4.1"}}}, "v0.4.1"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/acme"}, Deps: []*debug.Module{
			{Path: ModulePath, Version: "v0.0.0-00010101000000-000000000000", Replace: &debug.Module{Path: "../pico-connectors"}}}},
			"v0.0.0-00010101000000-000000000000 => ../pico-connectors"},
		{debug.BuildInfo{Main: debug.Module{Path: "example.com/acme"}}, "(unknown: " + ModulePath + " is not in the build information)"},
	} {
		if got := versionIn(&c.info); got != c.want {
			t.Errorf("versionIn(%+v) = %q, want %q", c.info.Main, got, c.want)
		}
	}
}
