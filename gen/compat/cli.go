package compat

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

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

// GitList returns the *.json files directly in folder dir/folder as
// committed at rev, as slash paths relative to dir.
func GitList(dir, rev, folder string) ([]string, error) {
	if strings.HasPrefix(rev, "-") {
		return nil, fmt.Errorf("bad revision %q", rev)
	}
	var out, errb bytes.Buffer
	cmd := exec.Command("git", "-C", dir, "ls-tree", "--name-only", rev+":./"+folder)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := errb.String()
		if strings.Contains(msg, "Not a valid object name") || strings.Contains(msg, "does not exist") || strings.Contains(msg, "not a tree object") {
			return nil, nil
		}
		return nil, fmt.Errorf("git ls-tree %s:%s: %s", rev, folder, strings.TrimSpace(msg))
	}
	var files []string
	for _, name := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if strings.HasSuffix(name, ".json") {
			files = append(files, folder+"/"+name)
		}
	}
	return files, nil
}

// GitShow reads path as committed at rev in the repository at dir. found is
// false when the revision exists but has no such file.
func GitShow(dir, rev, path string) (content []byte, found bool, err error) {
	if strings.HasPrefix(rev, "-") {
		return nil, false, fmt.Errorf("bad revision %q", rev)
	}
	rel := filepath.ToSlash(filepath.Clean(path))
	var out, errb bytes.Buffer
	cmd := exec.Command("git", "-C", dir, "rev-parse", "--verify", "--quiet", rev+"^{commit}")
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return nil, false, fmt.Errorf("git revision %q not found in %s", rev, dir)
	}
	out.Reset()
	errb.Reset()
	cmd = exec.Command("git", "-C", dir, "show", rev+":./"+rel)
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		msg := errb.String()
		if strings.Contains(msg, "does not exist") || strings.Contains(msg, "exists on disk, but not in") {
			return nil, false, nil
		}
		return nil, false, fmt.Errorf("git show %s:%s: %s", rev, rel, strings.TrimSpace(msg))
	}
	return out.Bytes(), true, nil
}
