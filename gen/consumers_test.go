package gen

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/gen/compat"
	"github.com/picomq/pico-connectors/gen/lint"
)

// TestFixturesThroughLintAndCompat runs the fixture schemas, which use every
// keyword of the dialect, through the two consumers beside gen and docs
// (TestGolden): lint finds exactly the undescribed enum values and unknown
// x- keywords they carry on purpose, and compat finds nothing between a
// schema and itself, and the removed element key of an array of tables.
func TestFixturesThroughLintAndCompat(t *testing.T) {
	files, err := filepath.Glob("testdata/schemas/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("fixtures: %v %v", files, err)
	}
	fs, err := lint.Files(files...)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range fs {
		got = append(got, filepath.Base(f.File)+" "+f.Pointer+" "+string(f.Rule))
	}
	want := []string{
		"every_keyword.json /properties/mode enum-undescribed",
		"every_keyword.json /properties/tls/properties/level enum-undescribed",
		"every_keyword.json /properties/x_unknown/x-some-other-tool unknown-keyword",
		"every_keyword.json /x-another-unknown unknown-keyword",
		"hostile_names.json /properties/config enum-undescribed",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("lint of the fixtures:\n%s\nwant:\n%s\n\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"), fs)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		cs, err := compat.Compare(b, b)
		if err != nil || len(cs) != 0 {
			t.Errorf("compat %s with itself: %v %v", f, cs, err)
		}
	}
	old, err := os.ReadFile("testdata/schemas/object_arrays.json")
	if err != nil {
		t.Fatal(err)
	}
	cut := strings.Replace(string(old), `"scale": {"type": "integer", "default": 0, "minimum": 0, "description": "Digits after the point.", "x-default-if": {"when": {"key": "type", "equals": "timestamp"}, "value": 3}},`, "", 1)
	if cut == string(old) {
		t.Fatal("the fixture no longer has the scale key this test removes")
	}
	cs, err := compat.Compare(old, []byte(cut))
	if err != nil || len(cs) != 1 || cs[0].Key != "columns[].scale" || cs[0].Kind != compat.KeyRemoved {
		t.Errorf("compat after removing columns[].scale: %v %v", cs, err)
	}
}
