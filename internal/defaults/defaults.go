// Package defaults holds the one rule by which the runtime's loops and
// stores fill the settings a caller left out: a count, size or duration
// that is zero or negative takes its default. (A setting whose zero value
// is "unset", such as a nil logger or an empty name, takes cmp.Or.)
package defaults

// Positive returns v, or def when v is zero or negative.
func Positive[T ~int | ~int32 | ~int64 | ~float64](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}
