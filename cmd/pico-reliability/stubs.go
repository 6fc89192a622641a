package main

func (s *suite) badInput() { mustf("not written") }
func (s *suite) soak()     { mustf("not written") }
