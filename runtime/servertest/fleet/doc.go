// Package fleet runs a fleet of pico-connectors processes for the tests,
// the reliability scenario and the bench: the real binary (built by
// runtimebin), a broker in its own process (a runtime with a persistent
// embedded broker and no connectors, which outlives every runtime the
// caller kills), an S3 sink definition, a producer that counts what the
// broker acknowledged, and an audit of the bucket.
//
// Every helper returns its errors, for programs (pico-reliability,
// pico-bench); the forms that take a testing.TB (New, StartBroker,
// Runtime.Start, StartProducer, WaitCommitted, WaitOwner, AuditS3,
// ReadCommitted, CountField, Checkpoints) call them and fail the test on
// an error.
package fleet
