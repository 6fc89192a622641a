package s3sink

import (
	"context"
	"errors"
	"fmt"
	"time"

	smithyhttp "github.com/aws/smithy-go/transport/http"

	rtbackoff "github.com/picomq/pico-connectors/runtime/backoff"
)

// backoff returns the delay before attempt n, as the spec words it:
// retry_delay doubled n - 1 times (twice retry_delay before the second
// attempt, four times before the third, ...), with ±20% jitter from r in
// [0, 1), capped at 60 seconds. The first attempt is not delayed.
func backoff(base time.Duration, attempt int, r float64) time.Duration {
	if attempt < 2 {
		return 0
	}
	return rtbackoff.Delay(base, maxRetryDelay, attempt, r)
}

// attemptTimeout bounds one PutObject of size bytes, so a server that
// stops answering costs an attempt rather than the sink: a minute plus a
// second per MiB.
func attemptTimeout(size int64) time.Duration {
	return time.Minute + time.Duration(size>>20)*time.Second
}

// classify says whether a failed request is worth another attempt, and
// the HTTP status when the server answered. Transport errors (no answer),
// 5xx, 408 and 429 are retried; any other status is not. A cancelled or
// expired context is never retried.
func classify(ctx context.Context, err error) (retry bool, status int) {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() != 0 {
		status = re.HTTPStatusCode()
		return retriableStatus(status), status
	}
	// Only the caller's context stops the retries: an attempt that ran
	// out of its own time is a transport error like any other.
	if ctx.Err() != nil {
		return false, 0
	}
	return true, 0
}

func retriableStatus(status int) bool {
	return status >= 500 || status == 408 || status == 429
}

// nonRetriableError is an upload refused with a status that is not retried.
type nonRetriableError struct {
	status int
	target string
	err    error
}

func (e *nonRetriableError) Error() string {
	return fmt.Sprintf("S3 PutObject returned non-retriable status %d for %s: %v", e.status, e.target, e.err)
}

func (e *nonRetriableError) Unwrap() error { return e.err }

// sleepCtx waits for d or until ctx is done.
var sleepCtx = rtbackoff.Sleep

// retrier runs one operation under the spec's policy. now, sleep and rand
// are injected so tests run without waiting.
type retrier struct {
	maxAttempts int
	base        time.Duration
	sleep       func(ctx context.Context, d time.Duration) error
	rand        func() float64
	// onRetry is told about each failed attempt that will be retried.
	onRetry func(attempt int, delay time.Duration, err error)
}

// do calls op until it succeeds, fails with a status that is not retried,
// or has been attempted maxAttempts times. It returns the attempts made.
func (r *retrier) do(ctx context.Context, target string, op func(ctx context.Context) error) (int, error) {
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil {
			return attempt, nil
		}
		retry, status := classify(ctx, err)
		if !retry {
			if status != 0 {
				return attempt, &nonRetriableError{status: status, target: target, err: err}
			}
			return attempt, fmt.Errorf("S3 PutObject of %s stopped: %w", target, err)
		}
		if attempt >= r.maxAttempts {
			return attempt, fmt.Errorf("S3 PutObject of %s failed after %d attempt(s): %w", target, attempt, err)
		}
		d := backoff(r.base, attempt+1, r.rand())
		if r.onRetry != nil {
			r.onRetry(attempt, d, err)
		}
		if err := r.sleep(ctx, d); err != nil {
			return attempt, fmt.Errorf("S3 PutObject of %s stopped while waiting to retry: %w", target, err)
		}
	}
}
