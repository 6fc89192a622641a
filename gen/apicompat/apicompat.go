// Package apicompat checks the Go API of the SDK's public packages against
// an earlier revision, as package compat checks the schemas: picogen
// apicompat --base REV. It compares each package's exported API at REV
// with the working tree's (golang.org/x/exp/apidiff), and fails on an
// incompatible change that CHANGELOG.md does not list under the next
// version, its first "## " section.
//
// A change is listed when a line of that section names it as the package's
// path in the module, a dot and the changed name, such as sdk.Register or
// sdk/sdktest.SinkHarness.Written, in backquotes or not. A package that did
// not exist at REV has nothing to break.
package apicompat

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"golang.org/x/exp/apidiff"

	"github.com/picomq/pico-connectors/gen"
)

// Packages are the SDK's public packages, relative to the module: what a
// connector, its generated config, its tests and its module's binary
// import.
var Packages = []string{"sdk", "sdk/confgen", "sdk/sdktest", "runtime/confkit", "runtime/cli"}

// Change is one incompatible change of a package's API.
type Change struct {
	// Package is the package's path in the module, such as "sdk".
	Package string
	// Name is what changed, such as "Register" or "SinkHarness.Written".
	Name string
	// Message is apidiff's description, such as "Register: removed".
	Message string
	// Listed says whether the next version's CHANGELOG section names it.
	Listed bool
}

// ID is how CHANGELOG.md names the change: Package.Name.
func (c Change) ID() string { return c.Package + "." + c.Name }

// Check compares the packages (paths relative to the module at root) at
// the git revision base with the working tree of root, and returns every
// incompatible change, each marked Listed when root's CHANGELOG.md lists
// it under the next version.
func Check(root, base string, packages []string) ([]Change, error) {
	module, err := gen.ModulePath(root)
	if err != nil {
		return nil, err
	}
	old, err := os.MkdirTemp("", "apicompat-base-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(old)
	if err := extract(root, base, old); err != nil {
		return nil, err
	}
	oldPkgs, err := load(old, module, packages)
	if err != nil {
		return nil, fmt.Errorf("the packages at %s: %w", base, err)
	}
	newPkgs, err := load(root, module, packages)
	if err != nil {
		return nil, fmt.Errorf("the packages in the working tree: %w", err)
	}
	listed, err := nextVersion(filepath.Join(root, "CHANGELOG.md"))
	if err != nil {
		return nil, err
	}
	var changes []Change
	for _, rel := range packages {
		o, n := oldPkgs[rel], newPkgs[rel]
		if o == nil {
			continue // new since base: nothing to break
		}
		if n == nil {
			c := Change{Package: rel, Name: "*", Message: "package removed"}
			c.Listed = listed(c.Package + ".*")
			changes = append(changes, c)
			continue
		}
		for _, ch := range apidiff.Changes(o, n).Changes {
			if ch.Compatible {
				continue
			}
			c := Change{Package: rel, Name: changedName(ch.Message), Message: ch.Message}
			c.Listed = listed(c.ID())
			changes = append(changes, c)
		}
	}
	sort.SliceStable(changes, func(i, j int) bool { return changes[i].ID() < changes[j].ID() })
	return changes, nil
}

// changedName is the name apidiff's message is about: the part before its
// colon, with a method's receiver written as its type (T.M for (*T).M).
func changedName(msg string) string {
	name, _, _ := strings.Cut(msg, ":")
	name = strings.TrimSpace(name)
	name = strings.NewReplacer("(*", "", "(", "", ")", "").Replace(name)
	return name
}

// nextVersion returns a function that reports whether the first "## "
// section of the changelog names an ID as a whole word.
func nextVersion(path string) (func(id string) bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return func(string) bool { return false }, nil
	}
	if err != nil {
		return nil, err
	}
	var section strings.Builder
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "## ") {
			if in {
				break
			}
			in = true
			continue
		}
		if in {
			section.WriteString(line + "\n")
		}
	}
	text := section.String()
	return func(id string) bool {
		re := regexp.MustCompile(`(^|[^\w./*])` + regexp.QuoteMeta(id) + `($|[^\w])`)
		return re.MatchString(text)
	}, nil
}

// extract writes the tree of rev into dir, through git archive.
func extract(root, rev, dir string) error {
	cmd := exec.Command("git", "-C", root, "archive", "--format=tar", rev)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git archive %s: %v: %s (is it a revision of this repository?)", rev, err, strings.TrimSpace(errOut.String()))
	}
	tr := tar.NewReader(&out)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		p := filepath.Join(dir, filepath.FromSlash(h.Name))
		if !strings.HasPrefix(p, filepath.Clean(dir)+string(filepath.Separator)) {
			return fmt.Errorf("git archive %s: entry %q leaves the folder", rev, h.Name)
		}
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			b, err := io.ReadAll(tr)
			if err != nil {
				return err
			}
			if err := os.WriteFile(p, b, 0o644); err != nil {
				return err
			}
		}
	}
}

// load type-checks the packages (relative to module) that exist in the
// module at dir, from the export data go list -export writes, and returns
// them by relative path.
func load(dir, module string, packages []string) (map[string]*types.Package, error) {
	var want []string
	for _, rel := range packages {
		if st, err := os.Stat(filepath.Join(dir, filepath.FromSlash(rel))); err == nil && st.IsDir() {
			want = append(want, module+"/"+rel)
		}
	}
	out := map[string]*types.Package{}
	if len(want) == 0 {
		return out, nil
	}
	args := append([]string{"list", "-export", "-deps", "-json=ImportPath,Export,Error"}, want...)
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("go list -export: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	exports := map[string]string{}
	dec := json.NewDecoder(&stdout)
	for dec.More() {
		var p struct {
			ImportPath, Export string
			Error              *struct{ Err string }
		}
		if err := dec.Decode(&p); err != nil {
			return nil, err
		}
		if p.Error != nil {
			return nil, fmt.Errorf("%s: %s", p.ImportPath, p.Error.Err)
		}
		exports[p.ImportPath] = p.Export
	}
	imp := importer.ForCompiler(token.NewFileSet(), "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	for _, path := range want {
		p, err := imp.Import(path)
		if err != nil {
			return nil, err
		}
		out[strings.TrimPrefix(path, module+"/")] = p
	}
	return out, nil
}
