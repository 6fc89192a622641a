package codec

import (
	"bytes"
	"fmt"
	"runtime/debug"
	"strings"
	"testing"
)

// listSchema is a linked list: each node's next is null or another node.
const listSchema = `{"type":"record","name":"Node","fields":[{"name":"next","type":["null","Node"]}]}`

// listPayload is the Avro binary of a list of n nodes: the first node's
// next is n-1 times branch 1 (Node), then branch 0 (null).
func listPayload(n int) []byte {
	return append(bytes.Repeat([]byte{0x02}, n-1), 0x00)
}

// TestAvroDecodeDepthLimit: a 2 MB payload of a recursive schema nests two
// million records; hamba's recursive decoder overflowed the stack on it,
// a fatal error no recover catches. Decode and Wire now refuse it with an
// error that names the limit, and still decode a list within the limit.
func TestAvroDecodeDepthLimit(t *testing.T) {
	// Keep an overflow (the failure this test guards against) from growing
	// the stack to 1 GB first.
	defer debug.SetMaxStack(debug.SetMaxStack(256 << 20))
	c, err := New(Options{Schema: "avro", AvroSchemaJSON: listSchema})
	if err != nil {
		t.Fatal(err)
	}
	deep := listPayload(2 << 20)
	want := fmt.Sprintf("more than %d levels", MaxAvroDepth)
	if _, err := c.Decode(deep); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Decode of 2M nested records: %v; want an error with %q", err, want)
	}
	if _, err := c.Wire(deep); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Wire of 2M nested records: %v; want an error with %q", err, want)
	}
	if _, err := c.Decode(listPayload(MaxAvroDepth + 1)); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Decode of %d nested records: %v; want an error with %q", MaxAvroDepth+1, err, want)
	}
	ok := listPayload(MaxAvroDepth)
	v, err := c.Decode(ok)
	if err != nil {
		t.Fatalf("Decode of %d nested records: %v", MaxAvroDepth, err)
	}
	if got := nodes(v); got != MaxAvroDepth {
		t.Fatalf("Decode of %d nested records gave %d", MaxAvroDepth, got)
	}
	if w, err := c.Wire(ok); err != nil || !bytes.Equal(w, ok) {
		t.Fatalf("Wire of %d nested records: %v", MaxAvroDepth, err)
	}
}

// TestAvroDecodeDepthArrays: arrays and maps count as levels too, and
// blocks with a byte size (negative counts) are read.
func TestAvroDecodeDepthArrays(t *testing.T) {
	const tree = `{"type":"record","name":"T","fields":[{"name":"kids","type":{"type":"array","items":"T"}},{"name":"m","type":{"type":"map","values":"T"}}]}`
	c, err := New(Options{Schema: "avro", AvroSchemaJSON: tree})
	if err != nil {
		t.Fatal(err)
	}
	// levels records, each (but the last) with one kid in a block of
	// count -1 and byte size 0 (not checked by the decoder), and no map
	// entries: record+array is two levels.
	payload := func(levels int) []byte {
		var b []byte
		for range levels - 1 {
			b = append(b, 0x01, 0x00)
		}
		for range levels {
			b = append(b, 0x00, 0x00) // end of kids (or none), no map
		}
		return b
	}
	if _, err := c.Decode(payload(MaxAvroDepth/2 + 1)); err == nil || !strings.Contains(err.Error(), "levels deep") {
		t.Errorf("%d levels of arrays: %v", MaxAvroDepth+1, err)
	}
	if _, err := c.Decode(payload(MaxAvroDepth / 2)); err != nil {
		t.Errorf("%d levels of arrays: %v", MaxAvroDepth, err)
	}
	// A map entry (key "k") holding a record one level deeper.
	deepMap := append(bytes.Repeat([]byte{0x00, 0x02, 0x02, 'k'}, 2000), bytes.Repeat([]byte{0x00}, 2+2000)...)
	if _, err := c.Decode(deepMap); err == nil || !strings.Contains(err.Error(), "levels deep") {
		t.Errorf("2000 levels of maps: %v", err)
	}
}

// nodes counts the records of a decoded list (hamba gives a union's
// record as {"Node": {...}}).
func nodes(v any) int {
	n := 0
	for {
		m, ok := v.(map[string]any)
		if !ok {
			return n
		}
		if inner, ok := m["Node"]; ok {
			v = inner
			continue
		}
		n++
		v = m["next"]
	}
}

// treeSchema is a union of two recursive records that differ only in their
// last field, so trying the wrong branch fails only after its next is
// conformed.
const treeSchema = `["null",
 {"type":"record","name":"A","fields":[
  {"name":"next","type":["null","A",
   {"type":"record","name":"B","fields":[{"name":"next","type":["null","A","B"]},{"name":"b","type":"string"}]}]},
  {"name":"a","type":"int"}]},
 "B"]`

// TestConformUnionMemoised: conforming an untagged value 60 levels deep
// tried branch A before B at each level and re-conformed everything below
// for each try, 2^60 steps. Matches are now remembered per value and branch.
func TestConformUnionMemoised(t *testing.T) {
	c, err := New(Options{Schema: "avro", AvroSchemaJSON: treeSchema})
	if err != nil {
		t.Fatal(err)
	}
	doc := `null`
	for range 60 {
		doc = `{"next":` + doc + `,"b":"x"}`
	}
	w, err := c.Wire([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	// Branch B (index 2) at each level, the null, then each level's "x".
	want := append(append(bytes.Repeat([]byte{0x04}, 60), 0x00), bytes.Repeat([]byte{0x02, 'x'}, 60)...)
	if !bytes.Equal(w, want) {
		t.Fatalf("encoded % x\nwant    % x", w, want)
	}
	// A value that matches no branch still says so.
	if _, err := c.Wire([]byte(`{"next":{"next":null,"c":1},"b":"x"}`)); err == nil || !strings.Contains(err.Error(), "matches no branch") {
		t.Fatalf("mismatch: %v", err)
	}
}
