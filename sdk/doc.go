// Package sdk is what a pico-connectors connector is written against: the
// contract the runtime calls (Sink, Source), what it hands a connector (Env,
// Record), what a connector returns (Batch, Rejected, Permanent errors),
// and the types of its generated configuration (Secret, Problems). It is
// the one SDK package a connector imports; its tests import sdk/sdktest.
//
// # Start
//
// In a Go module of your own:
//
//	go get -tool github.com/picomq/pico-connectors/cmd/picogen
//	go tool picogen new sink webhook
//	go generate ./...
//	go test ./...
//
// picogen new writes schemas/webhook_sink.json (the plugin_config keys),
// connectors/webhook_sink (the sink and its tests), an example definition,
// and, the first time, cmd/NAME/main.go, which builds this module's
// runtime binary: the standard connectors plus your own. go generate turns
// the schema into a typed config package, generated/webhooksinkconfig,
// with Load, validation, environment overrides and secret masking, and
// into the reference page generated/docs/webhook_sink.md.
//
// # A sink
//
// A sink receives batches of records and writes them somewhere:
//
//	func init() { webhooksinkconfig.RegisterSink(New) }
//
//	func New(cfg webhooksinkconfig.Config, env sdk.Env) (sdk.Sink, error) {
//		return &Sink{cfg: cfg, log: env.Logger}, nil
//	}
//
//	func (s *Sink) Open(ctx context.Context) error { return s.ping(ctx) }
//
//	func (s *Sink) Consume(ctx context.Context, batch []sdk.Record) error {
//		return s.post(ctx, batch) // an error: the runtime delivers the batch again
//	}
//
//	func (s *Sink) Close(ctx context.Context) error { return nil }
//
// The runtime commits a batch's offsets once Consume returns nil. A sink
// that buffers, or writes in the background, also implements DeferredSink,
// so that only what is durable is committed. Records the destination will
// never take go back as a *Rejected error: with a dead_letter_topic they
// are produced there and the batch goes on.
//
// # A source
//
// A source polls another system and returns batches of messages with the
// state that resumes after them (Batch). The runtime produces the batch,
// saves the state once every message is acknowledged, and reports the
// outcome to OnBatchResult; Open receives the last saved state after a
// restart. An error that polling again cannot mend is wrapped with
// Permanent.
//
// # Optional capabilities
//
// A connector declares what it can do beyond the contract by implementing
// these interfaces; the runtime looks for each one:
//
//   - DeferredSink: a sink whose Consume returns before its records are
//     durable; the runtime commits what Durable reports.
//   - Pipelined: a source that can have several batches in flight.
//   - Health: a condition watched outside Consume or Poll (a failing
//     background upload, a replication slot near its limit), shown as the
//     connector's status.
//   - PermanentError: an error that retrying cannot mend (see Permanent).
//   - Checker: the preconditions it needs of the other system (a bucket, a
//     privilege, a server setting), tested by pico-connectors check before
//     anything runs.
//   - Snapshotter: a source that reads its collections again on demand,
//     online (POST /sources/{key}/snapshot), and reports the progress in
//     its API entry.
//
// and registers operator commands with RegisterAdmin (pico-connectors
// admin KEY COMMAND). A source may also choose a message's topic itself
// (Message.Topic), for records outside its routed stream, such as
// transaction metadata.
//
// # Registration
//
// A connector registers itself from its package's init through the
// generated config package (RegisterSink, RegisterSource,
// RegisterTransform), which fills in a Registration; a binary links it by
// importing the package. The runtime imports no connector: it finds each
// one here by the path a definition file names.
package sdk
