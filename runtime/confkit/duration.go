package confkit

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"
)

// Errors ParseDuration wraps for a duration out of range.
var (
	ErrDurationTooLarge = errors.New("too large, the limit is about 292 years")
	ErrDurationNegative = errors.New("must not be negative")
)

// durationSyntax is time.ParseDuration's grammar.
var durationSyntax = regexp.MustCompile(`^[-+]?(([0-9]+(\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+$`)

// ParseDuration parses a non-negative duration in Go syntax: 100ms, 1s,
// 1m30s, 2h. A bare 0 is accepted.
func ParseDuration(s string) (time.Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("empty duration: use a number with a unit such as 100ms, 1s or 1m30s")
	}
	d, err := time.ParseDuration(t)
	if err != nil {
		if strings.Contains(err.Error(), "missing unit") {
			return 0, fmt.Errorf("invalid duration %q: missing unit, use ns, us, ms, s, m or h such as 100ms or 1s", s)
		}
		if strings.Contains(err.Error(), "overflow") || durationSyntax.MatchString(t) {
			// Well formed, so refused for its size.
			return 0, fmt.Errorf("invalid duration %q: %w", s, ErrDurationTooLarge)
		}
		return 0, fmt.Errorf("invalid duration %q: use a number with a unit such as 100ms, 1s or 1m30s", s)
	}
	if d < 0 {
		return 0, fmt.Errorf("invalid duration %q: %w", s, ErrDurationNegative)
	}
	return d, nil
}
