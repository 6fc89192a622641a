package sdktest_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest"
)

// counter is a source that keeps the stage-and-apply contract: it emits
// batches of 3 sequence numbers, up to limit (0 = forever), and keeps the
// next number in its state. The flaws flags break it on purpose.
type counter struct {
	committed, candidate int
	limit                int
	flaws                flaws
}

type flaws struct {
	advanceInPoll  bool // promotes the candidate inside Poll
	ignoreState    bool // restarts from 0 whatever the state
	stateWhenEmpty bool // empty batches carry the committed state
}

func (c *counter) Open(_ context.Context, state []byte) error {
	if state != nil && !c.flaws.ignoreState {
		n, err := strconv.Atoi(string(state))
		if err != nil {
			return err
		}
		c.committed, c.candidate = n, n
	}
	return nil
}

func (c *counter) Poll(ctx context.Context) (sdk.Batch, error) {
	next := c.committed
	var b sdk.Batch
	for i := 0; i < 3 && (c.limit == 0 || next < c.limit); i++ {
		b.Messages = append(b.Messages, sdk.Message{
			Key:     []byte("k"),
			Payload: []byte(`{"n":` + strconv.Itoa(next) + `}`),
		})
		next++
	}
	if len(b.Messages) == 0 {
		if c.flaws.stateWhenEmpty {
			b.State = []byte(strconv.Itoa(c.committed))
		}
		select {
		case <-ctx.Done():
		case <-time.After(50 * time.Millisecond):
		}
		return b, nil
	}
	c.candidate = next
	b.State = []byte(strconv.Itoa(next))
	if c.flaws.advanceInPoll {
		c.committed = next
	}
	return b, nil
}

func (c *counter) OnBatchResult(_ context.Context, r sdk.Result) error {
	if r == sdk.Ack && c.candidate > c.committed {
		c.committed = c.candidate
	}
	c.candidate = c.committed
	return nil
}

func (c *counter) Close(context.Context) error { return nil }

func factory(limit int, f flaws) sdktest.SourceFactory {
	return func(t *testing.T) (sdk.Source, error) {
		return &counter{limit: limit, flaws: f}, nil
	}
}

func TestRunPassesAGoodSource(t *testing.T) {
	sdktest.TestSource(t, factory(0, flaws{}))
}

func TestRunPassesAGoodSourceThatRunsDry(t *testing.T) {
	sdktest.TestSource(t, factory(7, flaws{}), sdktest.WithIdleTimeout(100*time.Millisecond))
}

func TestRunSetupRunsPerSubtest(t *testing.T) {
	var n int
	sdktest.TestSource(t, factory(0, flaws{}), sdktest.WithSetup(func(*testing.T) { n++ }))
	if n != 4 {
		t.Errorf("setup ran %d times, want 4 (once per subtest; PollAhead is skipped before its setup)", n)
	}
}

// aheadCounter is a counter that may have several batches in flight
// (sdk.Pipelined): Poll continues after the last candidate, Ack
// promotes the oldest, Nack drops them all. With fake set it claims
// PollAhead but polls from the committed state like counter.
type aheadCounter struct {
	counter
	next        int
	outstanding []int
	fake        bool
}

func (c *aheadCounter) PollAhead() int { return 4 }

func (c *aheadCounter) Open(ctx context.Context, state []byte) error {
	err := c.counter.Open(ctx, state)
	c.next = c.committed
	return err
}

func (c *aheadCounter) Poll(ctx context.Context) (sdk.Batch, error) {
	if c.fake {
		return c.counter.Poll(ctx)
	}
	var b sdk.Batch
	end := c.next + 3
	for n := c.next; n < end; n++ {
		b.Messages = append(b.Messages, sdk.Message{Key: []byte("k"), Payload: []byte(`{"n":` + strconv.Itoa(n) + `}`)})
	}
	c.next = end
	c.outstanding = append(c.outstanding, end)
	b.State = []byte(strconv.Itoa(end))
	return b, nil
}

func (c *aheadCounter) OnBatchResult(ctx context.Context, r sdk.Result) error {
	if c.fake {
		return c.counter.OnBatchResult(ctx, r)
	}
	switch {
	case r == sdk.Nack:
		c.outstanding, c.next = nil, c.committed
	case len(c.outstanding) > 0:
		c.committed, c.outstanding = c.outstanding[0], c.outstanding[1:]
	}
	return nil
}

func aheadFactory(fake bool) sdktest.SourceFactory {
	return func(t *testing.T) (sdk.Source, error) {
		return &aheadCounter{fake: fake}, nil
	}
}

func TestRunPassesAPipelinedSource(t *testing.T) {
	sdktest.TestSource(t, aheadFactory(false))
}

// broken lists sources that break the contract and what Run must say.
var broken = map[string]struct {
	limit int
	flaws flaws
	want  string
}{
	"AdvanceInPoll":  {0, flaws{advanceInPoll: true}, "after Nack, Poll returned other records"},
	"IgnoreState":    {0, flaws{ignoreState: true}, "does not continue after the acknowledged batch"},
	"StateWhenEmpty": {4, flaws{stateWhenEmpty: true}, "an empty batch carries state"},
	"FakePollAhead":  {0, flaws{}, "a Poll with a batch in flight repeated it"},
	"FailingCheck":   {0, flaws{}, `check "system" failed against the test's system: it is gone`},
}

// checkedCounter is a counter with a Check that reports problem, if any.
type checkedCounter struct {
	counter
	problem string
}

func (c *checkedCounter) Check(context.Context) []sdk.Check {
	if c.problem != "" {
		return []sdk.Check{sdk.Failed("system", c.problem, "bring it back")}
	}
	return []sdk.Check{sdk.Passed("system", "here")}
}

func checkedFactory(problem string) sdktest.SourceFactory {
	return func(t *testing.T) (sdk.Source, error) { return &checkedCounter{problem: problem}, nil }
}

func TestRunPassesACheckedSource(t *testing.T) {
	sdktest.TestSource(t, checkedFactory(""))
}

// TestRunCatchesBrokenSources runs each broken source in a child process,
// because a conformance failure fails the test that ran it.
func TestRunCatchesBrokenSources(t *testing.T) {
	if name := os.Getenv("SOURCETEST_BROKEN"); name != "" {
		b := broken[name]
		f := factory(b.limit, b.flaws)
		if name == "FakePollAhead" {
			f = aheadFactory(true)
		}
		if name == "FailingCheck" {
			f = checkedFactory("it is gone")
		}
		sdktest.TestSource(t, f, sdktest.WithIdleTimeout(100*time.Millisecond))
		return
	}
	for name, b := range broken {
		t.Run(name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestRunCatchesBrokenSources$", "-test.v")
			cmd.Env = append(os.Environ(), "SOURCETEST_BROKEN="+name)
			out, err := cmd.CombinedOutput()
			if err == nil {
				t.Fatalf("Run passed a source that breaks the contract:\n%s", out)
			}
			if !strings.Contains(string(out), b.want) {
				t.Fatalf("Run failed without saying %q:\n%s", b.want, out)
			}
		})
	}
}
