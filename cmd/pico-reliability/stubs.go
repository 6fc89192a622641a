package main

func (s *suite) soak()     { mustf("not written") }
