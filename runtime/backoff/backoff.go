// Package backoff is the one jittered exponential back-off of the runtime
// and the connectors: the wait before a retry grows from a base delay,
// doubling after each failure in a row, up to a cap, with ±20 percent
// jitter so that many retriers do not retry in step.
//
// The shape is franz-go's RetryBackoffFn, func(tries int) time.Duration:
//
//	wait := backoff.Exponential(200*time.Millisecond, 30*time.Second)
//	for tries := 1; ; tries++ {
//		if err := op(); err == nil {
//			return nil
//		}
//		if err := backoff.Sleep(ctx, wait(tries)); err != nil {
//			return err
//		}
//	}
package backoff

import (
	"context"
	"math/rand/v2"
	"time"
)

// Exponential returns the wait after tries failures in a row (tries >= 1):
// base doubled tries-1 times, at most max, times a random factor in
// [0.8, 1.2), and never more than max. A base of zero or less waits zero;
// a max of zero or less means no cap.
func Exponential(base, max time.Duration) func(tries int) time.Duration {
	return func(tries int) time.Duration {
		return Delay(base, max, tries, rand.Float64())
	}
}

// Delay is Exponential's wait with the random number given: r in [0, 1)
// picks the jitter factor 0.8 + 0.4*r, so r = 0.5 is the wait without
// jitter. It is for callers that inject their randomness, such as tests.
func Delay(base, max time.Duration, tries int, r float64) time.Duration {
	if base <= 0 {
		return 0
	}
	limit := max
	if limit <= 0 {
		limit = time.Duration(1<<63 - 1)
	}
	d := base
	for i := 1; i < tries && d < limit; i++ {
		if d > limit/2 {
			d = limit
			break
		}
		d *= 2
	}
	if d > limit {
		d = limit
	}
	j := float64(d) * (0.8 + 0.4*r)
	if j >= float64(limit) {
		return limit
	}
	return time.Duration(j)
}

// Sleep waits for d, or until ctx is done, when it returns ctx.Err(). A d
// of zero or less does not wait, but still reports a done ctx.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
