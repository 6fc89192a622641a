package s3sink

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// statusError builds the error shape the SDK returns for an HTTP answer.
func statusError(code int) error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject", Err: &smithyhttp.ResponseError{
		Response: &smithyhttp.Response{Response: &http.Response{StatusCode: code}},
		Err:      fmt.Errorf("api error %d", code),
	}}
}

func transportError() error {
	return &smithy.OperationError{ServiceID: "S3", OperationName: "PutObject",
		Err: &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}
}

func TestClassify(t *testing.T) {
	ctx := context.Background()
	for code, want := range map[int]bool{500: true, 502: true, 503: true, 504: true, 599: true, 408: true, 429: true,
		400: false, 401: false, 403: false, 404: false, 409: false, 301: false, 412: false} {
		retry, status := classify(ctx, statusError(code))
		if retry != want || status != code {
			t.Errorf("%d: retry=%v status=%d", code, retry, status)
		}
	}
	for _, err := range []error{transportError(), io.ErrUnexpectedEOF, errors.New("dial tcp: connection refused")} {
		if retry, status := classify(ctx, err); !retry || status != 0 {
			t.Errorf("%v: retry=%v status=%d", err, retry, status)
		}
	}
	// An attempt's own deadline is a transport error; the caller's
	// context ending is not retried.
	attemptCtx, cancelAttempt := context.WithTimeout(ctx, 0)
	defer cancelAttempt()
	if retry, _ := classify(ctx, attemptCtx.Err()); !retry {
		t.Error("an attempt timeout is not retried")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if retry, _ := classify(cctx, transportError()); retry {
		t.Error("transport error after cancel retried")
	}
}

func TestBackoffSchedule(t *testing.T) {
	base := time.Second
	// r = 0.5 is no jitter. Before attempt n: retry_delay doubled n - 1 times.
	want := []time.Duration{0, 0, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 32 * time.Second, 60 * time.Second, 60 * time.Second}
	for attempt, w := range want {
		if got := backoff(base, attempt, 0.5); got != w {
			t.Errorf("attempt %d: %v want %v", attempt, got, w)
		}
	}
	// Jitter is ±20%.
	if got := backoff(base, 2, 0); got != 1600*time.Millisecond {
		t.Errorf("low jitter: %v", got)
	}
	if got := backoff(base, 2, 0.999999999); got < 2399*time.Millisecond || got > 2400*time.Millisecond {
		t.Errorf("high jitter: %v", got)
	}
	// The cap holds after jitter too, and huge attempt numbers do not overflow.
	if got := backoff(28*time.Second, 2, 0.99); got != 60*time.Second {
		t.Errorf("capped: %v", got)
	}
	if got := backoff(time.Second, 1000, 0.99); got != 60*time.Second {
		t.Errorf("attempt 1000: %v", got)
	}
	if got := backoff(0, 5, 0.5); got != 0 {
		t.Errorf("zero base: %v", got)
	}
}

type fakeClock struct{ slept []time.Duration }

func (c *fakeClock) sleep(ctx context.Context, d time.Duration) error {
	c.slept = append(c.slept, d)
	return ctx.Err()
}

func newTestRetrier(max int, c *fakeClock, rs ...float64) *retrier {
	i := 0
	return &retrier{maxAttempts: max, base: 100 * time.Millisecond, sleep: c.sleep, rand: func() float64 {
		r := rs[i%len(rs)]
		i++
		return r
	}}
}

func TestRetrierRetriesThenSucceeds(t *testing.T) {
	c := &fakeClock{}
	r := newTestRetrier(5, c, 0.5, 0, 1)
	errs := []error{statusError(503), statusError(429), transportError(), nil}
	calls := 0
	attempts, err := r.do(context.Background(), "s3://b/k", func(context.Context) error {
		calls++
		return errs[calls-1]
	})
	if err != nil || attempts != 4 || calls != 4 {
		t.Fatalf("attempts=%d calls=%d err=%v", attempts, calls, err)
	}
	// 200ms·1.0, 400ms·0.8, 800ms·1.2
	want := []time.Duration{200 * time.Millisecond, 320 * time.Millisecond, 960 * time.Millisecond}
	if fmt.Sprint(c.slept) != fmt.Sprint(want) {
		t.Fatalf("slept %v want %v", c.slept, want)
	}
}

func TestRetrierNonRetriable(t *testing.T) {
	c := &fakeClock{}
	r := newTestRetrier(5, c, 0.5)
	calls := 0
	attempts, err := r.do(context.Background(), "s3://b/k", func(context.Context) error {
		calls++
		return statusError(403)
	})
	if calls != 1 || attempts != 1 || len(c.slept) != 0 {
		t.Fatalf("calls=%d slept=%v", calls, c.slept)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "S3 PutObject returned non-retriable status 403") {
		t.Fatalf("err = %v", err)
	}
}

func TestRetrierExhausted(t *testing.T) {
	c := &fakeClock{}
	r := newTestRetrier(3, c, 0.5)
	calls := 0
	attempts, err := r.do(context.Background(), "s3://b/k", func(context.Context) error {
		calls++
		return statusError(500)
	})
	if calls != 3 || attempts != 3 || fmt.Sprint(c.slept) != "[200ms 400ms]" {
		t.Fatalf("calls=%d slept=%v", calls, c.slept)
	}
	if err == nil || !strings.Contains(err.Error(), "failed after 3 attempt(s)") {
		t.Fatalf("err = %v", err)
	}
}

func TestRetrierStopsOnCancel(t *testing.T) {
	c := &fakeClock{}
	r := newTestRetrier(5, c, 0.5)
	ctx, cancel := context.WithCancel(context.Background())
	calls := 0
	_, err := r.do(ctx, "s3://b/k", func(context.Context) error {
		calls++
		cancel()
		return statusError(503)
	})
	if calls != 1 || err == nil || !errors.Is(err, context.Canceled) {
		t.Fatalf("calls=%d err=%v", calls, err)
	}
}
