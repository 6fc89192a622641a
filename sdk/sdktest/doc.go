// Package sdktest is the test kit of pico-connectors connectors: the one
// package a connector's tests import besides the connector itself and its
// generated config.
//
// It has three parts.
//
// The conformance suites check a connector against the runtime's
// contract, in the spirit of testing/fstest. TestSink runs a sink through
// batches, failures and kills; TestSource checks that a source's state
// moves only on Ack:
//
//	func TestConformance(t *testing.T) {
//		sdktest.TestSink(t, sdktest.SinkHarness{
//			New: func(t *testing.T) (sdktest.Sink, error) {
//				cfg, err := webhooksinkconfig.Load(map[string]any{"url": srv.URL}, "", nil)
//				if err != nil {
//					return nil, err
//				}
//				return webhooksink.New(cfg, sdktest.Env(t))
//			},
//			Written: func(t *testing.T) [][]byte { return srv.Bodies() }, // optional
//		})
//	}
//
// A case that needs a hook the harness does not set (Written to read back
// the destination, Break to make it fail) does not run, and the suite says
// which cases did not run and why in the test output (go test -v).
//
// The drivers (NewSinkDriver, NewSourceDriver) call a connector the way
// the runtime does, for connector-specific tests.
//
// The runners (Broker, RunSink, RunSource) run a connector inside the
// runtime's own sink and source loops against an embedded broker, with an
// in-memory state store:
//
//	b := sdktest.Broker(t, "orders")
//	sdktest.Produce(t, b, "orders", sdktest.Message{Payload: []byte(`{"id":1}`)})
//	run := sdktest.RunSink(t, b, mySink, sdktest.SinkTopics("orders"))
//	// ... wait for the destination to show the record ...
//	run.Stop() // graceful stop: the sink is closed, which flushes
//
// and for a source:
//
//	run := sdktest.RunSource(t, b, mySource, sdktest.SourceTopics("out"), nil)
//	recs := sdktest.WaitTopic(t, b, "out", 10)
//	run.Stop()
//	blob := run.Store.Get(run.Key) // the committed state
package sdktest

import "github.com/picomq/pico-connectors/sdk"

// The contract's types a test names, so that a connector's test needs no
// other SDK import.
type (
	// Sink is sdk.Sink.
	Sink = sdk.Sink
	// Source is sdk.Source.
	Source = sdk.Source
	// Record is sdk.Record, a record a sink receives.
	Record = sdk.Record
	// Message is sdk.Message, a record a source returns.
	Message = sdk.Message
	// Batch is sdk.Batch, what a source's Poll returns.
	Batch = sdk.Batch
)

// The outcomes a test reports to a source (SourceDriver.Result).
const (
	// Ack is sdk.Ack: every record was produced and the state saved.
	Ack = sdk.Ack
	// Nack is sdk.Nack: the batch failed.
	Nack = sdk.Nack
)
