// Package docsite publishes the reference documentation: a catalog of every
// connector and transform, one page per connector (the Configuration table
// picogen gen writes to generated/docs, with env variables and the rules in
// words, plus an example definition), the runtime config and
// definition-file reference (from schemas/runtime/*.json), and the schema
// dialect reference (schemas/README.md).
//
// Build writes it as Markdown or as a static HTML site (rendered with
// goldmark, one stylesheet, no external assets), with the JSON Schemas
// copied beside the pages so editors can use them for completion.
package docsite

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/sdk"
)

// Format is the output format of Build.
type Format string

// The formats.
const (
	Markdown Format = "md"
	HTML     Format = "html"
)

// Options says what Build reads and writes.
type Options struct {
	// Root is the repository root; empty means the current directory.
	Root string
	// Out is the folder to write; it is created when missing.
	Out    string
	Format Format
}

// Plugin is one connector or transform in the catalog.
type Plugin struct {
	// Name is the schema name, such as s3_sink.
	Name string
	// Kind is sink, source or transform.
	Kind string
	// Path is the plugin path a definition names.
	Path string
	// Summary is the first sentence of the schema's description.
	Summary     string
	Description string
	// Keys are the dotted paths of every key of the plugin_config table,
	// nested keys included, in schema order.
	Keys []string
	// Schema is the schema file's content.
	Schema []byte
}

// Page is one page of the site.
type Page struct {
	// Slug is the file name without extension, such as "s3_sink".
	Slug  string
	Title string
	// Markdown is the page's source.
	Markdown string
}

// Site is everything Build writes.
type Site struct {
	Plugins []Plugin
	Pages   []Page
	// Schemas maps a path under schemas/ in the output to its content.
	Schemas map[string][]byte
}

// Load reads the repository at root into a Site.
func Load(root string) (*Site, error) {
	if root == "" {
		root = "."
	}
	plugins, err := loadPlugins(root)
	if err != nil {
		return nil, err
	}
	s := &Site{Plugins: plugins, Schemas: map[string][]byte{}}
	s.Pages = append(s.Pages, Page{Slug: "index", Title: "Connector catalog", Markdown: catalog(plugins)})
	for _, p := range plugins {
		page, err := pluginPage(root, p)
		if err != nil {
			return nil, err
		}
		s.Pages = append(s.Pages, page)
		s.Schemas[p.Name+".json"] = p.Schema
		if p.Kind == "sink" || p.Kind == "source" {
			s.Schemas["definitions/"+p.Name+".json"] = definitionSchema(p)
		}
	}
	runtimePages, runtimeSchemas, err := runtimeReference(root)
	if err != nil {
		return nil, err
	}
	s.Pages = append(s.Pages, runtimePages...)
	for k, v := range runtimeSchemas {
		s.Schemas["runtime/"+k] = v
	}
	dialect, err := readSDKFile(root, "schemas/README.md")
	if err != nil {
		return nil, fmt.Errorf("schema dialect reference: %w", err)
	}
	s.Pages = append(s.Pages, Page{Slug: "dialect", Title: "Schema dialect", Markdown: rewriteDialect(string(dialect))})
	for _, ref := range operatorReferences {
		md, err := readSDKFile(root, ref.file)
		if err != nil {
			return nil, fmt.Errorf("%s reference: %w", ref.title, err)
		}
		s.Pages = append(s.Pages, Page{Slug: ref.slug, Title: ref.title, Markdown: operatorLinks.Replace(string(md))})
	}
	md, err := readSDKFile(root, GuaranteesFile)
	if err != nil {
		return nil, fmt.Errorf("delivery guarantees: %w", err)
	}
	s.Pages = append(s.Pages, Page{Slug: "delivery-guarantees", Title: "Delivery guarantees", Markdown: repoLinks.Replace(string(md))})
	s.Pages = append(s.Pages, Page{Slug: "schemas", Title: "JSON Schemas", Markdown: schemasPage(s)})
	return s, nil
}

// Build loads the site from opts.Root and writes it to opts.Out.
func Build(opts Options) (*Site, error) {
	if opts.Out == "" {
		return nil, errors.New("no output folder: use --out DIR")
	}
	s, err := Load(opts.Root)
	if err != nil {
		return nil, err
	}
	switch opts.Format {
	case Markdown, "":
		err = s.writeMarkdown(opts.Out)
	case HTML:
		err = s.writeHTML(opts.Out)
	default:
		return nil, fmt.Errorf("unknown format %q: use md or html", opts.Format)
	}
	return s, err
}

func (s *Site) writeSchemas(out string) error {
	for rel, b := range s.Schemas {
		p := filepath.Join(out, "schemas", filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func (s *Site) writeMarkdown(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	for _, p := range s.Pages {
		if err := os.WriteFile(filepath.Join(out, p.Slug+".md"), []byte(p.Markdown), 0o644); err != nil {
			return err
		}
	}
	return s.writeSchemas(out)
}

// loadPlugins reads every schemas/*.json.
func loadPlugins(root string) ([]Plugin, error) {
	files, err := filepath.Glob(filepath.Join(root, "schemas", "*.json"))
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no schemas in %s", filepath.Join(root, "schemas"))
	}
	slices.Sort(files)
	var out []Plugin
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		var doc struct {
			Description string `json:"description"`
			Kind        string `json:"x-kind"`
			Path        string `json:"x-path"`
		}
		if err := json.Unmarshal(b, &doc); err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		name := strings.TrimSuffix(filepath.Base(f), ".json")
		keys, err := SchemaKeys(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		path := doc.Path
		if path == "" {
			path = name
		}
		out = append(out, Plugin{Name: name, Kind: doc.Kind, Path: path, Summary: firstSentence(doc.Description),
			Description: doc.Description, Keys: keys, Schema: b})
	}
	return out, nil
}

// SchemaKeys returns the dotted path of every key of a schema's object, in
// the order the schema lists them, nested keys after their object's key.
func SchemaKeys(schema []byte) ([]string, error) {
	var keys []string
	var walk func(raw json.RawMessage, prefix string) error
	walk = func(raw json.RawMessage, prefix string) error {
		var obj struct {
			Properties json.RawMessage `json:"properties"`
		}
		if err := json.Unmarshal(raw, &obj); err != nil {
			return err
		}
		if len(obj.Properties) == 0 {
			return nil
		}
		names, values, err := orderedObject(obj.Properties)
		if err != nil {
			return err
		}
		for i, n := range names {
			keys = append(keys, prefix+n)
			if err := walk(values[i], prefix+n+"."); err != nil {
				return err
			}
		}
		return nil
	}
	return keys, walk(schema, "")
}

// orderedObject decodes a JSON object keeping its key order.
func orderedObject(raw json.RawMessage) ([]string, []json.RawMessage, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil, nil, fmt.Errorf("properties is not an object")
	}
	var names []string
	var values []json.RawMessage
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil, nil, err
		}
		var v json.RawMessage
		if err := d.Decode(&v); err != nil {
			return nil, nil, err
		}
		names = append(names, t.(string))
		values = append(values, v)
	}
	return names, values, nil
}

var sentenceEnd = regexp.MustCompile(`[.!?](\s|$)`)

func firstSentence(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if loc := sentenceEnd.FindStringIndex(s); loc != nil {
		return s[:loc[0]+1]
	}
	return s
}

var kindOrder = map[string]int{"source": 0, "sink": 1, "transform": 2}

// catalog renders the index page.
func catalog(plugins []Plugin) string {
	ps := append([]Plugin(nil), plugins...)
	slices.SortStableFunc(ps, func(a, b Plugin) int {
		return cmp.Or(cmp.Compare(kindOrder[a.Kind], kindOrder[b.Kind]), cmp.Compare(a.Name, b.Name))
	})
	var b strings.Builder
	b.WriteString("# Connector catalog\n\n")
	b.WriteString("Every connector and transform this build of pico-connectors links, generated from its schema in `schemas/`. ")
	b.WriteString("A definition file names a connector by its plugin path (`path = \"...\"`); a transform by its type.\n\n")
	b.WriteString("| Connector | Type | Plugin path | Summary |\n|---|---|---|---|\n")
	for _, p := range ps {
		fmt.Fprintf(&b, "| [%s](%s.md) | %s | `%s` | %s |\n", p.Name, p.Name, cell(p.Kind), p.Path, cell(p.Summary))
	}
	b.WriteString("\n## Reference\n\n")
	b.WriteString("- [Runtime config](runtime_config.md): the file given to `pico-connectors --config`.\n")
	b.WriteString("- [Definition file](definition.md): one file per connector, with `[[topics]]` and `[plugin_config]`.\n")
	b.WriteString("- [Schema dialect](dialect.md): how a connector's schema is written.\n")
	b.WriteString("- [HTTP API](api.md) and [metrics](metrics.md): what a running pico-connectors shows operators.\n")
	b.WriteString("- [Delivery guarantees](delivery-guarantees.md): what a crash, a failed write, a broker outage, a rebalance and a bad record do, connector by connector, and what may repeat.\n")
	b.WriteString("- [JSON Schemas](schemas.md): for editor completion of definition files and plugin_config tables.\n")
	return b.String()
}

// definitionSchema is the JSON Schema of a whole definition file of one
// connector: the definition-file schema, with type and path fixed and
// plugin_config checked against the connector's own schema. The references
// are relative, so the copies beside the pages are used.
func definitionSchema(p Plugin) []byte {
	doc := map[string]any{
		"$schema":     "https://json-schema.org/draft/2020-12/schema",
		"title":       p.Name + " definition file",
		"description": "A definition file of the " + p.Name + " connector. " + p.Description,
		"allOf":       []any{map[string]any{"$ref": "../runtime/connector.json"}},
		"properties": map[string]any{
			"type":          map[string]any{"const": p.Kind},
			"path":          map[string]any{"const": p.Path},
			"plugin_config": map[string]any{"$ref": "../" + p.Name + ".json"},
		},
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return append(b, '\n')
}

// schemasPage lists the JSON Schemas copied beside the pages.
func schemasPage(s *Site) string {
	var b strings.Builder
	b.WriteString("# JSON Schemas\n\n")
	b.WriteString("These files sit beside the pages, under `schemas/`. Point an editor's TOML or JSON language server at them ")
	b.WriteString("to get completion and checks while writing a definition file: `schemas/definitions/<connector>.json` covers a whole ")
	b.WriteString("definition file of one connector, `[plugin_config]` included (with Taplo, put `#:schema <site>/schemas/definitions/<connector>.json` ")
	b.WriteString("on the first line).\n\n")
	b.WriteString("| Schema | Describes |\n|---|---|\n")
	paths := make([]string, 0, len(s.Schemas))
	for p := range s.Schemas {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		name := strings.TrimSuffix(path.Base(p), ".json")
		what := "the `[plugin_config]` table of [" + name + "](" + name + ".md)"
		switch {
		case p == "runtime/runtime.json":
			what = "the [runtime config](runtime_config.md)"
		case strings.HasPrefix(p, "runtime/"):
			what = "any [definition file](definition.md)"
		case strings.HasPrefix(p, "definitions/"):
			what = "a whole definition file of [" + name + "](" + name + ".md), `[plugin_config]` included"
		}
		fmt.Fprintf(&b, "| [schemas/%s](schemas/%s) | %s |\n", p, p, what)
	}
	b.WriteString("\nBack to the [catalog](index.md).\n")
	return b.String()
}

// cell escapes text for a Markdown table cell.
func cell(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return strings.ReplaceAll(s, "|", `\|`)
}

// pluginPage is a connector's generated reference page with an example
// definition added.
func pluginPage(root string, p Plugin) (Page, error) {
	gen, err := os.ReadFile(filepath.Join(root, "generated", "docs", p.Name+".md"))
	if errors.Is(err, fs.ErrNotExist) {
		return Page{}, fmt.Errorf("generated/docs/%s.md is missing: run go generate ./... (picogen gen) first", p.Name)
	}
	if err != nil {
		return Page{}, err
	}
	md := strings.TrimRight(rewriteGenerated(string(gen)), "\n") + "\n"
	if p.Kind == "sink" || p.Kind == "source" {
		md += "\n## Example definition\n\n"
		file, example, err := findExample(root, p)
		switch {
		case err != nil:
			return Page{}, err
		case example != nil:
			md += fmt.Sprintf("From `%s`:\n\n```toml\n%s\n```\n", file, strings.TrimRight(string(example), "\n"))
		default:
			md += "A minimal definition file; see the [definition file reference](definition.md) for every key.\n\n" +
				"```toml\n" + minimalDefinition(p) + "```\n"
		}
	}
	md += fmt.Sprintf("\nJSON Schema of `[plugin_config]`: [schemas/%s.json](schemas/%s.json). Back to the [catalog](index.md).\n", p.Name, p.Name)
	return Page{Slug: p.Name, Title: p.Name, Markdown: md}, nil
}

// rewriteGenerated prepares a generated/docs page for the site.
func rewriteGenerated(md string) string {
	return stripGeneratedHeader(md)
}

// stripGeneratedHeader removes the "Code generated" comment line, which
// is for the repository, not the reader.
func stripGeneratedHeader(md string) string {
	if strings.HasPrefix(md, "<!-- Code generated") {
		if i := strings.Index(md, "\n"); i >= 0 {
			md = strings.TrimLeft(md[i+1:], "\n")
		}
	}
	return md
}

// rewriteDialect makes the dialect page's links work from the site.
// operatorReferences are the hand-written references of the runtime's
// operator surface, published beside the generated pages. Tests in their
// packages keep them complete (every route, JSON field and metric).
var operatorReferences = []struct{ slug, title, file string }{
	{"api", "HTTP API", "runtime/api/README.md"},
	{"metrics", "Metrics", "runtime/metrics/README.md"},
}

// operatorLinks points the references' links at each other's pages.
var operatorLinks = strings.NewReplacer(
	"(../metrics/README.md)", "(metrics.md)",
	"(../api/README.md)", "(api.md)",
)

// GuaranteesFile is the delivery guarantees page (slug
// delivery-guarantees, which the specs link), written by hand.
const GuaranteesFile = "docs/delivery-guarantees.md"

// repoLinks points the guarantees page's links to the repository's files
// (the tests that prove each row) at the repository on GitHub: the site
// publishes no source files.
var repoLinks = strings.NewReplacer("](../", "](https://"+sdk.ModulePath+"/blob/main/")

func rewriteDialect(md string) string {
	return strings.ReplaceAll(md, "(../shared/spec/", "(https://picomq.dev/spec/")
}

// findExample returns examples/NAME.toml, or else the first definition
// file under examples/ whose path names the plugin. file is relative to
// root; example is nil when there is none.
func findExample(root string, p Plugin) (file string, example []byte, err error) {
	b, err := os.ReadFile(filepath.Join(root, "examples", p.Name+".toml"))
	if err == nil {
		return "examples/" + p.Name + ".toml", b, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", nil, err
	}
	pathLine := regexp.MustCompile(`(?m)^\s*path\s*=\s*["']` + regexp.QuoteMeta(p.Path) + `["']\s*(#.*)?$`)
	var found string
	walkErr := filepath.WalkDir(filepath.Join(root, "examples"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || found != "" {
			return nil
		}
		if d.IsDir() || !strings.HasSuffix(path, ".toml") {
			return nil
		}
		if c, err := os.ReadFile(path); err == nil && pathLine.Match(c) {
			found, example = path, c
		}
		return nil
	})
	if walkErr != nil || found == "" {
		return "", nil, nil
	}
	rel, _ := filepath.Rel(root, found)
	return filepath.ToSlash(rel), example, nil
}

func minimalDefinition(p Plugin) string {
	var b strings.Builder
	key := strings.TrimSuffix(strings.TrimSuffix(p.Name, "_sink"), "_source")
	fmt.Fprintf(&b, "type = %q\nkey = %q\nenabled = true\nversion = 0\npath = %q\n\n[[topics]]\ntopic = \"events\"\n", p.Kind, key, p.Path)
	if p.Kind == "source" {
		b.WriteString("create_topics = true\n")
	}
	b.WriteString("\n[plugin_config]\n# see the Configuration table above\n")
	return b.String()
}
