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

func TestProblemNamesFileAndKey(t *testing.T) {
	for _, c := range []struct {
		p    Problem
		want string
	}{
		{Problem{File: "connectors/a.toml", Key: "topics[0].pattern", Message: "missing"}, "connectors/a.toml: topics[0].pattern: missing"},
		{Problem{File: "runtime.toml", Message: "not TOML"}, "runtime.toml: not TOML"},
		{Problem{Key: "bucket", Message: "is required"}, "bucket: is required"},
		{Problem{Message: "alone"}, "alone"},
		{Problem{File: "schemas/s3_sink.json", Key: "/properties/a/type", Message: "type is required"}, "schemas/s3_sink.json: at /properties/a/type: type is required"},
	} {
		if got := c.p.Error(); got != c.want {
			t.Errorf("%+v: %q, want %q", c.p, got, c.want)
		}
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
	if got := DidYouMeanOrAllowed("buckt", cands); got != ` (did you mean "bucket"?)` {
		t.Fatal(got)
	}
	if got := DidYouMeanOrAllowed("zzz", []string{"region", "bucket"}); got != "; allowed: bucket, region" {
		t.Fatalf("nothing close: %q, want the sorted list", got)
	}
	many := []string{"a1", "a2", "a3", "a4", "a5", "a6", "a7", "a8", "a9", "b1", "b2", "b3", "b4"}
	if got := DidYouMeanOrAllowed("zzzzzz", many); got != "; allowed: a1, a2, a3, a4, a5, a6, a7, a8, a9, b1, b2, b3, ..." {
		t.Fatalf("more than twelve: %q", got)
	}
	if got := DidYouMeanOrAllowed("zzz", nil); got != "" {
		t.Fatalf("no candidates: %q", got)
	}
}
