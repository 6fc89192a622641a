package backoff_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/backoff"
)

func TestDelaySchedule(t *testing.T) {
	// r = 0.5 is no jitter: base doubled tries-1 times, capped at max.
	want := []time.Duration{time.Second, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	for tries, w := range want {
		if got := backoff.Delay(time.Second, 10*time.Second, tries, 0.5); got != w {
			t.Errorf("tries %d: %v, want %v", tries, got, w)
		}
	}
}

func TestDelayJitterAndCap(t *testing.T) {
	if got := backoff.Delay(time.Second, time.Minute, 2, 0); got != 1600*time.Millisecond {
		t.Errorf("low jitter: %v, want 1.6s", got)
	}
	if got := backoff.Delay(time.Second, time.Minute, 2, 0.999999999); got < 2399*time.Millisecond || got >= 2400*time.Millisecond {
		t.Errorf("high jitter: %v, want just under 2.4s", got)
	}
	// The cap holds after the jitter too.
	if got := backoff.Delay(28*time.Second, time.Minute, 2, 0.99); got != time.Minute {
		t.Errorf("capped after jitter: %v, want 1m", got)
	}
	// Huge tries do not overflow, with or without a cap.
	if got := backoff.Delay(time.Second, time.Minute, 1000, 0.99); got != time.Minute {
		t.Errorf("tries 1000: %v, want 1m", got)
	}
	if got := backoff.Delay(time.Second, 0, 1000, 0.5); got <= 0 {
		t.Errorf("tries 1000 without a cap: %v overflowed", got)
	}
	if got := backoff.Delay(0, time.Minute, 5, 0.5); got != 0 {
		t.Errorf("zero base: %v, want 0", got)
	}
}

func TestExponentialStaysInBand(t *testing.T) {
	wait := backoff.Exponential(100*time.Millisecond, 3*time.Second)
	for tries := 1; tries <= 8; tries++ {
		nominal := backoff.Delay(100*time.Millisecond, 3*time.Second, tries, 0.5)
		lo, hi := time.Duration(float64(nominal)*0.8), min(time.Duration(float64(nominal)*1.2), 3*time.Second)
		seen := map[time.Duration]bool{}
		for range 50 {
			d := wait(tries)
			if d < lo || d > hi {
				t.Fatalf("tries %d: %v outside [%v, %v]", tries, d, lo, hi)
			}
			seen[d] = true
		}
		if len(seen) < 2 {
			t.Errorf("tries %d: 50 waits all %v: no jitter", tries, nominal)
		}
	}
}

func TestSleepEndsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep with a cancelled context: %v, want context.Canceled", err)
	}
	if err := backoff.Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(0) with a cancelled context: %v, want context.Canceled", err)
	}
	if err := backoff.Sleep(context.Background(), time.Millisecond); err != nil {
		t.Fatalf("Sleep(1ms): %v", err)
	}
}

// Retry an operation that fails twice, waiting between tries.
func ExampleExponential() {
	wait := backoff.Exponential(time.Millisecond, 10*time.Millisecond)
	calls := 0
	op := func() error {
		calls++
		if calls < 3 {
			return errors.New("not yet")
		}
		return nil
	}
	for tries := 1; ; tries++ {
		if err := op(); err == nil {
			break
		}
		if err := backoff.Sleep(context.Background(), wait(tries)); err != nil {
			fmt.Println(err)
			return
		}
	}
	fmt.Println("succeeded after", calls, "calls")
	// Output: succeeded after 3 calls
}
