package docsite

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// runtimeReference renders one page per schemas/runtime/*.json: the
// runtime config (runtime_config) and the definition file (definition),
// each a table of every key with its type, default, meaning and
// environment variable.
func runtimeReference(root string) ([]Page, map[string][]byte, error) {
	files, err := filepath.Glob(filepath.Join(root, "schemas", "runtime", "*.json"))
	if err != nil {
		return nil, nil, err
	}
	sort.Strings(files)
	schemas := map[string][]byte{}
	var runtimeFile, definitionFile string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		base := filepath.Base(f)
		schemas[base] = b
		switch {
		case strings.Contains(base, "runtime"):
			runtimeFile = base
		case strings.Contains(base, "definition") || strings.Contains(base, "connector"):
			definitionFile = base
		}
	}
	if runtimeFile == "" || definitionFile == "" {
		return nil, nil, fmt.Errorf("schemas/runtime/ lacks the runtime config or definition-file schema (found %d files): run go generate ./... first", len(files))
	}
	rt, err := keyTable(schemas[runtimeFile], runtimeEnv)
	rt = "The file given to `pico-connectors --config`. Every key can be overridden by the environment variable in the last column; " +
		"the variable wins over the file.\n\n" + rt
	if err != nil {
		return nil, nil, fmt.Errorf("schemas/runtime/%s: %w", runtimeFile, err)
	}
	def, err := keyTable(schemas[definitionFile], definitionEnv)
	def = "One TOML file per connector in `connectors_dir`. In the variable names, `{T}` is `SINK` or `SOURCE`, `{KEY}` the connector's key " +
		"upper-cased, and `{i}` the 0-based index of a `[[topics]]` block. The `[plugin_config]` table is described on each connector's page " +
		"(its variables are `PICOMQ_CONNECTORS_{T}_{KEY}_PLUGIN_CONFIG_{FIELD}`).\n\n" + def
	if err != nil {
		return nil, nil, fmt.Errorf("schemas/runtime/%s: %w", definitionFile, err)
	}
	// Prefer the pages picogen gen wrote (they know every variable the
	// runtime reads); fall back to tables rendered from the schemas.
	for _, g := range []struct {
		file string
		md   *string
	}{{"runtime.md", &rt}, {"definition.md", &def}} {
		b, err := os.ReadFile(filepath.Join(root, "generated", "docs", g.file))
		if err != nil {
			continue
		}
		body := stripGeneratedHeader(string(b))
		// Drop the page's own title: the page below has one.
		if strings.HasPrefix(body, "# ") {
			if i := strings.Index(body, "\n"); i >= 0 {
				body = strings.TrimLeft(body[i+1:], "\n")
			}
		}
		*g.md = body
	}
	pages := []Page{
		{Slug: "runtime_config", Title: "Runtime config", Markdown: "# Runtime config\n\n" + rt +
			fmt.Sprintf("\nJSON Schema: [schemas/runtime/%s](schemas/runtime/%s). Back to the [catalog](index.md).\n", runtimeFile, runtimeFile)},
		{Slug: "definition", Title: "Definition file", Markdown: "# Definition file\n\n" + def +
			fmt.Sprintf("\nJSON Schema: [schemas/runtime/%s](schemas/runtime/%s); point an editor at it for completion of definition files. "+
				"Back to the [catalog](index.md).\n", definitionFile, definitionFile)},
	}
	return pages, schemas, nil
}

// row is one key of a runtime schema.
type row struct {
	path        []string // "topics[]" for an array of tables
	typ, def    string
	description string
	// container is a table or list of tables with keys of its own; its
	// keys have the variables.
	container bool
}

func runtimeEnv(path []string) string {
	return "PICOMQ_CONNECTORS_" + envJoin(path)
}

func definitionEnv(path []string) string {
	if len(path) == 1 && (path[0] == "type" || path[0] == "key") {
		return "" // they name the variables themselves
	}
	if len(path) > 0 && path[0] == "plugin_config" {
		return "PICOMQ_CONNECTORS_{T}_{KEY}_PLUGIN_CONFIG_{FIELD}"
	}
	return "PICOMQ_CONNECTORS_{T}_{KEY}_" + envJoin(path)
}

func envJoin(path []string) string {
	parts := make([]string, 0, len(path))
	for _, p := range path {
		if name, ok := strings.CutSuffix(p, "[]"); ok {
			parts = append(parts, strings.ToUpper(name), "{i}")
			continue
		}
		parts = append(parts, strings.ToUpper(p))
	}
	return strings.Join(parts, "_")
}

// keyTable renders a Markdown table of every key of an invopop-reflected
// schema, in the schema's order, resolving $ref into $defs.
func keyTable(schema []byte, env func([]string) string) (string, error) {
	v, err := decodeOrdered(schema)
	if err != nil {
		return "", err
	}
	root, ok := v.(*omap)
	if !ok {
		return "", fmt.Errorf("not a JSON object")
	}
	defs := root.obj("$defs")
	resolve := func(s *omap) *omap {
		for i := 0; i < 10 && s != nil; i++ {
			ref, ok := s.get("$ref").(string)
			if !ok {
				return s
			}
			name, ok := strings.CutPrefix(ref, "#/$defs/")
			if !ok {
				return s
			}
			t := defs.obj(name)
			if t == nil {
				return s
			}
			merged := &omap{vals: map[string]any{}}
			for _, k := range t.keys {
				merged.keys = append(merged.keys, k)
				merged.vals[k] = t.vals[k]
			}
			for _, k := range s.keys {
				if k == "$ref" {
					continue
				}
				if _, dup := merged.vals[k]; !dup {
					merged.keys = append(merged.keys, k)
				}
				merged.vals[k] = s.vals[k]
			}
			s = merged
		}
		return s
	}
	var rows []row
	var walk func(s *omap, path []string)
	walk = func(s *omap, path []string) {
		props := s.obj("properties")
		if props == nil {
			return
		}
		for _, name := range props.keys {
			ps := resolve(props.obj(name))
			if ps == nil {
				continue
			}
			p := append(append([]string(nil), path...), name)
			r := row{path: p, typ: typeWords(ps, resolve), description: str(ps.get("description"))}
			if d := ps.get("default"); d != nil {
				r.def = plainJSON(d)
			}
			items := resolve(ps.obj("items"))
			r.container = ps.obj("properties") != nil || (items != nil && items.obj("properties") != nil)
			rows = append(rows, r)
			if ps.obj("properties") != nil {
				walk(ps, p)
			}
			if items != nil && items.obj("properties") != nil {
				walk(items, append(append([]string(nil), path...), name+"[]"))
			}
		}
	}
	walk(resolve(root), nil)
	var b strings.Builder
	b.WriteString("| Key | Type | Default | Meaning | Environment variable |\n|---|---|---|---|---|\n")
	for _, r := range rows {
		key := strings.Join(r.path, ".")
		def := "—"
		if r.def != "" {
			def = "`" + strings.ReplaceAll(r.def, "|", `\|`) + "`"
		}
		variable := "—"
		if v := env(r.path); !r.container && v != "" {
			variable = "`" + v + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", key, cell(r.typ), def, cell(orDash(r.description)), variable)
	}
	return b.String(), nil
}

func typeWords(s *omap, resolve func(*omap) *omap) string {
	var t string
	switch x := s.get("type").(type) {
	case string:
		t = x
	case []any:
		var parts []string
		for _, p := range x {
			parts = append(parts, fmt.Sprint(p))
		}
		t = strings.Join(parts, " or ")
	}
	if t == "" {
		if s.get("oneOf") != nil || s.get("anyOf") != nil {
			return "string or table"
		}
		return "any"
	}
	switch t {
	case "array":
		if items := resolve(s.obj("items")); items != nil {
			if items.obj("properties") != nil {
				return "list of tables"
			}
			return "list of " + typeWords(items, resolve)
		}
	case "object":
		return "table"
	}
	if e, ok := s.get("enum").([]any); ok {
		var vals []string
		for _, v := range e {
			vals = append(vals, "`"+strings.Trim(plainJSON(v), `"`)+"`")
		}
		return t + ", one of " + strings.Join(vals, ", ")
	}
	return t
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}
