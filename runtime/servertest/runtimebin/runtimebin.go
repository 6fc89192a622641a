// Package runtimebin builds the pico-connectors binary for tests and drivers
// that run the runtime as a subprocess: to kill it, signal it, or read every
// line it logs.
package runtimebin

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Package is the import path of the runtime's main package.
const Package = "github.com/picomq/pico-connectors/cmd/pico-connectors"

var built struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// Compile compiles Package into a temp folder the first time it is called
// in a process and returns the binary's path; later calls return the same
// binary, or the same error with the compiler's output. Call Remove once
// the binary is no longer needed.
func Compile() (string, error) {
	built.once.Do(func() {
		built.dir, built.err = os.MkdirTemp("", "pico-connectors-bin-")
		if built.err != nil {
			return
		}
		built.path = filepath.Join(built.dir, "pico-connectors")
		if out, err := exec.Command("go", "build", "-o", built.path, Package).CombinedOutput(); err != nil {
			built.err = fmt.Errorf("go build %s: %v\n%s", Package, err, out)
		}
	})
	return built.path, built.err
}

// Build is Compile for a test: a failed build fails t with the compiler's
// output. Call Remove from TestMain once the tests are done.
func Build(t testing.TB) string {
	t.Helper()
	path, err := Compile()
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// Remove deletes the binary Build compiled, if any.
func Remove() {
	if built.dir != "" {
		os.RemoveAll(built.dir)
	}
}

// Output collects what a child process writes to stdout or stderr; it is
// safe to read while the process writes.
type Output struct {
	// Limit, when above 0, bounds what Output holds, for a process that
	// writes for hours: a write that finds more than Limit bytes held drops
	// them first.
	Limit int

	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Limit > 0 && o.b.Len() > o.Limit {
		o.b.Reset()
	}
	return o.b.Write(p)
}

// String returns everything written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
