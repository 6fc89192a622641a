// Package state stores the opaque checkpoint blob of each source.
package state

import "context"

// Store loads and saves one blob per source key. The runtime never looks
// inside a blob.
type Store interface {
	// Load returns the last saved blob, or nil and no error when the
	// source has none yet.
	Load(ctx context.Context, key string) ([]byte, error)
	// Save replaces the blob. After Save returns nil the blob survives a
	// crash; a crash during Save leaves the previous blob in place.
	Save(ctx context.Context, key string, blob []byte) error
}
