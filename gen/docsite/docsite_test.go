package docsite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/BurntSushi/toml"
	"github.com/santhosh-tekuri/jsonschema/v5"
)

const fixture = "testdata/repo"

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestMarkdownSite(t *testing.T) {
	out := t.TempDir()
	var stdout, stderr bytes.Buffer
	if code := Main([]string{"-C", fixture, "--out", out}, &stdout, &stderr); code != 0 {
		t.Fatalf("exit %d: %s", code, &stderr)
	}
	index := read(t, filepath.Join(out, "index.md"))
	for _, want := range []string{
		"| [beta_source](beta_source.md) | source | `libpicomq_connector_beta_source` | Reads things |",
		"| [alpha_sink](alpha_sink.md) | sink | `libpicomq_connector_alpha_sink` | Writes records somewhere. |",
		"| [gamma_fields](gamma_fields.md) | transform | `gamma_fields` | Adds fields. |",
	} {
		if !strings.Contains(index, want) {
			t.Errorf("catalog lacks %q:\n%s", want, index)
		}
	}
	if i, j := strings.Index(index, "beta_source"), strings.Index(index, "alpha_sink"); i > j {
		t.Error("catalog does not list sources before sinks")
	}
	alpha := read(t, filepath.Join(out, "alpha_sink.md"))
	if !strings.Contains(alpha, "## Example definition\n\nFrom `examples/alpha_sink.toml`:\n\n```toml\ntype = \"sink\"") {
		t.Errorf("alpha_sink page lacks its example definition:\n%s", alpha)
	}
	beta := read(t, filepath.Join(out, "beta_source.md"))
	if !strings.Contains(beta, "From `examples/demo/beta.toml`:\n\n```toml\ntype = \"source\"\nkey = \"demo_beta\"") {
		t.Errorf("beta_source page lacks the example found under examples/:\n%s", beta)
	}
	site, err := Load(fixture)
	if err != nil {
		t.Fatal(err)
	}
	if md := minimalDefinition(site.Plugins[1]); !strings.Contains(md, "type = \"source\"\nkey = \"beta\"") || !strings.Contains(md, "create_topics = true") {
		t.Errorf("minimal definition of beta_source:\n%s", md)
	}
	if strings.Contains(read(t, filepath.Join(out, "gamma_fields.md")), "Example definition") {
		t.Error("a transform page has a definition example")
	}
	rt := read(t, filepath.Join(out, "runtime_config.md"))
	for _, want := range []string{
		"| `broker` | table | — | Where PicoMQ is. | — |",
		"| `broker.bootstrap_servers` | string | — | host:port list. | `PICOMQ_CONNECTORS_BROKER_BOOTSTRAP_SERVERS` |",
		"| `connectors_dir` | string | `\"connectors\"` | Folder. | `PICOMQ_CONNECTORS_CONNECTORS_DIR` |",
	} {
		if !strings.Contains(rt, want) {
			t.Errorf("runtime config page lacks %q:\n%s", want, rt)
		}
	}
	if strings.Index(rt, "`broker`") > strings.Index(rt, "`connectors_dir`") {
		t.Error("runtime config rows are not in schema order")
	}
	def := read(t, filepath.Join(out, "definition.md"))
	for _, want := range []string{
		"| `type` | string, one of `sink`, `source` | — | sink or source. | — |",
		"| `topics[].batch_length` | integer | `1000` | Batch. | `PICOMQ_CONNECTORS_{T}_{KEY}_TOPICS_{i}_BATCH_LENGTH` |",
		"| `topics[].topic` | string or table |",
		"`PICOMQ_CONNECTORS_{T}_{KEY}_PLUGIN_CONFIG_{FIELD}`",
	} {
		if !strings.Contains(def, want) {
			t.Errorf("definition page lacks %q:\n%s", want, def)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "schemas", "definitions", "gamma_fields.json")); err == nil {
		t.Error("a transform got a definition-file schema")
	}
	for _, f := range []string{"schemas/alpha_sink.json", "schemas/definitions/alpha_sink.json", "schemas/runtime/connector.json", "dialect.md", "schemas.md"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("%s not written: %v", f, err)
		}
	}
}

func TestSchemaKeys(t *testing.T) {
	keys, err := SchemaKeys([]byte(read(t, filepath.Join(fixture, "schemas", "alpha_sink.json"))))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(keys, " "); got != "bucket tls tls.ca_file max_attempts" {
		t.Fatalf("SchemaKeys = %s", got)
	}
}

func TestMissingGeneratedDocs(t *testing.T) {
	root := t.TempDir()
	os.MkdirAll(filepath.Join(root, "schemas"), 0o755)
	os.WriteFile(filepath.Join(root, "schemas", "x_sink.json"), []byte(`{"x-kind":"sink","properties":{}}`), 0o644)
	var stdout, stderr bytes.Buffer
	code := Main([]string{"-C", root, "--out", t.TempDir(), "--format", "html"}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "generated/docs/x_sink.md is missing: run go generate ./...") {
		t.Fatalf("exit %d, stderr %q", code, &stderr)
	}
	if code := Main([]string{"--out", "x", "--format", "pdf"}, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d for an unknown format", code)
	}
	if code := Main(nil, &stdout, &stderr); code != 2 {
		t.Fatalf("exit %d without --out", code)
	}
}

var (
	hrefRe  = regexp.MustCompile(`\b(href|src)="([^"]*)"`)
	idRe    = regexp.MustCompile(`\bid="([^"]*)"`)
	assetRe = regexp.MustCompile(`<(link|script|img|iframe|style)\b[^>]*>`)
)

// checkLinks fails unless every relative link of every page resolves to a
// file of the site and, with an anchor, to an id on that page, and no page
// loads anything from outside the site.
func checkLinks(t *testing.T, out string) {
	t.Helper()
	pages, _ := filepath.Glob(filepath.Join(out, "*.html"))
	if len(pages) == 0 {
		t.Fatal("no pages")
	}
	ids := map[string]map[string]bool{}
	for _, p := range pages {
		set := map[string]bool{}
		for _, m := range idRe.FindAllStringSubmatch(read(t, p), -1) {
			set[m[1]] = true
		}
		ids[filepath.Base(p)] = set
	}
	for _, p := range pages {
		page := read(t, p)
		for _, tag := range assetRe.FindAllString(page, -1) {
			if strings.Contains(tag, "://") || strings.Contains(tag, "//") || strings.HasPrefix(tag, "<script") || strings.HasPrefix(tag, "<iframe") {
				t.Errorf("%s loads an asset from outside the site: %s", filepath.Base(p), tag)
			}
		}
		for _, m := range hrefRe.FindAllStringSubmatch(page, -1) {
			dest := m[2]
			if strings.Contains(dest, "://") || strings.HasPrefix(dest, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(dest, "#")
			if file == "" {
				file = filepath.Base(p)
			}
			if _, err := os.Stat(filepath.Join(out, filepath.FromSlash(file))); err != nil {
				t.Errorf("%s links to %s, which does not exist", filepath.Base(p), dest)
				continue
			}
			if anchor != "" && !ids[file][anchor] {
				t.Errorf("%s links to %s, but %s has no id %q", filepath.Base(p), dest, file, anchor)
			}
		}
	}
}

func TestHTMLSiteLinksAndAssets(t *testing.T) {
	out := t.TempDir()
	if _, err := Build(Options{Root: fixture, Out: out, Format: HTML}); err != nil {
		t.Fatal(err)
	}
	checkLinks(t, out)
	if strings.Contains(read(t, filepath.Join(out, "dialect.html")), "<script>") {
		t.Error("raw HTML from a source page reached the site")
	}
	if !strings.Contains(read(t, filepath.Join(out, "alpha_sink.html")), `<a href="beta_source.html#configuration">`) {
		t.Error("a link to another page's .md was not rewritten to .html")
	}
}

// chromium returns the headless browser, or skips (fails under CI=true)
// when it is not installed.
func chromium(t *testing.T) string {
	t.Helper()
	candidates := []string{os.Getenv("PICO_CHROMIUM"), "/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("chromium is not installed: install it with apt-get install -y chromium (or set PICO_CHROMIUM to a Chromium binary)")
	}
	t.Skip("chromium is not installed (apt-get install -y chromium); skipped outside CI")
	return ""
}

// dumpDOMs loads pages in headless Chromium, four at a time, and returns
// the DOM it built for each.
func dumpDOMs(t *testing.T, bin string, files []string) []string {
	t.Helper()
	doms := make([]string, len(files))
	errs := make([]string, len(files))
	sem := make(chan struct{}, 4)
	var wg sync.WaitGroup
	for i, file := range files {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			doms[i], errs[i] = dumpDOM(bin, file, t.TempDir())
		}()
	}
	wg.Wait()
	for i, e := range errs {
		if e != "" {
			t.Fatalf("chromium %s: %s", files[i], e)
		}
	}
	return doms
}

// dumpDOM loads one page in headless Chromium and returns the DOM it
// built, or a failure message.
func dumpDOM(bin, file, profile string) (string, string) {
	abs, err := filepath.Abs(file)
	if err != nil {
		return "", err.Error()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
		"--user-data-dir="+profile, "--dump-dom", "file://"+abs)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Sprintf("%v\n%s", err, stderr.String())
	}
	if stdout.Len() == 0 {
		return "", "rendered nothing:\n" + stderr.String()
	}
	return stdout.String(), ""
}

var (
	tagRe  = regexp.MustCompile(`<[^>]+>`)
	cellRe = regexp.MustCompile(`(?s)<td>(.*?)</td>`)
)

// configTable returns the first cell of every body row of the table that
// follows the Configuration heading in a DOM.
func configTable(dom string) ([]string, bool) {
	i := strings.Index(dom, `id="configuration"`)
	if i < 0 {
		return nil, false
	}
	rest := dom[i:]
	start := strings.Index(rest, "<tbody>")
	end := strings.Index(rest, "</tbody>")
	if start < 0 || end < start {
		return nil, false
	}
	var keys []string
	for _, row := range strings.Split(rest[start:end], "<tr>")[1:] {
		m := cellRe.FindStringSubmatch(row)
		if m == nil {
			continue
		}
		keys = append(keys, strings.TrimSpace(tagRe.ReplaceAllString(m[1], "")))
	}
	return keys, true
}

// checkInBrowser renders the catalog and each connector page in Chromium
// and checks what a reader sees: the catalog links every connector, and
// each page's Configuration table has one row per schema key.
func checkInBrowser(t *testing.T, root string) {
	bin := chromium(t)
	out := t.TempDir()
	site, err := Build(Options{Root: root, Out: out, Format: HTML})
	if err != nil {
		t.Fatal(err)
	}
	checkLinks(t, out)
	files := []string{filepath.Join(out, "index.html")}
	for _, p := range site.Plugins {
		files = append(files, filepath.Join(out, p.Name+".html"))
	}
	doms := dumpDOMs(t, bin, files)
	index := doms[0]
	if !strings.Contains(index, "<table>") {
		t.Fatalf("the catalog has no table in the browser:\n%s", index)
	}
	catalogPart := index[strings.Index(index, `<main`):]
	for _, p := range site.Plugins {
		if !strings.Contains(catalogPart, `<a href="`+p.Name+`.html">`+p.Name+`</a>`) {
			t.Errorf("the catalog does not link %s", p.Name)
		}
	}
	for i, p := range site.Plugins {
		dom := doms[i+1]
		keys, ok := configTable(dom)
		if !ok {
			t.Errorf("%s: no Configuration table in the browser", p.Name)
			continue
		}
		if strings.Join(keys, " ") != strings.Join(withTicks(p.Keys), " ") && strings.Join(keys, " ") != strings.Join(p.Keys, " ") {
			t.Errorf("%s: the Configuration table shows keys %q, the schema has %q", p.Name, keys, p.Keys)
		}
		if !strings.Contains(dom, `href="style.css"`) {
			t.Errorf("%s does not use the stylesheet", p.Name)
		}
	}
}

func withTicks(keys []string) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = "`" + k + "`"
	}
	return out
}

func TestBrowserFixture(t *testing.T) {
	checkInBrowser(t, fixture)
}

// TestBrowserRepository builds the site of this repository and checks it
// in the browser: its pages must match the schemas in schemas/.
func TestBrowserRepository(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "generated", "docs")); err != nil {
		t.Fatalf("generated/docs is missing: run go generate ./... (%v)", err)
	}
	checkInBrowser(t, root)
}

// TestDefinitionSchemasAcceptExamples validates every example definition
// of this repository against the definition schema written for its
// connector, loaded from the site folder as an editor would.
func TestDefinitionSchemasAcceptExamples(t *testing.T) {
	root := filepath.Join("..", "..")
	out := t.TempDir()
	site, err := Build(Options{Root: root, Out: out, Format: Markdown})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range site.Plugins {
		if p.Kind == "transform" {
			continue
		}
		file, example, err := findExample(root, p)
		if err != nil || example == nil {
			continue
		}
		var doc map[string]any
		if err := toml.Unmarshal(example, &doc); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		b, _ := json.Marshal(doc)
		var plain any
		json.Unmarshal(b, &plain)
		c := jsonschema.NewCompiler()
		c.Draft = jsonschema.Draft2020
		schema, err := c.Compile(filepath.Join(out, "schemas", "definitions", p.Name+".json"))
		if err != nil {
			t.Fatalf("%s: the definition schema does not compile: %v", p.Name, err)
		}
		if err := schema.Validate(plain); err != nil {
			t.Errorf("%s does not validate against schemas/definitions/%s.json: %v", file, p.Name, err)
		}
		// The schema catches a plugin_config mistake.
		doc["plugin_config"] = map[string]any{"no_such_key_at_all": 1}
		b, _ = json.Marshal(doc)
		json.Unmarshal(b, &plain)
		if err := schema.Validate(plain); err == nil {
			t.Errorf("schemas/definitions/%s.json accepts an unknown plugin_config key", p.Name)
		}
		checked++
	}
	if checked == 0 {
		t.Fatal("no example definition found under examples/")
	}
	t.Logf("checked %d example definitions", checked)
}
