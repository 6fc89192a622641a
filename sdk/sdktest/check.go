package sdktest

import (
	"context"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
)

// runChecks is the Checks case of both suites: a connector that
// implements sdk.Checker reports, against the harness's healthy system,
// at least one check, each named, and none failed; a failed one would
// need a problem and a fix. pico-connectors check prints the same list.
func runChecks(t *testing.T, n *notRun, conn any, timeout time.Duration) {
	t.Helper()
	c, ok := conn.(sdk.Checker)
	if !ok {
		n.skip(t, "the connector does not implement sdk.Checker, so pico-connectors check reports nothing of it; implement Check to test its preconditions")
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	checks := c.Check(ctx)
	if len(checks) == 0 {
		t.Fatal("Check returned no checks; return one sdk.Check per precondition")
	}
	for i, ch := range checks {
		switch {
		case ch.Name == "":
			t.Errorf("check %d has no Name", i)
		case !ch.OK() && ch.Fix == "":
			t.Errorf("check %q failed with %q and no Fix", ch.Name, ch.Problem)
		case !ch.OK():
			t.Errorf("check %q failed against the test's system: %s (fix: %s)", ch.Name, ch.Problem, ch.Fix)
		default:
			t.Logf("check %q: OK %s", ch.Name, ch.Detail)
		}
	}
}

func (s suite) checks(t *testing.T) {
	// A first instance says whether the source is a Checker; the checked
	// one is built after setup, as in every other case.
	if src, err := s.factory(t); err == nil {
		if _, ok := src.(sdk.Checker); !ok {
			runChecks(t, s.notRun, src, s.o.pollTimeout) // skips
		}
	}
	s.begin(t)
	src, err := s.factory(t)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	runChecks(t, s.notRun, src, s.o.pollTimeout)
}
