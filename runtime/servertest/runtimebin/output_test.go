package runtimebin

import (
	"fmt"
	"testing"
)

func TestOutputLimit(t *testing.T) {
	all, bounded := &Output{}, &Output{Limit: 4}
	for _, s := range []string{"abc", "de", "f"} {
		fmt.Fprint(all, s)
		fmt.Fprint(bounded, s)
	}
	if all.String() != "abcdef" {
		t.Errorf("without a limit: %q, want everything", all.String())
	}
	if bounded.String() != "f" {
		t.Errorf("with Limit 4: %q, want only what came after 5 bytes were held", bounded.String())
	}
}
