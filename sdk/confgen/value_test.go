package confgen

import (
	"slices"
	"testing"
)

func TestAsLists(t *testing.T) {
	if got, ok := AsStrings([]any{"a", "b"}); !ok || !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("AsStrings: %v %v", got, ok)
	}
	if got, ok := AsStrings([]string{"x"}); !ok || !slices.Equal(got, []string{"x"}) {
		t.Errorf("AsStrings of []string: %v %v", got, ok)
	}
	if _, ok := AsStrings([]any{"a", int64(1)}); ok {
		t.Error("AsStrings accepted a number")
	}
	if got, ok := AsInts([]any{int64(1), int64(2)}); !ok || !slices.Equal(got, []int{1, 2}) {
		t.Errorf("AsInts: %v %v", got, ok)
	}
	if _, ok := AsInts([]any{1.5}); ok {
		t.Error("AsInts accepted 1.5")
	}
	if got, ok := AsFloats([]any{int64(1), 2.5}); !ok || !slices.Equal(got, []float64{1, 2.5}) {
		t.Errorf("AsFloats: %v %v", got, ok)
	}
	if _, ok := AsFloats("1"); ok {
		t.Error("AsFloats accepted a string")
	}
}
