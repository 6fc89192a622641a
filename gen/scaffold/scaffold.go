// Package scaffold renders the connector templates (package templates) into
// a Go module: picogen new sink NAME and picogen new source NAME.
//
// It writes the starter schema, the connector package and its tests, and an
// example definition. Registration needs no file of its own: the generated
// registry links every folder under connectors/ once go generate runs. In a
// module other than pico-connectors, the first connector also brings the
// module's runtime binary (cmd/BIN) and a runtime config that runs the
// example definitions (examples/runtime.toml); those are written only when
// missing.
// Names are checked, existing files are never overwritten, and nothing is
// written when any target is in the way or cannot be written.
package scaffold

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"go/format"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"

	"github.com/picomq/pico-connectors/gen"
	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/templates"
)

// File is one file to write, its path relative to the repository root.
type File struct {
	Path    string
	Content []byte
}

// DefaultTopic is the topic the example definitions read (sinks) or write
// (sources) unless Options.Topic says otherwise: the topic the demo
// pipeline's random source writes.
const DefaultTopic = "demo.numbers"

var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// CheckName returns why name cannot name a new connector, or nil. kind is
// "sink" or "source".
func CheckName(kind, name string) error {
	if kind != "sink" && kind != "source" {
		return fmt.Errorf("unknown connector kind %q: use sink or source", kind)
	}
	switch {
	case name == "":
		return fmt.Errorf("missing name: use lower-case letters, digits and _, starting with a letter, such as picogen new %s webhook", kind)
	case !namePattern.MatchString(name):
		hint := strings.Trim(regexp.MustCompile(`[^a-z0-9_]+`).ReplaceAllString(strings.ToLower(name), "_"), "_")
		msg := fmt.Sprintf("bad name %q: use lower-case letters, digits and _, starting with a letter", name)
		if hint != "" && namePattern.MatchString(hint) && hint != name {
			msg += fmt.Sprintf(" (such as %q)", hint)
		}
		return errors.New(msg)
	case strings.Contains(name, "__") || strings.HasSuffix(name, "_"):
		return fmt.Errorf("bad name %q: no doubled or trailing _", name)
	case len(name) > 40:
		return fmt.Errorf("bad name %q: at most 40 characters", name)
	}
	for _, k := range []string{"sink", "source"} {
		if name == k || strings.HasSuffix(name, "_"+k) {
			return fmt.Errorf("bad name %q: picogen adds _%s itself; use %q", name, kind, strings.TrimSuffix(strings.TrimSuffix(name, k), "_"))
		}
	}
	return nil
}

// DataFor returns the template data of a new connector.
func DataFor(kind, name, module, topic string) templates.Data {
	full := name + "_" + kind
	pkg := strings.ReplaceAll(full, "_", "")
	title := strings.ReplaceAll(name, "_", " ")
	title = strings.ToUpper(title[:1]) + title[1:] + " " + kind
	if topic == "" {
		topic = DefaultTopic
		if kind == "source" {
			topic = name + ".events"
		}
	}
	exampleDir := "examples/connectors"
	if module == sdk.ModulePath {
		exampleDir = "examples"
	}
	return templates.Data{
		SDK:        sdk.ModulePath,
		ExampleDir: exampleDir,
		Bin:        binName(module),
		Name:       full,
		Short:      name,
		Kind:       kind,
		Pkg:        pkg,
		ConfigPkg:  pkg + "config",
		Module:     module,
		Path:       "libpicomq_connector_" + full,
		Title:      title,
		Key:        name,
		EnvPrefix:  "PICOMQ_CONNECTORS_" + strings.ToUpper(kind) + "_" + strings.ToUpper(name) + "_PLUGIN_CONFIG_",
		Topic:      topic,
	}
}

// binName is the name of a module's runtime binary: the last element of
// its path, such as acme-connectors for example.com/acme-connectors.
func binName(module string) string {
	base := path.Base(module)
	if base == "." || base == "/" || base == "" {
		return "connectors"
	}
	return base
}

// Render renders the templates of d.Kind, sorted by path. Go files are
// gofmt'd.
func Render(d templates.Data) ([]File, error) {
	outputs, ok := templates.Outputs[d.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown connector kind %q", d.Kind)
	}
	return render(d, outputs)
}

// RenderModule renders the files the first connector brings into a module
// of its own (templates.ModuleOutputs, and generated/generate.go), sorted
// by path; nothing for pico-connectors itself. The random source's definition writes the topic
// the example sink reads.
func RenderModule(d templates.Data) ([]File, error) {
	if d.InSDK() {
		return nil, nil
	}
	if d.Kind == "source" {
		d.Topic = DefaultTopic
	}
	files, err := render(d, templates.ModuleOutputs)
	if err != nil {
		return nil, err
	}
	// The go:generate line that the first go generate ./... needs, before
	// picogen gen has written the rest of generated/ (which holds the same
	// file).
	files = append(files, File{Path: "generated/generate.go", Content: gen.GenerateFile(d.Module)})
	slices.SortFunc(files, byPath)
	return files, nil
}

func render(d templates.Data, outputs map[string]string) ([]File, error) {
	var files []File
	for src, dst := range outputs {
		text, err := fs.ReadFile(templates.FS, src)
		if err != nil {
			return nil, err
		}
		t, err := template.New(src).Option("missingkey=error").Parse(string(text))
		if err != nil {
			return nil, fmt.Errorf("template %s: %w", src, err)
		}
		var buf bytes.Buffer
		if err := t.Execute(&buf, d); err != nil {
			return nil, fmt.Errorf("template %s: %w", src, err)
		}
		out := buf.Bytes()
		p := strings.NewReplacer("NAME", d.Name, "EXAMPLES", d.ExampleDir, "BIN", d.Bin).Replace(dst)
		if strings.HasSuffix(p, ".go") {
			if out, err = format.Source(out); err != nil {
				return nil, fmt.Errorf("template %s renders Go that does not parse: %w", src, err)
			}
		}
		files = append(files, File{Path: p, Content: out})
	}
	slices.SortFunc(files, byPath)
	return files, nil
}

// Options says what New writes where.
type Options struct {
	// Root is the repository root; empty means the folder holding go.mod,
	// found from the current directory up.
	Root string
	// Kind is "sink" or "source".
	Kind string
	// Name is the connector's name without the kind, such as "webhook".
	Name string
	// Topic overrides the example definition's topic.
	Topic string
	// DryRun renders and checks everything but writes nothing.
	DryRun bool
}

// New checks the name, renders the templates and writes them under
// opts.Root, with the module files (RenderModule) that are missing. It
// returns the files written (or, with DryRun, that would be) and the
// template data. It writes nothing when the name is bad, a file or the
// connector folder already exists, or a target folder cannot be written.
func New(opts Options) ([]File, templates.Data, error) {
	var d templates.Data
	if err := CheckName(opts.Kind, opts.Name); err != nil {
		return nil, d, err
	}
	root, err := gen.RootOrFind(opts.Root)
	if err != nil {
		return nil, d, err
	}
	module, err := gen.ModulePath(root)
	if err != nil {
		return nil, d, err
	}
	d = DataFor(opts.Kind, opts.Name, module, opts.Topic)
	files, err := Render(d)
	if err != nil {
		return nil, d, err
	}
	moduleFiles, err := RenderModule(d)
	if err != nil {
		return nil, d, err
	}
	for _, f := range moduleFiles {
		if _, err := os.Lstat(filepath.Join(root, f.Path)); errors.Is(err, fs.ErrNotExist) {
			files = append(files, f)
		}
	}
	slices.SortFunc(files, byPath)
	if err := checkFree(root, d, files); err != nil {
		return nil, d, err
	}
	if err := checkWritable(root, files); err != nil {
		return nil, d, err
	}
	if opts.DryRun {
		return files, d, nil
	}
	var written []string
	for _, f := range files {
		if err := writeNew(filepath.Join(root, f.Path), f.Content); err != nil {
			for i := len(written) - 1; i >= 0; i-- {
				os.Remove(written[i])
			}
			os.Remove(filepath.Join(root, "connectors", d.Name))
			return nil, d, err
		}
		written = append(written, filepath.Join(root, f.Path))
	}
	return files, d, nil
}

// checkFree refuses when any target or the connector folder exists, or
// another schema already uses the plugin path.
func checkFree(root string, d templates.Data, files []File) error {
	var taken []string
	if _, err := os.Lstat(filepath.Join(root, "connectors", d.Name)); err == nil {
		taken = append(taken, filepath.ToSlash(filepath.Join("connectors", d.Name)))
	}
	for _, f := range files {
		if strings.HasPrefix(f.Path, "connectors/") {
			continue
		}
		if _, err := os.Lstat(filepath.Join(root, f.Path)); err == nil {
			taken = append(taken, f.Path)
		}
	}
	if len(taken) > 0 {
		return fmt.Errorf("connector %s already exists (%s); picogen new never overwrites: choose another name, or remove those files first",
			d.Name, strings.Join(taken, ", "))
	}
	schemas, _ := filepath.Glob(filepath.Join(root, "schemas", "*.json"))
	for _, s := range schemas {
		b, err := os.ReadFile(s)
		if err == nil && bytes.Contains(b, []byte(`"`+d.Path+`"`)) {
			return fmt.Errorf("plugin path %s is already used by %s; choose another name", d.Path, filepath.ToSlash(s))
		}
	}
	return nil
}

// checkWritable makes sure every target folder exists or can be created,
// and can be written, before anything is written.
func checkWritable(root string, files []File) error {
	seen := map[string]bool{}
	for _, f := range files {
		dir := filepath.Dir(filepath.Join(root, f.Path))
		if seen[dir] {
			continue
		}
		seen[dir] = true
		// The nearest folder that exists must be a writable folder.
		existing := dir
		for {
			st, err := os.Stat(existing)
			if err == nil {
				if !st.IsDir() {
					return fmt.Errorf("cannot write %s: %s is a file, not a folder", f.Path, existing)
				}
				break
			}
			if !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("cannot write %s: %v", f.Path, err)
			}
			parent := filepath.Dir(existing)
			if parent == existing {
				break
			}
			existing = parent
		}
		probe, err := os.CreateTemp(existing, ".picogen-probe-*")
		if err != nil {
			return fmt.Errorf("cannot write %s: folder %s is not writable (%v)", f.Path, existing, unwrapPath(err))
		}
		probe.Close()
		os.Remove(probe.Name())
	}
	return nil
}

func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// writeNew creates path and its folders; it fails if path exists.
func writeNew(path string, content []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("cannot create folder for %s: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	if _, err := f.Write(content); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("cannot write %s: %w", path, err)
	}
	return f.Close()
}

// byPath orders files by path, the order they are written and listed in.
func byPath(a, b File) int { return cmp.Compare(a.Path, b.Path) }
