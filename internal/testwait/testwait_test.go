package testwait

import (
	"errors"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a Fatalf and ends its goroutine, as testing.T does.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = format
	for _, a := range args {
		f.msg += " " + toString(a)
	}
	runtime.Goexit()
}

// failure runs wait with a fakeT on its own goroutine and returns what it
// failed with.
func failure(t *testing.T, wait func(testing.TB)) string {
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		wait(f)
	}()
	<-done
	return f.msg
}

func toString(a any) string {
	switch x := a.(type) {
	case error:
		return x.Error()
	case time.Duration:
		return x.String()
	}
	return ""
}

func TestForWaitsUntilTrue(t *testing.T) {
	var n atomic.Int32
	For(t, 10*time.Second, "three calls", func() bool { return n.Add(1) >= 3 })
	if n.Load() != 3 {
		t.Fatalf("cond called %d times, want 3", n.Load())
	}
}

func TestForNamesWhatItWaitedFor(t *testing.T) {
	msg := failure(t, func(tb testing.TB) {
		For(tb, 50*time.Millisecond, "the bucket to fill", func() bool { return false })
	})
	if !strings.Contains(msg, "waiting for the bucket to fill") {
		t.Fatalf("failure %q does not say what it waited for", msg)
	}
}

func TestEventuallyReportsTheLastError(t *testing.T) {
	msg := failure(t, func(tb testing.TB) {
		Eventually(tb, 50*time.Millisecond, func() error { return errors.New("offset 3 of 5") })
	})
	if !strings.Contains(msg, "offset 3 of 5") {
		t.Fatalf("failure %q lacks the last error", msg)
	}
}
