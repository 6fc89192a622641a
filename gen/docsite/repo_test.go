package docsite

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestRepositorySite loads the real repository, so a reference page that
// goes missing, or a schema without its generated page, fails here rather
// than on the published site.
func TestRepositorySite(t *testing.T) {
	site, err := Load("../..")
	if err != nil {
		t.Fatalf("loading the repository's site: %v", err)
	}
	slugs := map[string]Page{}
	for _, p := range site.Pages {
		slugs[p.Slug] = p
	}
	for _, want := range []string{"index", "api", "metrics", "dialect", "schemas", "runtime_config", "definition", "s3_sink", "postgres_source", "random_source"} {
		if _, ok := slugs[want]; !ok {
			t.Errorf("page %q is missing", want)
		}
	}
	if api := slugs["api"].Markdown; !strings.Contains(api, "/sources/{key}/restart") || strings.Contains(api, "README.md)") {
		t.Errorf("the API page lacks the restart route or still links a README:\n%s", api)
	}
	if !strings.Contains(slugs["index"].Markdown, "(api.md)") {
		t.Error("the catalog does not link the API reference")
	}
}

// TestGuaranteesLinkRealTests: every test the delivery guarantees page
// names as proof is a test function of the file it links, and the page
// is in the site under the slug the specs link.
func TestGuaranteesLinkRealTests(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(GuaranteesFile)))
	if err != nil {
		t.Fatal(err)
	}
	links := regexp.MustCompile(`\[(Test[A-Za-z0-9_]+)\]\(\.\./([^)#]+)\)`).FindAllStringSubmatch(string(md), -1)
	if len(links) < 30 {
		t.Fatalf("only %d test links in %s", len(links), GuaranteesFile)
	}
	for _, l := range links {
		src, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(l[2])))
		if err != nil {
			t.Errorf("%s links %s: %v", l[1], l[2], err)
			continue
		}
		if !strings.Contains(string(src), "\nfunc "+l[1]+"(t *testing.T)") {
			t.Errorf("%s links %s, which has no func %s(t *testing.T)", l[1], l[2], l[1])
		}
	}
	site, err := Load("../..")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range site.Pages {
		if p.Slug == "delivery-guarantees" {
			if strings.Contains(p.Markdown, "](../") {
				t.Error("the site's guarantees page keeps a relative link to a repository file")
			}
			return
		}
	}
	t.Error("the site has no delivery-guarantees page")
}
