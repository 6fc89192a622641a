// Package gen is picogen's generator: it reads every schema in schemas/ and
// writes, under generated/, one typed config package per schema, the
// reference pages, the registry of linked connectors and the JSON Schemas
// and pages of the runtime's own files.
//
// Output is a pure function of the inputs, so regenerating is
// byte-for-byte stable.
package gen

import (
	"bytes"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/gen/internal/docs"
	"github.com/picomq/pico-connectors/gen/internal/gocode"
	"github.com/picomq/pico-connectors/gen/internal/model"
	"github.com/picomq/pico-connectors/gen/internal/registry"
	"github.com/picomq/pico-connectors/gen/internal/runtimeschema"
	"github.com/picomq/pico-connectors/sdk"
)

// Options says where to read and write. Paths are relative to Root unless
// absolute.
type Options struct {
	// Root is the repository root (where go.mod is).
	Root string
	// Schemas is the schema folder; default "schemas".
	Schemas string
	// Out is the output folder; default "generated".
	Out string
	// RuntimeSchemas is where the reflected runtime schemas go; default
	// "schemas/runtime".
	RuntimeSchemas string
}

func (o Options) path(p, def string) string {
	if p == "" {
		p = def
	}
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(o.Root, p)
}

// Files maps a slash-separated path (relative to Root) to its content.
type Files map[string][]byte

// Render builds every output file in memory.
func Render(o Options) (Files, error) {
	schemaDir := o.path(o.Schemas, "schemas")
	outRel := relOr(o, o.path(o.Out, "generated"), "generated")
	rtRel := relOr(o, o.path(o.RuntimeSchemas, "schemas/runtime"), "schemas/runtime")
	connectors, err := RenderSchemas(schemaDir)
	if err != nil {
		return nil, err
	}
	files := Files{}
	for name, b := range connectors {
		files[outRel+"/"+name] = b
	}
	module, err := ModulePath(o.Root)
	if err != nil {
		return nil, err
	}
	reg, err := registry.Generate(o.Root, module)
	if err != nil {
		return nil, err
	}
	files[outRel+"/registry/registry.go"] = reg
	files[outRel+"/generate.go"] = GenerateFile(module)
	rt, err := runtimeschema.Generate()
	if err != nil {
		return nil, err
	}
	files[rtRel+"/runtime.json"] = rt.RuntimeSchema
	files[rtRel+"/connector.json"] = rt.ConnectorSchema
	files[outRel+"/docs/runtime.md"] = rt.RuntimeDoc
	files[outRel+"/docs/definition.md"] = rt.DefinitionDoc
	return files, nil
}

func relOr(o Options, abs, def string) string {
	r, err := filepath.Rel(o.Root, abs)
	if err != nil {
		return def
	}
	return filepath.ToSlash(r)
}

// GenerateFile is generated/generate.go, whose go:generate line runs
// picogen: from source inside pico-connectors, as a Go tool (go get -tool)
// in any other module.
func GenerateFile(module string) []byte {
	picogen, how := "go tool picogen", "go tool picogen gen"
	if module == sdk.ModulePath {
		picogen, how = "go run ../cmd/picogen", "go run ./cmd/picogen gen"
	}
	return []byte("// " + gocode.Header + `

// Package generated holds picogen's output; run go generate ./... (or
// ` + how + `) after changing a schema in schemas/.
package generated

` + "//go:" + "generate " + picogen + ` gen -root ..
`)
}

// LoadSchemas parses every *.json file directly in dir, sorted by name.
func LoadSchemas(dir string) ([]*model.Schema, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("reading schemas: %w", err)
	}
	var out []*model.Schema
	var errs []string
	pkgs := map[string]string{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		file := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(file)
		if err != nil {
			return nil, err
		}
		name := strings.TrimSuffix(e.Name(), ".json")
		s, err := model.Parse(displayPath(file), name, data)
		if err == nil {
			err = gocode.CheckEnvCollisions(s)
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		if other, dup := pkgs[s.Package]; dup {
			errs = append(errs, fmt.Sprintf("%s: package %s is also generated from %s; rename one schema", s.File, s.Package, other))
			continue
		}
		pkgs[s.Package] = s.File
		out = append(out, s)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	slices.SortFunc(out, func(a, b *model.Schema) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func displayPath(p string) string {
	if wd, err := os.Getwd(); err == nil {
		if r, err := filepath.Rel(wd, p); err == nil && !strings.HasPrefix(r, "..") {
			return filepath.ToSlash(r)
		}
	}
	return filepath.ToSlash(p)
}

// Write renders and writes every file under o.Root, and removes generated
// config packages whose schema is gone. It returns the paths it
// changed.
func Write(o Options) ([]string, error) {
	files, err := Render(o)
	if err != nil {
		return nil, err
	}
	var changed []string
	for _, n := range slices.Sorted(maps.Keys(files)) {
		p := filepath.Join(o.Root, filepath.FromSlash(n))
		old, err := os.ReadFile(p)
		if err == nil && bytes.Equal(old, files[n]) {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return changed, err
		}
		if err := os.WriteFile(p, files[n], 0o644); err != nil {
			return changed, err
		}
		changed = append(changed, n)
	}
	removed, err := prune(o, files)
	return append(changed, removed...), err
}

// prune deletes generated/<pkg>config folders that no schema produces any
// more.
func prune(o Options, files Files) ([]string, error) {
	out := o.path(o.Out, "generated")
	outRel := relOr(o, out, "generated")
	var removed []string
	entries, _ := os.ReadDir(out)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasSuffix(e.Name(), "config") {
			continue
		}
		if _, ok := files[outRel+"/"+e.Name()+"/config.go"]; !ok {
			if err := os.RemoveAll(filepath.Join(out, e.Name())); err != nil {
				return removed, err
			}
			removed = append(removed, outRel+"/"+e.Name())
		}
	}
	return removed, nil
}

// RenderSchemas renders only the config packages and reference pages of
// the schemas in dir, keyed "<package>/config.go", "<package>/schema.json"
// and "docs/<name>.md". Golden tests use it on fixture schemas.
func RenderSchemas(dir string) (Files, error) {
	schemas, err := LoadSchemas(dir)
	if err != nil {
		return nil, err
	}
	files := Files{}
	for _, s := range schemas {
		code, err := gocode.Generate(s)
		if err != nil {
			return nil, err
		}
		files[s.Package+"/config.go"] = code
		files[s.Package+"/schema.json"] = s.Embedded
		files["docs/"+s.Name+".md"] = docs.Connector(s)
	}
	return files, nil
}
