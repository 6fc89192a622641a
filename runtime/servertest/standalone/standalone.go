// Package standalone lets a program outside go test, such as pico-bench
// and pico-reliability, use the servertest helpers, which take a
// testing.TB: a failure becomes an error from Catch instead of a failed test.
package standalone

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// TB is a testing.TB for programs. Fatal, Error and Skip panic with a
// value that Catch recovers; cleanups and temp folders go at Close.
type TB struct {
	testing.TB // embedded only to satisfy the interface; never called
	mu         sync.Mutex
	cleanups   []func()
	dirs       []string
	name       string
}

// fatal is what Fatal and Skip panic with.
type fatal struct{ msg string }

func (h *TB) Helper() {}

// New returns a TB whose Name and temp folders carry name.
func New(name string) *TB { return &TB{name: name} }

// Name returns the name given to New.
func (h *TB) Name() string { return h.name }

func (h *TB) Log(args ...any) { fmt.Fprintln(os.Stderr, args...) }

func (h *TB) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func (h *TB) Error(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (h *TB) Errorf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (h *TB) Fatal(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (h *TB) Fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (h *TB) FailNow() { panic(fatal{"failed"}) }

func (h *TB) Failed() bool { return false }

func (h *TB) Skip(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (h *TB) Skipf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (h *TB) SkipNow() { panic(fatal{"skipped"}) }

func (h *TB) Skipped() bool { return false }

func (h *TB) Setenv(key, value string) { os.Setenv(key, value) }

func (h *TB) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

func (h *TB) TempDir() string {
	d, err := os.MkdirTemp("", h.name+"-")
	if err != nil {
		panic(fatal{err.Error()})
	}
	h.mu.Lock()
	h.dirs = append(h.dirs, d)
	h.mu.Unlock()
	return d
}

// Close runs the cleanups in reverse order and removes the temp folders.
func (h *TB) Close() {
	h.mu.Lock()
	cs, ds := h.cleanups, h.dirs
	h.cleanups, h.dirs = nil, nil
	h.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	for _, d := range ds {
		os.RemoveAll(d)
	}
}

// Fail stops the function run by Catch with msg as its error.
func Fail(msg string) { panic(fatal{msg}) }

// Catch runs f and turns a failure of a TB (or Fail) inside it into an
// error; any other panic goes on.
func Catch(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			if fe, ok := r.(fatal); ok {
				err = fmt.Errorf("%s", fe.msg)
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}
