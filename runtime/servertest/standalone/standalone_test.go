package standalone

import (
	"os"
	"strings"
	"testing"
)

func TestCatchAndClose(t *testing.T) {
	h := New("standalone-test")
	dir := h.TempDir()
	var order []int
	h.Cleanup(func() { order = append(order, 1) })
	h.Cleanup(func() { order = append(order, 2) })

	err := Catch(func() { h.Fatalf("server %s did not start", "x") })
	if err == nil || err.Error() != "server x did not start" {
		t.Fatalf("Catch(Fatalf) = %v", err)
	}
	if err := Catch(func() { Fail("boom") }); err == nil || err.Error() != "boom" {
		t.Fatalf("Catch(Fail) = %v", err)
	}
	if err := Catch(func() {}); err != nil {
		t.Fatalf("Catch of a function that returns = %v", err)
	}
	func() {
		defer func() {
			if r := recover(); r == nil || !strings.Contains(r.(string), "other") {
				t.Fatalf("a foreign panic was swallowed: %v", r)
			}
		}()
		_ = Catch(func() { panic("other") })
	}()

	h.Close()
	if len(order) != 2 || order[0] != 2 || order[1] != 1 {
		t.Fatalf("cleanups ran in order %v, want [2 1]", order)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("temp folder %s left behind (%v)", dir, err)
	}
	if !strings.HasPrefix(h.Name(), "standalone-test") {
		t.Fatalf("Name = %q", h.Name())
	}
}
