// Package connectors links the connectors and transforms that ship with
// pico-connectors into a binary: the S3 sink, the Postgres source, the
// random source and the record transforms. Import it for its side effect:
//
//	import _ "github.com/picomq/pico-connectors/connectors"
//
// To link only some of them, import their packages instead, such as
// connectors/s3_sink or runtime/transform; each registers itself from its
// init.
package connectors

// The generated registry lists every connector folder below this one.
import _ "github.com/picomq/pico-connectors/generated/registry"
