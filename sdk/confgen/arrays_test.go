package confgen

import (
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

func TestElementKey(t *testing.T) {
	for in, want := range map[string]string{
		"columns[2].type":      "columns[].type",
		"a[0].b[13].c":         "a[].b[].c",
		"plain.key":            "plain.key",
		"odd[x].key":           "odd[x].key",
		"open[12":              "open[12",
		"columns[]":            "columns[]",
		"columns[7]":           "columns[]",
		"weird[]name[3].inner": "weird[]name[].inner",
	} {
		if got := ElementKey(in); got != want {
			t.Errorf("ElementKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestInstanceKey(t *testing.T) {
	doc := map[string]any{
		"columns": []any{map[string]any{}, map[string]any{"tls": map[string]any{}}},
		"2":       map[string]any{"3": "x"},
	}
	for _, c := range []struct {
		path []string
		want string
	}{
		{[]string{"columns", "1", "tls", "ca"}, "columns[1].tls.ca"},
		{[]string{"columns", "9", "name"}, "columns[9].name"},
		{[]string{"2", "3"}, "2.3"},
		{nil, ""},
	} {
		if got := instanceKey(doc, c.path); got != c.want {
			t.Errorf("instanceKey(%v) = %q, want %q", c.path, got, c.want)
		}
	}
}

func TestSortProblemsElementByElement(t *testing.T) {
	ps := confkit.Problems{{Key: "columns[10].a"}, {Key: "columns[2].b"}, {Key: "name"}, {Key: "columns[2].a"}, {Key: "columns[2].zz"}, {Key: "columns"}}
	SortProblems(ps, []string{"name", "columns", "columns[].a", "columns[].b"})
	var got []string
	for _, p := range ps {
		got = append(got, p.Key)
	}
	want := "name columns columns[2].a columns[2].b columns[2].zz columns[10].a"
	if strings.Join(got, " ") != want {
		t.Fatalf("order %v, want %s", got, want)
	}
}
