package sdktest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
)

// SourceFactory builds a new source instance, not yet opened: TestSource calls its Open
// with the committed state blob (nil for a source that has never been
// acknowledged). The factory may use t.Cleanup for resources; TestSource closes
// every source it builds.
type SourceFactory func(t *testing.T) (sdk.Source, error)

// SourceOption changes how TestSource drives the source.
type SourceOption func(*options)

type options struct {
	setup       func(t *testing.T)
	pollTimeout time.Duration
	idleTimeout time.Duration
	equal       func(a, b sdk.Message) bool
	drainLimit  int
}

// WithSetup runs setup at the start of every subtest, before the factory is
// first called. Use it to give each subtest fresh data in the external
// system (a new table, replication slot or bucket).
func WithSetup(setup func(t *testing.T)) SourceOption {
	return func(o *options) { o.setup = setup }
}

// WithPollTimeout bounds how long TestSource keeps polling for a non-empty batch
// before it fails the test. The default is 30 seconds.
func WithPollTimeout(d time.Duration) SourceOption {
	return func(o *options) { o.pollTimeout = d }
}

// WithIdleTimeout sets the context deadline of the polls that look for an
// empty batch (EmptyBatchNoState). The default is 300 milliseconds.
func WithIdleTimeout(d time.Duration) SourceOption {
	return func(o *options) { o.idleTimeout = d }
}

// WithEqual replaces how two messages are compared. The default compares
// Key, Payload and Headers, and ignores Timestamp (a source may stamp
// records with the time of the read).
func WithEqual(equal func(a, b sdk.Message) bool) SourceOption {
	return func(o *options) { o.equal = equal }
}

// WithDrainLimit sets how many batches EmptyBatchNoState acknowledges while
// waiting for the source to run dry. A source that never runs dry (a
// generator) is checked on the batches it returns. The default is 20.
func WithDrainLimit(n int) SourceOption {
	return func(o *options) { o.drainLimit = n }
}

// TestSource checks that the sources factory builds keep the
// stage-and-apply contract of the sources spec, in the spirit of
// testing/fstest.
//
// A connector's test calls TestSource once with a SourceFactory that builds the source;
// it opens each instance with a committed state blob, as the runtime does:
//
//	func TestConformance(t *testing.T) {
//		sdktest.TestSource(t, func(t *testing.T) (sdk.Source, error) {
//			cfg, err := mysourceconfig.Load(map[string]any{"interval": "10ms"}, "", nil)
//			if err != nil {
//				return nil, err
//			}
//			return mysource.New(cfg, sdktest.Env(t))
//		})
//	}
//
// It checks, each in its own subtest:
//
//   - NackRepeats: after Nack, the next Poll returns the same records again.
//   - AckMovesOn: after Ack, the next Poll returns new records.
//   - ResumeFromCommitted: a new instance opened with the state of the last
//     acknowledged batch continues exactly after it, even when the old
//     instance polled a further batch that was never acknowledged.
//   - EmptyBatchNoState: a batch without records carries no state, including
//     right after a Nack, and Poll returns when its context ends.
//   - PollAhead, for a source that implements sdk.Pipelined (a
//     PollAhead() int method above 1): a Poll before the previous batch is
//     resolved continues after its candidate, Ack promotes the oldest
//     outstanding candidate, Nack drops them all so the next Poll repeats
//     the first unacknowledged batch, and a new instance opened with the
//     last acknowledged state continues after it.
//   - Checks, for a source that implements sdk.Checker: Check, on a
//     source the factory built and never opened, reports at least one
//     named check and no problem.
//
// Every batch the suite sees is also checked: an empty batch carries no
// state. Sources that need data in their external system (a table, a
// bucket) prepare it in a Setup option, which runs at the start of each
// subtest.
func TestSource(t *testing.T, factory SourceFactory, opts ...SourceOption) {
	t.Helper()
	o := options{pollTimeout: 30 * time.Second, idleTimeout: 300 * time.Millisecond, equal: MessagesEqual, drainLimit: 20}
	for _, opt := range opts {
		opt(&o)
	}
	s := suite{factory: factory, o: o, ahead: new(bool), notRun: &notRun{}}
	t.Run("NackRepeats", s.nackRepeats)
	t.Run("AckMovesOn", s.ackMovesOn)
	t.Run("ResumeFromCommitted", s.resume)
	t.Run("EmptyBatchNoState", s.emptyBatch)
	t.Run("PollAhead", s.pollAhead)
	t.Run("Checks", s.checks)
	s.notRun.report(t, 6)
}

func (s suite) pollAhead(t *testing.T) {
	if !*s.ahead {
		s.notRun.skip(t, "the source resolves one batch at a time (it is not a sdk.Pipelined with PollAhead above 1)")
	}
	s.begin(t)
	d := s.open(t, nil)
	// Batches in flight are polled directly: the SourceDriver allows one.
	poll := func(what string) sdk.Batch {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), s.o.pollTimeout)
		defer cancel()
		for ctx.Err() == nil {
			b, err := d.Source.Poll(ctx)
			if err == nil && len(b.Messages) > 0 {
				return b
			}
			if err == nil {
				t.Fatalf("%s: an empty batch with batches in flight; PollAhead sources are expected to have more (a generator or prepared data)", what)
			}
		}
		t.Fatalf("%s: no batch with records within %v", what, s.o.pollTimeout)
		return sdk.Batch{}
	}
	result := func(r sdk.Result) {
		t.Helper()
		if err := d.Source.OnBatchResult(context.Background(), r); err != nil {
			t.Fatalf("OnBatchResult(%s): %v", r, err)
		}
	}
	a := poll("first poll")
	b := poll("a poll with the first batch in flight")
	if s.isPrefix(a.Messages, b.Messages) || s.isPrefix(b.Messages, a.Messages) {
		t.Fatalf("a Poll with a batch in flight repeated it instead of continuing after its candidate:\nfirst: %s\nnext:  %s", Describe(a.Messages), Describe(b.Messages))
	}
	result(sdk.Ack) // a
	c := poll("a poll after the first Ack, the second batch in flight")
	if s.isPrefix(b.Messages, c.Messages) || s.isPrefix(c.Messages, b.Messages) {
		t.Fatalf("after an Ack of the oldest batch, Poll repeated the batch still in flight:\nin flight: %s\nnext:      %s", Describe(b.Messages), Describe(c.Messages))
	}
	result(sdk.Nack) // drops b and c
	again := poll("a poll after the Nack")
	if !s.isPrefix(b.Messages, again.Messages) {
		t.Fatalf("after a Nack, Poll did not repeat the first unacknowledged batch:\nunacknowledged: %s\nafter the Nack: %s", Describe(b.Messages), Describe(again.Messages))
	}
	result(sdk.Ack)
	d.Close()
	d2 := s.open(t, again.State)
	resumed := poll("a new instance from the last acknowledged state")
	if s.isPrefix(again.Messages, resumed.Messages) || s.isPrefix(a.Messages, resumed.Messages) {
		t.Fatalf("a new instance opened with the state %q repeats acknowledged records: %s", again.State, Describe(resumed.Messages))
	}
	_ = d2
}

type suite struct {
	factory SourceFactory
	o       options
	// ahead is set when a source the suite built has PollAhead above 1.
	ahead  *bool
	notRun *notRun
}

func (s suite) begin(t *testing.T) {
	t.Helper()
	if s.o.setup != nil {
		s.o.setup(t)
	}
}

// open builds a source, opens it with state and arranges for it to be
// closed at the end of the test unless the test closes it first.
// firstBatch begins a subtest, opens the source without state and polls
// its first batch with records, which it resolves with r.
func (s suite) firstBatch(t *testing.T, r sdk.Result) (*SourceDriver, sdk.Batch) {
	s.begin(t)
	d := s.open(t, nil)
	first := d.PollNonEmpty()
	d.Result(r)
	return d, first
}

func (s suite) open(t *testing.T, state []byte) *SourceDriver {
	t.Helper()
	src, err := s.factory(t)
	if err != nil {
		t.Fatalf("factory: %v", err)
	}
	if src == nil {
		t.Fatalf("factory returned a nil source and no error")
	}
	d := NewSourceDriver(t, src, state)
	d.PollTimeout = s.o.pollTimeout
	if p, ok := src.(sdk.Pipelined); ok && p.PollAhead() > 1 {
		*s.ahead = true
	}
	return d
}

func (s suite) nackRepeats(t *testing.T) {
	d, first := s.firstBatch(t, sdk.Nack)
	again := d.PollNonEmpty()
	if !s.isPrefix(first.Messages, again.Messages) {
		t.Fatalf("after Nack, Poll returned other records:\nfirst poll: %s\nafter Nack: %s",
			Describe(first.Messages), Describe(again.Messages))
	}
	if len(again.Messages) == len(first.Messages) && !bytes.Equal(first.State, again.State) {
		t.Errorf("after Nack, the same records came with another candidate state: %q, then %q", first.State, again.State)
	}
	// A second Nack in a row must repeat them once more.
	d.Result(sdk.Nack)
	third := d.PollNonEmpty()
	if !s.isPrefix(first.Messages, third.Messages) {
		t.Fatalf("after a second Nack, Poll returned other records:\nfirst poll: %s\nthird poll: %s",
			Describe(first.Messages), Describe(third.Messages))
	}
	d.Result(sdk.Ack)
}

func (s suite) ackMovesOn(t *testing.T) {
	d, first := s.firstBatch(t, sdk.Ack)
	next := d.PollNonEmpty()
	if s.isPrefix(first.Messages, next.Messages) || s.isPrefix(next.Messages, first.Messages) {
		t.Fatalf("after Ack, Poll returned the acknowledged records again:\nfirst poll: %s\nafter Ack:  %s",
			Describe(first.Messages), Describe(next.Messages))
	}
	if first.State != nil && bytes.Equal(first.State, next.State) {
		t.Errorf("after Ack, the next batch carries the same candidate state %q: the cursor did not move", next.State)
	}
	d.Result(sdk.Ack)
}

func (s suite) resume(t *testing.T) {
	d, first := s.firstBatch(t, sdk.Ack)
	committed := first.State
	// The batch the old instance would deliver next, polled but never
	// resolved: a crash between read and acknowledgement.
	pending := d.PollNonEmpty()
	d.Close()

	d2 := s.open(t, committed)
	resumed := d2.PollNonEmpty()
	n := min(len(pending.Messages), len(resumed.Messages))
	if !s.isPrefix(pending.Messages[:n], resumed.Messages) {
		t.Fatalf("a new instance opened with the committed state %q does not continue after the acknowledged batch:\n"+
			"acknowledged:            %s\nnext (never acknowledged): %s\nnew instance returned:     %s",
			committed, Describe(first.Messages), Describe(pending.Messages), Describe(resumed.Messages))
	}
	d2.Result(sdk.Ack)
}

func (s suite) emptyBatch(t *testing.T) {
	s.begin(t)
	d := s.open(t, nil)
	// Run the source dry, acknowledging as the runtime would.
	sawEmpty := false
	for i := 0; i < s.o.drainLimit; i++ {
		b, err := d.PollWithin(s.o.idleTimeout)
		if err != nil {
			break
		}
		d.Result(sdk.Ack)
		if len(b.Messages) == 0 {
			sawEmpty = true
			break
		}
	}
	if !sawEmpty {
		t.Logf("the source did not run dry within %d batches; checked the batches it returned", s.o.drainLimit)
		return
	}
	// After a Nack of an empty batch, the next empty batch still carries
	// no state.
	b, err := d.PollWithin(s.o.idleTimeout)
	if err == nil {
		d.Result(sdk.Nack)
		if len(b.Messages) == 0 {
			if _, err := d.PollWithin(s.o.idleTimeout); err == nil {
				d.Result(sdk.Ack)
			}
		}
	}
}

func (s suite) isPrefix(prefix, msgs []sdk.Message) bool {
	if len(prefix) > len(msgs) {
		return false
	}
	for i := range prefix {
		if !s.o.equal(prefix[i], msgs[i]) {
			return false
		}
	}
	return true
}

// MessagesEqual reports whether two messages have the same Key, Payload and
// Headers. It ignores Timestamp.
func MessagesEqual(a, b sdk.Message) bool {
	if !bytes.Equal(a.Key, b.Key) || !bytes.Equal(a.Payload, b.Payload) || len(a.Headers) != len(b.Headers) {
		return false
	}
	for i := range a.Headers {
		if a.Headers[i].Key != b.Headers[i].Key || !bytes.Equal(a.Headers[i].Value, b.Headers[i].Value) {
			return false
		}
	}
	return true
}

// Describe prints messages for a failure message: their count and the
// first and last payloads, shortened.
func Describe(msgs []sdk.Message) string {
	switch len(msgs) {
	case 0:
		return "no records"
	case 1:
		return fmt.Sprintf("1 record %s", short(msgs[0].Payload))
	}
	return fmt.Sprintf("%d records %s … %s", len(msgs), short(msgs[0].Payload), short(msgs[len(msgs)-1].Payload))
}

func short(b []byte) string {
	const max = 60
	if len(b) > max {
		return fmt.Sprintf("%q…", b[:max])
	}
	return fmt.Sprintf("%q", b)
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}

// SourceDriver drives one source the way the runtime's poll loop does, failing
// the test on a contract violation: it alternates Poll and OnBatchResult
// and checks that every empty batch carries no state. Use it directly for
// connector-specific tests.
type SourceDriver struct {
	T      testing.TB
	Source sdk.Source
	// PollTimeout bounds PollNonEmpty; zero means 30 seconds.
	PollTimeout time.Duration

	pending bool
	closed  bool
}

// NewSourceDriver opens src with state, as the runtime does before the first
// Poll, and returns a SourceDriver that closes it when the test ends. An Open
// error fails the test; call Open directly to test one.
func NewSourceDriver(t testing.TB, src sdk.Source, state []byte) *SourceDriver {
	t.Helper()
	d := &SourceDriver{T: t, Source: src}
	t.Cleanup(func() { d.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := src.Open(ctx, cloneBytes(state)); err != nil {
		t.Fatalf("Open(state=%q): %v", state, err)
	}
	return d
}

// Poll calls Poll once with ctx and checks the batch.
func (d *SourceDriver) Poll(ctx context.Context) (sdk.Batch, error) {
	d.T.Helper()
	d.beforePoll()
	b, err := d.Source.Poll(ctx)
	return d.afterPoll(b, err)
}

func (d *SourceDriver) beforePoll() {
	d.T.Helper()
	if d.pending {
		d.T.Fatalf("sdktest: Poll called before the previous batch was resolved")
	}
}

func (d *SourceDriver) afterPoll(b sdk.Batch, err error) (sdk.Batch, error) {
	d.T.Helper()
	if err != nil {
		return sdk.Batch{}, err
	}
	d.pending = true
	if len(b.Messages) == 0 && b.State != nil {
		d.T.Errorf("an empty batch carries state %q; an empty batch must carry no state (nil)", b.State)
	}
	return b, nil
}

// PollWithin polls once with a context that ends after timeout, and fails
// the test when Poll does not return within 10 seconds after that. Any
// Poll error is returned without failing the test.
func (d *SourceDriver) PollWithin(timeout time.Duration) (sdk.Batch, error) {
	d.T.Helper()
	d.beforePoll()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		b   sdk.Batch
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := d.Source.Poll(ctx)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		if r.err != nil && !errors.Is(r.err, context.DeadlineExceeded) && !errors.Is(r.err, context.Canceled) {
			d.T.Logf("Poll: %v", r.err)
		}
		return d.afterPoll(r.b, r.err)
	case <-time.After(timeout + 10*time.Second):
		d.T.Fatalf("Poll did not return within 10s after its context ended: a source must pace itself with ctx")
	}
	return sdk.Batch{}, context.DeadlineExceeded
}

// PollNonEmpty polls, acknowledging empty batches as the runtime does,
// until a batch with records arrives, and returns it unresolved. Poll
// errors are retried, as the runtime does; the test fails after
// PollTimeout.
func (d *SourceDriver) PollNonEmpty() sdk.Batch {
	d.T.Helper()
	timeout := d.PollTimeout
	if timeout == 0 {
		timeout = 30 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	for ctx.Err() == nil {
		b, err := d.Poll(ctx)
		if err != nil {
			lastErr = err
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
			continue
		}
		if len(b.Messages) > 0 {
			return b
		}
		d.Result(sdk.Ack)
	}
	if lastErr != nil {
		d.T.Fatalf("no batch with records within %v; last Poll error: %v", timeout, lastErr)
	}
	d.T.Fatalf("no batch with records within %v", timeout)
	return sdk.Batch{}
}

// Result reports the outcome of the pending batch.
func (d *SourceDriver) Result(r sdk.Result) {
	d.T.Helper()
	if !d.pending {
		d.T.Fatalf("sdktest: %s with no pending batch", r)
	}
	d.pending = false
	if err := d.Source.OnBatchResult(context.Background(), r); err != nil {
		d.T.Fatalf("OnBatchResult(%s): %v", r, err)
	}
}

// Close closes the source once; later calls do nothing. A pending batch is
// left unresolved, as after a crash.
func (d *SourceDriver) Close() {
	d.T.Helper()
	if d.closed {
		return
	}
	d.closed = true
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := d.Source.Close(ctx); err != nil {
		d.T.Errorf("Close: %v", err)
	}
}
