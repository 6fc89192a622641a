package s3sink

// Health reports, in exactly_once, that files are kept in memory after
// failed uploads (sdk.Health): the status shows Error with the S3 error
// even while no record arrives, and Running again once an upload succeeds.
func (s *Sink) Health() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.refuse()
}
