package cleanup

import (
	"slices"
	"testing"
)

func TestRunLastFirstOnce(t *testing.T) {
	var s Stack
	var got []int
	for i := range 3 {
		s.Add(func() { got = append(got, i) })
	}
	s.Run()
	s.Run()
	if want := []int{2, 1, 0}; !slices.Equal(got, want) {
		t.Fatalf("ran %v, want %v", got, want)
	}
}
