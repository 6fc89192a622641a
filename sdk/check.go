package sdk

import "context"

// Checker is an optional interface of a Source or a Sink: the preconditions
// it needs of the other system, tested before it runs. pico-connectors
// check --config FILE [KEY] builds the connector (its constructor, not
// Open) and calls Check, then prints every result, connector by connector;
// sdktest.TestSink and sdktest.TestSource call it too when the connector
// implements it.
//
// Check connects, tests each precondition (credentials, that a bucket or a
// table exists, a privilege, a server setting) and closes what it opened.
// It changes nothing the connector would not change on Open, and returns
// one Check per precondition, in the order they were tested, failed ones
// included: an operator reads the whole list. A precondition that cannot be
// tested because an earlier one failed (no connection) is left out.
type Checker interface {
	Check(ctx context.Context) []Check
}

// Check is the outcome of one precondition a Checker tested.
type Check struct {
	// Name names the precondition for the operator, such as
	// "bucket exists" or "REPLICATION attribute".
	Name string
	// Problem is empty when the precondition holds; otherwise it says what
	// is wrong, naming the config key involved. It must not quote a
	// secret.
	Problem string
	// Fix says what to do about Problem, such as the statement to run.
	Fix string
	// Detail is optional, what was seen when the precondition holds, such
	// as "wal_level = logical".
	Detail string
}

// OK reports whether the precondition holds.
func (c Check) OK() bool { return c.Problem == "" }

// Passed returns a Check that holds, with an optional detail.
func Passed(name, detail string) Check { return Check{Name: name, Detail: detail} }

// Failed returns a Check that does not hold: problem says what is wrong
// and fix what to do about it.
func Failed(name, problem, fix string) Check { return Check{Name: name, Problem: problem, Fix: fix} }
