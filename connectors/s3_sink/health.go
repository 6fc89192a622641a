package s3sink

import "errors"

// Health reports, in exactly_once, that files are kept in memory after
// failed uploads (sdk.Health): the status shows Error with the S3 error
// even while no record arrives, and Running again once an upload succeeds.
// With table_format = "iceberg" it also reports commits to the table that
// keep failing, with the catalog's error, until one succeeds.
func (s *Sink) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return errors.Join(s.refuse(), s.iceHealth())
}
