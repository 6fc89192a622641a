package docsite

import (
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
