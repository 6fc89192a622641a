package lease_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/lease"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// session is the shortest session timeout the embedded broker accepts.
const session = 6 * time.Second

func start(t *testing.T, addr, id string) *lease.Lease {
	t.Helper()
	l, err := lease.Start(context.Background(), lease.Config{Key: "src", RuntimeID: id, BootstrapServers: addr, SessionTimeout: session})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

func held(ls ...*lease.Lease) (n int, by string) {
	for _, l := range ls {
		if v := l.View(); v.Held {
			n++
			by = v.Owner
		}
	}
	return n, by
}

// TestOneOwnerThenTakeover: of two members exactly one holds the lease and
// both see it as the owner; once the holder closes, the other acquires it
// within the session timeout plus a margin.
func TestOneOwnerThenTakeover(t *testing.T) {
	b := sdktest.Broker(t)
	a := start(t, b.Addr(), "rt-a")
	if _, err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := start(t, b.Addr(), "rt-b")
	sdktest.Eventually(t, 30*time.Second, func() error {
		if v := c.View(); v.Owner != "rt-a" || len(v.Members) != 2 {
			return fmt.Errorf("rt-b sees %+v, want owner rt-a and two members", v)
		}
		return nil
	})
	// The holder keeps it while the other joins (sticky assignment).
	if n, by := held(a, c); n != 1 || by != "rt-a" {
		t.Fatalf("%d holders (%s), want rt-a alone", n, by)
	}
	lost, err := a.Wait(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	select {
	case <-lost:
	default:
		t.Fatal("Close did not close the lost channel")
	}
	closedAt := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), session+15*time.Second)
	defer cancel()
	if _, err := c.Wait(ctx); err != nil {
		t.Fatalf("rt-b did not take the lease over within session + 15s: %v", err)
	}
	t.Logf("takeover after close: %v (session timeout %v)", time.Since(closedAt).Round(100*time.Millisecond), session)
	sdktest.Eventually(t, 10*time.Second, func() error {
		if v := c.View(); v.Owner != "rt-b" || v.Changes < 2 {
			return fmt.Errorf("rt-b sees %+v, want owner rt-b after a change", v)
		}
		return nil
	})
}

// TestRestartKeepsLease: a runtime restarted under the same id gets its
// lease back without waiting out its dead self's session.
func TestRestartKeepsLease(t *testing.T) {
	b := sdktest.Broker(t)
	a := start(t, b.Addr(), "rt-a")
	if _, err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := start(t, b.Addr(), "rt-b")
	sdktest.Eventually(t, 30*time.Second, func() error {
		if v := c.View(); len(v.Members) != 2 {
			return fmt.Errorf("rt-b sees %+v, want two members", v)
		}
		return nil
	})
	a.Close()
	again := start(t, b.Addr(), "rt-a")
	ctx, cancel := context.WithTimeout(context.Background(), session/2)
	defer cancel()
	if _, err := again.Wait(ctx); err != nil {
		t.Fatalf("restarted rt-a did not get its lease back within half the session timeout: %v", err)
	}
	if n, _ := held(again, c); n != 1 {
		t.Fatalf("%d holders", n)
	}
}

// TestLeaveHandsOver: a holder that leaves (a graceful stop) hands the
// lease over at once, well within the session timeout.
func TestLeaveHandsOver(t *testing.T) {
	b := sdktest.Broker(t)
	a := start(t, b.Addr(), "rt-a")
	if _, err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	c := start(t, b.Addr(), "rt-b")
	sdktest.Eventually(t, 30*time.Second, func() error {
		if v := c.View(); len(v.Members) != 2 {
			return fmt.Errorf("rt-b sees %+v, want two members", v)
		}
		return nil
	})
	left := time.Now()
	a.Leave()
	ctx, cancel := context.WithTimeout(context.Background(), session/2)
	defer cancel()
	if _, err := c.Wait(ctx); err != nil {
		t.Fatalf("rt-b did not get the lease within half the session timeout after rt-a left: %v", err)
	}
	t.Logf("handover after a leave: %v", time.Since(left).Round(10*time.Millisecond))
}

// TestSameIDFenced: a second runtime joining with the same id fences the
// first one's lease, whose Wait then names the id instead of joining again.
func TestSameIDFenced(t *testing.T) {
	b := sdktest.Broker(t)
	a := start(t, b.Addr(), "rt-a")
	if _, err := a.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	twin := start(t, b.Addr(), "rt-a")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := twin.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	var err error
	sdktest.Eventually(t, 60*time.Second, func() error {
		wctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		if _, err = a.Wait(wctx); err == nil || errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("the first rt-a still waits or holds: %v", err)
		}
		return nil
	})
	if !strings.Contains(err.Error(), `same runtime id "rt-a"`) {
		t.Fatalf("Wait = %v", err)
	}
}
