package docsite

import (
	"bytes"
	_ "embed"
	"fmt"
	"html"
	"os"
	"path/filepath"
	"strings"

	"github.com/yuin/goldmark"
	"github.com/yuin/goldmark/ast"
	"github.com/yuin/goldmark/extension"
	"github.com/yuin/goldmark/parser"
	"github.com/yuin/goldmark/text"
	"github.com/yuin/goldmark/util"
)

//go:embed style.css
var stylesheet []byte

// markdown is the goldmark converter of the HTML site: GitHub tables,
// heading IDs for anchors, links to .md pages rewritten to .html. Raw HTML
// in the sources is escaped.
var markdown = goldmark.New(
	goldmark.WithExtensions(extension.GFM),
	goldmark.WithParserOptions(
		parser.WithAutoHeadingID(),
		parser.WithASTTransformers(util.Prioritized(linkRewriter{}, 100)),
	),
)

// linkRewriter points links to Markdown pages at their HTML pages.
type linkRewriter struct{}

func (linkRewriter) Transform(doc *ast.Document, _ text.Reader, _ parser.Context) {
	ast.Walk(doc, func(n ast.Node, entering bool) (ast.WalkStatus, error) {
		if l, ok := n.(*ast.Link); ok && entering {
			l.Destination = []byte(htmlLink(string(l.Destination)))
		}
		return ast.WalkContinue, nil
	})
}

// htmlLink rewrites a relative link to page.md[#anchor] as page.html.
func htmlLink(dest string) string {
	if strings.Contains(dest, "://") || strings.HasPrefix(dest, "#") {
		return dest
	}
	path, anchor, _ := strings.Cut(dest, "#")
	if p, ok := strings.CutSuffix(path, ".md"); ok {
		path = p + ".html"
	}
	if anchor != "" {
		return path + "#" + anchor
	}
	return path
}

func (s *Site) writeHTML(out string) error {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "style.css"), stylesheet, 0o644); err != nil {
		return err
	}
	nav := s.nav()
	for _, p := range s.Pages {
		var body bytes.Buffer
		if err := markdown.Convert([]byte(p.Markdown), &body); err != nil {
			return fmt.Errorf("page %s: %w", p.Slug, err)
		}
		var b bytes.Buffer
		fmt.Fprintf(&b, `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>%s · pico-connectors reference</title>
<link rel="stylesheet" href="style.css">
</head>
<body>
`, html.EscapeString(p.Title))
		b.WriteString(strings.Replace(nav, `<li><a href="`+p.Slug+`.html"`, `<li><a href="`+p.Slug+`.html" aria-current="page"`, 1))
		fmt.Fprintf(&b, "<main id=\"content\" data-page=\"%s\">\n", html.EscapeString(p.Slug))
		b.Write(body.Bytes())
		b.WriteString("</main>\n</body>\n</html>\n")
		if err := os.WriteFile(filepath.Join(out, p.Slug+".html"), b.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return s.writeSchemas(out)
}

// nav is the navigation every page shows.
func (s *Site) nav() string {
	var b strings.Builder
	b.WriteString("<nav class=\"site-nav\" aria-label=\"Reference\">\n<a class=\"brand\" href=\"index.html\">pico-connectors</a>\n")
	for _, group := range []struct{ title, kind string }{{"Sources", "source"}, {"Sinks", "sink"}, {"Transforms", "transform"}} {
		var items []string
		for _, p := range s.Plugins {
			if p.Kind == group.kind {
				items = append(items, fmt.Sprintf("<li><a href=\"%s.html\">%s</a></li>", html.EscapeString(p.Name), html.EscapeString(p.Name)))
			}
		}
		if len(items) == 0 {
			continue
		}
		fmt.Fprintf(&b, "<h2>%s</h2>\n<ul>\n%s\n</ul>\n", group.title, strings.Join(items, "\n"))
	}
	b.WriteString("<h2>Reference</h2>\n<ul>\n")
	for _, p := range s.Pages {
		switch p.Slug {
		case "index", "runtime_config", "definition", "dialect", "delivery-guarantees", "schemas":
			fmt.Fprintf(&b, "<li><a href=\"%s.html\">%s</a></li>\n", p.Slug, html.EscapeString(p.Title))
		}
	}
	b.WriteString("</ul>\n</nav>\n")
	return b.String()
}
