package fleet

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// Owner returns the runtime of rts that runs source key: its API shows
// status Running and placement.owner its own ID. Runtimes in skip, and
// those not running, are left out; nil when none does.
func Owner(rts []*Runtime, key string, skip ...*Runtime) *Runtime {
	for _, r := range rts {
		if !r.Alive() || slices.Contains(skip, r) {
			continue
		}
		if en, err := r.Entry("source", key); err == nil && en.Status == "Running" && en.Placement.Owner == r.ID {
			return r
		}
	}
	return nil
}

// AwaitOwner waits up to limit for Owner to find one, and returns an
// error with what each runtime shows when none does.
func AwaitOwner(rts []*Runtime, key string, limit time.Duration, skip ...*Runtime) (*Runtime, error) {
	deadline := time.Now().Add(limit)
	for {
		if r := Owner(rts, key, skip...); r != nil {
			return r, nil
		}
		if time.Now().After(deadline) {
			var views []string
			for _, r := range rts {
				en, err := r.Entry("source", key)
				views = append(views, fmt.Sprintf("%s alive=%v: %s owner=%q err=%v %s", r.ID, r.Alive(), en.Status, en.Placement.Owner, err, en.LastError))
			}
			return nil, fmt.Errorf("no runtime runs source %s after %s: %v", key, limit, views)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// WaitOwner is AwaitOwner for a test: an error fails t.
func WaitOwner(t testing.TB, rts []*Runtime, key string, limit time.Duration, skip ...*Runtime) *Runtime {
	t.Helper()
	r, err := AwaitOwner(rts, key, limit, skip...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
