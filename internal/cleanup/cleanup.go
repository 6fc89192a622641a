// Package cleanup keeps what a program must undo on its way out, as
// testing.T.Cleanup does for a test: the drivers that run outside go test
// (pico-bench, pico-reliability) register each server and process they
// start, and run them all when they end.
package cleanup

import "sync"

// Stack holds functions to run, the last added first. The zero value is
// empty and ready; it is safe for concurrent use.
type Stack struct {
	mu  sync.Mutex
	fns []func()
}

// Add registers f to run before the functions added earlier.
func (s *Stack) Add(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fns = append(s.fns, f)
}

// Run runs the functions added so far, the last added first, and forgets
// them.
func (s *Stack) Run() {
	s.mu.Lock()
	fns := s.fns
	s.fns = nil
	s.mu.Unlock()
	for i := len(fns) - 1; i >= 0; i-- {
		fns[i]()
	}
}
