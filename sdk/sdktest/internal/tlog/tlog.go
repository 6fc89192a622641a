// Package tlog is an io.Writer that logs through testing.TB, shared by the
// connector test kits.
package tlog

import (
	"bytes"
	"sync/atomic"
	"testing"
)

// Writer logs each write through t.Log until the test ends, and drops
// writes after that (a connector's goroutine may log late).
type Writer struct {
	t    testing.TB
	done atomic.Bool
}

// New returns a Writer for t.
func New(t testing.TB) *Writer {
	w := &Writer{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return w
}

// Write logs p, without its trailing newline.
func (w *Writer) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}
