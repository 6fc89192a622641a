package definition

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// loadProblems loads a runtime config and connector files and returns the
// problems Load reports.
func loadProblems(t *testing.T, runtime string, connectors map[string]string) confkit.Problems {
	t.Helper()
	files := map[string]string{"runtime.toml": runtime}
	for name, body := range connectors {
		files["connectors/"+name] = body
	}
	_, err := Load(writeFiles(t, files), nil)
	var ps confkit.Problems
	if err != nil && !errors.As(err, &ps) {
		t.Fatalf("Load: %v", err)
	}
	return ps
}

// TestNestingLimit: 200,000 nested arrays took the TOML parser 25 s and
// 794 MB; nesting beyond MaxNesting, by brackets or by dotted keys, is now
// refused with the line or key, and the file is not parsed further.
func TestNestingLimit(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	cases := []struct{ name, body, want string }{
		{"200k arrays", goodSink + "field = " + deep(200_000) + "\n", fmt.Sprintf("line 16: arrays and tables nest more than %d levels deep", MaxNesting)},
		{"inline tables", strings.Replace(goodSink, "[plugin_config]", "[plugin_config]\nfield = "+strings.Repeat("{ a = ", 40)+"1"+strings.Repeat(" }", 40), 1), "line 14: arrays and tables nest more than"},
		{"dotted keys", goodSink + "field" + strings.Repeat(".a", 40) + " = 1\n", "plugin_config.field.a.a"},
		{"table header", goodSink + "[plugin_config.field" + strings.Repeat(".a", 40) + "]\n", "tables and arrays nest more than 32 levels deep"},
	}
	for _, c := range cases {
		ps := loadProblems(t, "", map[string]string{"a.toml": c.body})
		if len(ps) != 1 || !strings.Contains(ps[0].Error(), c.want) {
			t.Errorf("%s: %v; want one problem with %q", c.name, ps, c.want)
		}
	}
	// Brackets in strings and comments do not count; a few levels pass.
	ok := strings.Replace(goodSink, "[plugin_config]", "# "+deep(100)+"\n[plugin_config]", 1) +
		"field = [\"" + deep(50) + "\", '" + deep(50) + "', '''\n" + deep(50) + "''', \"\"\"\\\"" + deep(50) + "\"\"\", " + deep(20) + "]\n"
	if ps := loadProblems(t, "", map[string]string{"a.toml": ok}); len(ps) != 0 {
		t.Errorf("brackets in strings, comments and 20 levels: %v", ps)
	}
}

// TestFileSizeLimit: a file larger than MaxFileSize is refused unread.
func TestFileSizeLimit(t *testing.T) {
	big := goodSink + "# " + strings.Repeat("x", MaxFileSize) + "\n"
	ps := loadProblems(t, "", map[string]string{"a.toml": big})
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "larger than 1048576 bytes") {
		t.Errorf("definition: %v", ps)
	}
	ps = loadProblems(t, "# "+strings.Repeat("x", MaxFileSize)+"\n", map[string]string{"a.toml": goodSink})
	if len(ps) != 1 || !strings.Contains(ps[0].Message, "larger than 1048576 bytes") {
		t.Errorf("runtime config: %v", ps)
	}
}

// TestLongValuesClipped: a 400 KB value or key is quoted in its problem cut
// to a readable length, with its size, while the key and what is allowed
// stay whole.
func TestLongValuesClipped(t *testing.T) {
	long := strings.Repeat("é", 200_000)
	ps := loadProblems(t, "[http]\naddress = \""+long+"\"\n", map[string]string{
		"a.toml": strings.Replace(goodSink, "version = 0", "\""+long+"\" = 1", 1),
	})
	if len(ps) != 2 {
		t.Fatalf("%d problems, want 2: %.2000v", len(ps), ps)
	}
	for _, p := range ps {
		line := p.Error()
		if len(line) > 2*maxShown+len(p.File)+200 {
			t.Errorf("%d bytes: %.300s", len(line), line)
		}
		if !strings.Contains(line, "(400002 bytes)") {
			t.Errorf("no length of the cut value: %.500s", line)
		}
	}
	if !strings.Contains(ps[0].Error(), "http.address: \"éé") || !strings.Contains(ps[0].Error(), "is not host:port, such as 127.0.0.1:8081") {
		t.Errorf("runtime config: %s", ps[0].Error())
	}
	if !strings.Contains(ps[1].Error(), "allowed: ") {
		t.Errorf("definition: %s", ps[1].Error())
	}
}
