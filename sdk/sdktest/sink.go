package sdktest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strconv"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
	"github.com/picomq/pico-connectors/sdk/sdktest/internal/tlog"
)

// SinkHarness describes the sink under test and how to look at its
// destination.
type SinkHarness struct {
	// New builds a fresh sink; TestSink opens and closes it. Required.
	New func(t *testing.T) (sdk.Sink, error)
	// Written returns the payloads the destination holds now, in the
	// order they were written, with any framing the sink adds removed
	// (one payload per record). Without it, TestSink runs only the cases
	// that need no read-back (ConsumeAndClose, RuntimeCommits) and says
	// which others it could not run.
	Written func(t *testing.T) [][]byte
	// Setup, when set, runs at the start of each subtest, before New; use
	// it to give each subtest an empty destination.
	Setup func(t *testing.T)
	// Break, when set, makes the destination fail (for example by
	// stopping a fault proxy in front of it) and returns the function
	// that restores it. Without Break, the redelivery cases do not run,
	// and TestSink says so.
	Break func(t *testing.T) (restore func())
	// BatchSize is the number of records per batch; zero means 10.
	BatchSize int
	// Batches is the number of batches CloseFlushes sends; zero means 3.
	Batches int
	// Timeout bounds each Open, Consume and Close; zero means 60 seconds.
	Timeout time.Duration

	notRun *notRun
}

// TestSink checks that the sink h describes keeps the sink contract, in
// the spirit of testing/fstest: Close flushes everything a successful
// Consume accepted, and a failed Consume can be redelivered without losing
// records.
//
// A connector's test describes its sink with a SinkHarness and calls TestSink:
//
//	func TestConformance(t *testing.T) {
//		dir := t.TempDir()
//		sdktest.TestSink(t, sdktest.SinkHarness{
//			New: func(t *testing.T) (sdk.Sink, error) {
//				cfg, err := filesinkconfig.Load(map[string]any{"dir": dir}, "", nil)
//				if err != nil {
//					return nil, err
//				}
//				return filesink.New(cfg, sdktest.Env(t))
//			},
//			Written: func(t *testing.T) [][]byte { return readPayloads(t, dir) },
//		})
//	}
//
// It checks, each in its own subtest:
//
//   - CloseFlushes: after several batches and Close, the destination holds
//     every record's payload, in offset order.
//   - FailedConsumeRedelivered (only with SinkHarness.Break): while the
//     destination is broken, a batch fails; once it is restored and the
//     batch is redelivered as the runtime does, every record accepted
//     before, during and after the failure reaches the destination.
//   - RuntimeRedelivers (only with SinkHarness.Break, skipped with -short): the
//     same through the runtime's own sink loop against the embedded broker,
//     with the destination broken from the start and restored after the
//     first failed Consume.
//   - DeferredSkipsRedelivered (only for a sdk.DeferredSink): batches
//     that repeat accepted records leave every record in the destination
//     exactly once, and after Close, Durable reports the end.
//   - DeferredKillLosesNothing (only for a sdk.DeferredSink, skipped
//     with -short): through the runtime's sink loop, the sink is killed (no
//     Close; Durable frozen at what it last said) once it has accepted every
//     record; whatever the loop committed must be in the destination at
//     that moment. A fresh sink on the same destination and group then
//     resumes from the commit, and after a graceful stop the destination
//     holds every record and the commit is at the end.
//   - Checks (only for a sdk.Checker): Check, on a sink New built and
//     never opened, reports at least one named check and no problem.
func TestSink(t *testing.T, h SinkHarness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("sdktest: SinkHarness.New is required")
	}
	if h.BatchSize <= 0 {
		h.BatchSize = 10
	}
	if h.Batches <= 0 {
		h.Batches = 3
	}
	if h.Timeout <= 0 {
		h.Timeout = 60 * time.Second
	}
	h.notRun = &notRun{}
	t.Run("ConsumeAndClose", h.consumeAndClose)
	t.Run("RuntimeCommits", h.runtimeCommits)
	t.Run("CloseFlushes", h.closeFlushes)
	t.Run("FailedConsumeRedelivered", h.redelivered)
	t.Run("RuntimeRedelivers", h.runtimeRedelivers)
	t.Run("DeferredSkipsRedelivered", h.deferredSkips)
	t.Run("DeferredKillLosesNothing", h.killLosesNothing)
	t.Run("Checks", h.checks)
	h.notRun.report(t, 8)
}

func (h SinkHarness) checks(t *testing.T) {
	runChecks(t, h.notRun, h.newSink(t), h.Timeout)
}

// newSink runs Setup, then New, and fails t when New fails.
func (h SinkHarness) newSink(t *testing.T) sdk.Sink {
	t.Helper()
	if h.Setup != nil {
		h.Setup(t)
	}
	s, err := h.New(t)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

func (h SinkHarness) open(t *testing.T) *SinkDriver {
	t.Helper()
	s := h.newSink(t)
	if s == nil {
		t.Fatal("New returned a nil sink and no error")
	}
	d := &SinkDriver{T: t, Sink: s, Timeout: h.Timeout}
	t.Cleanup(d.Close)
	if err := d.Open(); err != nil {
		t.Fatalf("Open: %v", err)
	}
	return d
}

// consumeAndClose needs no hook: the sink opens, accepts batches (one of
// them empty, records with and without keys and headers) and closes
// without an error, and a DeferredSink then reports every record durable,
// never more than it was handed.
func (h SinkHarness) consumeAndClose(t *testing.T) {
	d := h.open(t)
	var sent []sdk.Record
	for i := 0; i < h.Batches; i++ {
		batch := Records("sinktest", int64(len(sent)), h.BatchSize)
		if i == 1 {
			batch[0].Key = nil
			batch[0].Headers = nil
		}
		if err := d.Consume(batch); err != nil {
			t.Fatalf("Consume(batch %d): %v", i, err)
		}
		sent = append(sent, batch...)
		if err := d.Consume(nil); err != nil {
			t.Fatalf("Consume of an empty batch: %v", err)
		}
		if ds, ok := d.Sink.(sdk.DeferredSink); ok {
			if got := ds.Durable()[sdk.TopicPartition{Topic: "sinktest"}]; got > int64(len(sent)) {
				t.Fatalf("Durable() reports offset %d for sinktest/0, beyond the %d records the sink was handed", got, len(sent))
			}
		}
	}
	d.Close()
	if ds, ok := d.Sink.(sdk.DeferredSink); ok {
		if got := ds.Durable()[sdk.TopicPartition{Topic: "sinktest"}]; got != int64(len(sent)) {
			t.Fatalf("after Close, Durable() reports offset %d for sinktest/0, want %d: Close must make every accepted record durable", got, len(sent))
		}
	}
}

func (h SinkHarness) closeFlushes(t *testing.T) {
	h.needWritten(t)
	d := h.open(t)
	var sent []sdk.Record
	for i := 0; i < h.Batches; i++ {
		batch := Records("sinktest", int64(len(sent)), h.BatchSize)
		if err := d.Consume(batch); err != nil {
			t.Fatalf("Consume(batch %d): %v", i, err)
		}
		sent = append(sent, batch...)
	}
	d.Close()
	CheckWritten(t, sent, h.Written(t))
}

func (h SinkHarness) redelivered(t *testing.T) {
	h.needWritten(t)
	h.needBreak(t)
	d := h.open(t)
	var accepted []sdk.Record
	next := func() []sdk.Record { return Records("sinktest", int64(len(accepted)), h.BatchSize) }

	first := next()
	if err := d.Consume(first); err != nil {
		t.Fatalf("Consume before the destination broke: %v", err)
	}
	accepted = append(accepted, first...)

	restore := h.Break(t)
	restored := false
	defer func() {
		if !restored {
			restore()
		}
	}()
	// Keep consuming until a batch fails: a buffering sink may accept a
	// few batches before it meets the broken destination.
	var failed []sdk.Record
	for i := 0; i < 20 && failed == nil; i++ {
		batch := next()
		if err := d.Consume(batch); err != nil {
			t.Logf("Consume while broken failed as expected: %v", err)
			failed = batch
			break
		}
		accepted = append(accepted, batch...)
	}
	restore()
	restored = true
	if failed == nil {
		t.Logf("no Consume failed while the destination was broken (the sink buffers); checking that Close flushes it")
	} else {
		// The runtime redelivers the same batch until it succeeds.
		var err error
		for attempt := 1; attempt <= 10; attempt++ {
			if err = d.Consume(failed); err == nil {
				break
			}
			t.Logf("redelivery attempt %d: %v", attempt, err)
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("the redelivered batch still fails after the destination was restored: %v", err)
		}
		accepted = append(accepted, failed...)
	}
	last := next()
	if err := d.Consume(last); err != nil {
		t.Fatalf("Consume after the redelivery: %v", err)
	}
	accepted = append(accepted, last...)
	d.Close()
	CheckWritten(t, accepted, h.Written(t))
}

// CheckWritten fails t unless written holds every payload of sent, at least
// once, with the first occurrences in the order sent. Duplicates are
// allowed: delivery is at least once.
func CheckWritten(t testing.TB, sent []sdk.Record, written [][]byte) {
	t.Helper()
	pos := 0
	for _, w := range written {
		if pos < len(sent) && bytes.Equal(w, sent[pos].Payload) {
			pos++
		}
	}
	if pos == len(sent) {
		return
	}
	if lost := missing(sent, written); len(lost) > 0 {
		n := len(lost)
		if n > 5 {
			lost = append(lost[:5], fmt.Sprintf("and %d more", n-5))
		}
		t.Fatalf("the destination lacks %d of %d records sent (it holds %d payloads); missing: %q",
			n, len(sent), len(written), lost)
	}
	t.Fatalf("the destination holds every record but not in offset order: in order up to record %d (%s)",
		pos, sent[pos].Payload)
}

// Records returns n records of topic with offsets from first on: JSON
// payloads {"topic":…,"offset":N}, keys "key-N", one header "n", partition 0.
func Records(topic string, first int64, n int) []sdk.Record {
	out := make([]sdk.Record, n)
	base := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range out {
		off := first + int64(i)
		s := strconv.FormatInt(off, 10)
		out[i] = sdk.Record{
			Topic:     topic,
			Offset:    off,
			Timestamp: base.Add(time.Duration(off) * time.Millisecond),
			Key:       []byte("key-" + s),
			Headers:   []sdk.Header{{Key: "n", Value: []byte(s)}},
			Payload:   []byte(`{"topic":` + strconv.Quote(topic) + `,"offset":` + s + `}`),
			Schema:    sdk.SchemaJSON,
		}
	}
	return out
}

// Env returns a sdk.Env for a sink or source built in a test: key "test", a
// logger writing to t.Log, and metrics that record nothing.
func Env(t testing.TB) sdk.Env {
	return sdk.Env{Key: "test", Logger: slog.New(slog.NewTextHandler(TestWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug})), Metrics: sdk.DiscardMetrics}
}

// TestWriter returns an io.Writer that logs each write through t.Log
// until the test ends, and drops writes after that.
func TestWriter(t testing.TB) *LogWriter { return tlog.New(t) }

// LogWriter is an io.Writer that logs through t.Log.
type LogWriter = tlog.Writer

// SinkDriver calls a sink the way the runtime's sink loop does, each call
// bounded by Timeout. Use it directly for connector-specific tests.
type SinkDriver struct {
	T    testing.TB
	Sink sdk.Sink
	// Timeout bounds each call; zero means 60 seconds.
	Timeout time.Duration

	closed bool
}

// NewSinkDriver returns a SinkDriver for s that closes it when the test ends.
func NewSinkDriver(t testing.TB, s sdk.Sink) *SinkDriver {
	d := &SinkDriver{T: t, Sink: s}
	t.Cleanup(d.Close)
	return d
}

func (d *SinkDriver) ctx() (context.Context, context.CancelFunc) {
	timeout := d.Timeout
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	return context.WithTimeout(context.Background(), timeout)
}

// Open opens the sink.
func (d *SinkDriver) Open() error {
	ctx, cancel := d.ctx()
	defer cancel()
	return d.Sink.Open(ctx)
}

// Consume hands the sink a copy of batch, and overwrites the copy once
// Consume returns, as the sink loop reuses its batch slices: a sink that
// keeps the slice instead of its records writes the overwritten records
// and fails the test that reads them back.
func (d *SinkDriver) Consume(batch []sdk.Record) error {
	ctx, cancel := d.ctx()
	defer cancel()
	own := append([]sdk.Record(nil), batch...)
	defer func() {
		for i := range own {
			own[i] = sdk.Record{Topic: "sinktest-reused-slice", Offset: -1, Payload: []byte(`"kept the batch slice"`)}
		}
	}()
	return d.Sink.Consume(ctx, own)
}

// Close closes the sink once, failing the test on an error; later calls do
// nothing.
func (d *SinkDriver) Close() {
	d.T.Helper()
	if d.closed {
		return
	}
	d.closed = true
	ctx, cancel := d.ctx()
	defer cancel()
	if err := d.Sink.Close(ctx); err != nil {
		d.T.Errorf("Close: %v", err)
	}
}
