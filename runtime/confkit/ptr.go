package confkit

// Ptr returns a pointer to v, for the optional keys of a Config built in
// code (cfg.MaxRecords = confkit.Ptr(500)) and for their defaults.
func Ptr[T any](v T) *T { return &v }
