package sdktest

import (
	"strings"
	"sync"
	"testing"
)

// notRun collects the conformance cases a suite could not run, and why, so
// that the suite ends with one line that names them all: a case the kit
// cannot run is never passed over in silence.
type notRun struct {
	mu    sync.Mutex
	cases []string
}

// skip records why t's case cannot run, and skips it.
func (n *notRun) skip(t *testing.T, why string) {
	t.Helper()
	name := t.Name()
	if i := strings.LastIndexByte(name, '/'); i >= 0 {
		name = name[i+1:]
	}
	n.mu.Lock()
	n.cases = append(n.cases, name+": "+why)
	n.mu.Unlock()
	t.Skip(why)
}

// report logs, on the suite's own test, how many of total cases ran and
// the reason each other one did not.
func (n *notRun) report(t *testing.T, total int) {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	if len(n.cases) == 0 {
		t.Logf("sdktest: all %d conformance cases ran", total)
		return
	}
	t.Logf("sdktest: %d of %d conformance cases ran; not run:\n  - %s", total-len(n.cases), total, strings.Join(n.cases, "\n  - "))
}

func (h SinkHarness) needWritten(t *testing.T) {
	t.Helper()
	if h.Written == nil {
		h.notRun.skip(t, "SinkHarness.Written is not set: set it to read back what the sink wrote, so the kit can check that every record arrives")
	}
}

func (h SinkHarness) needBreak(t *testing.T) {
	t.Helper()
	if h.Break == nil {
		h.notRun.skip(t, "SinkHarness.Break is not set: set it to make the destination fail (a fault proxy in front of it), so the kit can check the failure path")
	}
}

func (h SinkHarness) needLong(t *testing.T) {
	t.Helper()
	if testing.Short() {
		h.notRun.skip(t, "runs the runtime's sink loop (librdkafka) against the embedded broker; skipped with -short")
	}
}
