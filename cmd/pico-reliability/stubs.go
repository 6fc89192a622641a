package main

func (s *suite) badInput()             { mustf("not written") }
func (s *suite) brokerOutage()         { mustf("not written") }
func (s *suite) pgRestart()            { mustf("not written") }
func (s *suite) httpState()            { mustf("not written") }
func (s *suite) soak()                 { mustf("not written") }
