package confkit

import (
	"errors"
	"fmt"
	"testing"
)

func TestProblems(t *testing.T) {
	ps := Problems{
		{Key: "bucket", Rule: "required", Message: "is required but not set"},
		{Key: "max_file_size", Value: "6GiB", Rule: "x-maximum", Message: "max_file_size (6GiB) exceeds S3 single PutObject limit of 5 GiB"},
		{Rule: "x", Message: "no key"},
	}
	want := "bucket: is required but not set\nmax_file_size: max_file_size (6GiB) exceeds S3 single PutObject limit of 5 GiB\nno key"
	if ps.Error() != want {
		t.Fatalf("got %q", ps.Error())
	}
	err := fmt.Errorf("wrap: %w", ps.Err())
	got, ok := AsProblems(err)
	if !ok || len(got) != 3 || !got.Has("bucket") || got.Has("nope") {
		t.Fatal("AsProblems")
	}
	if Problems(nil).Err() != nil {
		t.Fatal("nil Err")
	}
	var target Problems
	if !errors.As(err, &target) {
		t.Fatal("errors.As")
	}
}

func TestSortProblems(t *testing.T) {
	ps := Problems{{Key: "zz"}, {Key: "b.c"}, {Key: "a"}, {Key: "b"}}
	SortProblems(ps, []string{"b", "a"})
	if ps[0].Key != "b" || ps[1].Key != "b.c" || ps[2].Key != "a" || ps[3].Key != "zz" {
		t.Fatalf("%v", ps)
	}
}

func TestSuggest(t *testing.T) {
	cands := []string{"bucket", "region", "max_file_size", "max_attempts", "output_format"}
	tests := map[string]string{
		"buckt":        "bucket",
		"Bucket":       "bucket",
		"regoin":       "region",
		"gne":          "",
		"max_filesize": "max_file_size",
		"max_atempts":  "max_attempts",
		"outputformat": "output_format",
		"zzz":          "",
		"x":            "",
		"compression":  "",
	}
	for in, want := range tests {
		if got := Suggest(in, cands); got != want {
			t.Errorf("Suggest(%q) = %q; want %q", in, got, want)
		}
	}
	if got := Suggest("gne", []string{"gen", "random"}); got != "gen" {
		t.Errorf(`Suggest("gne") = %q; want "gen" (a swap of neighbours is one edit)`, got)
	}
	if got := DidYouMean("buckt", cands); got != ` (did you mean "bucket"?)` {
		t.Fatal(got)
	}
}
