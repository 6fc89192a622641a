package apicompat

import (
	"fmt"
	"io"

	"github.com/picomq/pico-connectors/gen"
	"github.com/picomq/pico-connectors/gen/cmdline"
)

// Usage is the help text of picogen apicompat.
const Usage = `usage: picogen apicompat --base REV [-C ROOT] [PACKAGE ...]

Compares the exported Go API of the SDK's public packages (by default
sdk, sdk/confgen, sdk/sdktest, runtime/confkit and runtime/cli; paths
relative to the module) at the git revision REV with the working tree.
Every incompatible change must be listed in CHANGELOG.md under the next
version (its first "## " section) as PACKAGE.NAME, such as sdk.Register;
exits 1 when one is not.
`

// Main runs picogen apicompat and returns the exit code: 0 when every
// incompatible change is listed, 1 when one is not or the check fails, 2
// on a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := cmdline.Flags("apicompat", Usage, stderr)
	base := fs.String("base", "", "git revision to compare with (required)")
	rootFlag := cmdline.Root(fs, "", "module root (default: the folder holding go.mod, from here up)")
	if code, stop := cmdline.Parse(fs, args); stop {
		return code
	}
	if *base == "" {
		fmt.Fprint(stderr, "picogen apicompat: --base REV is required, such as --base origin/main\n\n"+Usage)
		return 2
	}
	root, err := gen.RootOrFind(*rootFlag)
	if err != nil {
		fmt.Fprintln(stderr, "picogen apicompat:", err)
		return 1
	}
	packages := Packages
	if fs.NArg() > 0 {
		packages = fs.Args()
	}
	changes, err := Check(root, *base, packages)
	if err != nil {
		fmt.Fprintln(stderr, "picogen apicompat:", err)
		return 1
	}
	unlisted := 0
	for _, c := range changes {
		mark := "listed in CHANGELOG.md"
		if !c.Listed {
			mark = "NOT LISTED"
			unlisted++
		}
		fmt.Fprintf(stdout, "%s: %s (%s)\n", c.Package, c.Message, mark)
	}
	if unlisted > 0 {
		fmt.Fprintf(stderr, "picogen apicompat: %d incompatible API change(s) since %s are not in CHANGELOG.md: keep the old API, or list each as PACKAGE.NAME (such as %s) under the first \"## \" section of CHANGELOG.md\n",
			unlisted, *base, firstUnlisted(changes))
		return 1
	}
	fmt.Fprintf(stdout, "picogen apicompat: %d incompatible change(s) since %s, all listed in CHANGELOG.md; %d package(s) checked\n", len(changes), *base, len(packages))
	return 0
}

func firstUnlisted(cs []Change) string {
	for _, c := range cs {
		if !c.Listed {
			return c.ID()
		}
	}
	return ""
}
