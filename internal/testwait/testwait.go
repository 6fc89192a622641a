// Package testwait is the one wait helper of the module's tests: poll a
// condition until it holds or a timeout passes, then fail the test saying
// what was awaited. sdktest.Eventually and sdktest.WaitFor are
// these for connector authors; the runtime's own loops, which sdktest
// imports, use this package directly.
package testwait

import (
	"errors"
	"testing"
	"time"
)

// interval is how often a condition is checked.
const interval = 20 * time.Millisecond

// Eventually calls check every 20 milliseconds until it returns nil, and
// fails the test with its last error after timeout.
func Eventually(t testing.TB, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not true after %v: %v", timeout, err)
		}
		time.Sleep(interval)
	}
}

// For is Eventually for a condition that has no error of its own: it fails
// the test with "waiting for what" when cond is not true after timeout.
func For(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, func() error {
		if cond() {
			return nil
		}
		return errors.New("waiting for " + what)
	})
}
