package main

import (
	"fmt"
	"os"
	"sync"
	"testing"
)

// harness lets the bench use the servertest packages, whose helpers take a
// testing.TB, outside a test. Fatal panics with a fatal value that the
// caller of run recovers; cleanups run at close.
type harness struct {
	testing.TB // embedded only to satisfy the interface; never called
	mu         sync.Mutex
	cleanups   []func()
	dirs       []string
}

// fatal is what Fatal and Skip panic with.
type fatal struct{ msg string }

func (h *harness) Helper() {}

func (h *harness) Name() string { return "pico-reliability" }

func (h *harness) Log(args ...any) { fmt.Fprintln(os.Stderr, args...) }

func (h *harness) Logf(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) }

func (h *harness) Error(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (h *harness) Errorf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (h *harness) Fatal(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (h *harness) Fatalf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (h *harness) FailNow() { panic(fatal{"failed"}) }

func (h *harness) Failed() bool { return false }

func (h *harness) Skip(args ...any) { panic(fatal{fmt.Sprint(args...)}) }

func (h *harness) Skipf(format string, args ...any) { panic(fatal{fmt.Sprintf(format, args...)}) }

func (h *harness) SkipNow() { panic(fatal{"skipped"}) }

func (h *harness) Skipped() bool { return false }

func (h *harness) Setenv(key, value string) { os.Setenv(key, value) }

func (h *harness) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

func (h *harness) TempDir() string {
	d, err := os.MkdirTemp("", "pico-reliability-")
	if err != nil {
		panic(fatal{err.Error()})
	}
	h.mu.Lock()
	h.dirs = append(h.dirs, d)
	h.mu.Unlock()
	return d
}

// close runs the cleanups in reverse order and removes the temp folders.
func (h *harness) close() {
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

// catch runs f and turns a harness fatal into an error.
func catch(f func()) (err error) {
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
