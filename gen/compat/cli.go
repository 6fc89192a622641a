package compat

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/picomq/pico-connectors/gen/cmdline"
)

// Usage is the help text of picogen compat.
const Usage = `usage: picogen compat OLD.json NEW.json
       picogen compat --base GIT_REV [SCHEMA.json ...]

Lists the changes between two versions of a connector schema that would
break existing definition files, and exits 1 when there is any. With --base,
each schema (default: every schemas/*.json) is compared with its version at
GIT_REV, read with git show; a schema that did not exist there is new and
passes.
`

// Main runs picogen compat with args (without the command name) and
// returns the exit code: 0 when nothing breaks, 1 on a breaking change, 2
// on a usage or read error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := cmdline.Flags("compat", Usage, stderr)
	base := fs.String("base", "", "compare with the schemas at this git revision")
	dir := cmdline.Root(fs, ".", "repository root, for --base and the default schema list")
	if code, stop := cmdline.Parse(fs, args); stop {
		return code
	}
	type pair struct {
		name     string
		old, new []byte
	}
	var pairs []pair
	if *base == "" {
		if fs.NArg() != 2 {
			fmt.Fprint(stderr, Usage)
			return 2
		}
		old, err := os.ReadFile(fs.Arg(0))
		if err != nil {
			fmt.Fprintf(stderr, "picogen compat: %v\n", err)
			return 2
		}
		cur, err := os.ReadFile(fs.Arg(1))
		if err != nil {
			fmt.Fprintf(stderr, "picogen compat: %v\n", err)
			return 2
		}
		pairs = append(pairs, pair{fs.Arg(1), old, cur})
	} else {
		files := fs.Args()
		if len(files) == 0 {
			m, err := filepath.Glob(filepath.Join(*dir, "schemas", "*.json"))
			if err != nil {
				fmt.Fprintf(stderr, "picogen compat: %v\n", err)
				return 2
			}
			for _, f := range m {
				rel, _ := filepath.Rel(*dir, f)
				files = append(files, rel)
			}
			if len(files) == 0 {
				fmt.Fprintf(stderr, "picogen compat: no schemas/*.json under %s\n", *dir)
				return 2
			}
		}
		for _, f := range files {
			cur, err := os.ReadFile(filepath.Join(*dir, f))
			if err != nil {
				fmt.Fprintf(stderr, "picogen compat: %v\n", err)
				return 2
			}
			old, found, err := GitShow(*dir, *base, f)
			if err != nil {
				fmt.Fprintf(stderr, "picogen compat: %v\n", err)
				return 2
			}
			if !found {
				fmt.Fprintf(stdout, "%s: new at this revision, nothing to compare\n", f)
				continue
			}
			pairs = append(pairs, pair{f, old, cur})
		}
	}
	broken := 0
	if *base != "" && len(fs.Args()) == 0 {
		// A schema removed since the base breaks every definition naming it.
		old, err := GitList(*dir, *base, "schemas")
		if err != nil {
			fmt.Fprintf(stderr, "picogen compat: %v\n", err)
			return 2
		}
		for _, f := range old {
			if _, err := os.Stat(filepath.Join(*dir, f)); errors.Is(err, os.ErrNotExist) {
				fmt.Fprintf(stdout, "%s: schema removed: definitions that use this connector no longer load\n", f)
				broken++
			}
		}
	}
	for _, p := range pairs {
		cs, err := Compare(p.old, p.new)
		if err != nil {
			fmt.Fprintf(stderr, "picogen compat: %s: %v\n", p.name, err)
			return 2
		}
		for _, c := range cs {
			fmt.Fprintf(stdout, "%s: %s\n", p.name, c)
		}
		broken += len(cs)
	}
	if broken > 0 {
		fmt.Fprintf(stdout, "%d breaking change(s): existing definition files may no longer load or may change meaning.\n"+
			"Add an alias (x-aliases), a default, or keep the old value accepted.\n", broken)
		return 1
	}
	fmt.Fprintf(stdout, "no breaking changes in %d schema(s)\n", len(pairs))
	return 0
}
