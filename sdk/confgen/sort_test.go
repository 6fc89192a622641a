package confgen

import (
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

func TestSortProblems(t *testing.T) {
	ps := confkit.Problems{{Key: "zz"}, {Key: "b.c"}, {Key: "a"}, {Key: "b"}}
	SortProblems(ps, []string{"b", "a"})
	if ps[0].Key != "b" || ps[1].Key != "b.c" || ps[2].Key != "a" || ps[3].Key != "zz" {
		t.Fatalf("%v", ps)
	}
}
