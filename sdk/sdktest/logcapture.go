package sdktest

import (
	"context"
	"log/slog"
	"sync"
	"testing"

	"github.com/picomq/pico-connectors/sdk"
)

// LogCapture keeps the log records of a connector under test, so a test
// can observe a sink whose only output is its log. Its Logger also writes
// every record to t.Log.
type LogCapture struct {
	// Logger is the logger to hand the connector (sdk.Env.Logger).
	Logger *slog.Logger

	h *captureHandler
}

// NewLogCapture returns an empty LogCapture for t.
func NewLogCapture(t testing.TB) *LogCapture {
	h := &captureHandler{st: &captured{}, next: slog.NewTextHandler(TestWriter(t), &slog.HandlerOptions{Level: slog.LevelDebug})}
	return &LogCapture{Logger: slog.New(h), h: h}
}

// Env returns the sdk.Env of a connector under test whose log c keeps: key
// "test", c's Logger, and metrics that record nothing.
func (c *LogCapture) Env() sdk.Env {
	return sdk.Env{Key: "test", Logger: c.Logger, Metrics: sdk.DiscardMetrics}
}

// Reset forgets every record kept so far.
func (c *LogCapture) Reset() {
	c.h.st.mu.Lock()
	c.h.st.recs = nil
	c.h.st.mu.Unlock()
}

// Messages returns the message of every record kept, in order.
func (c *LogCapture) Messages() []string {
	c.h.st.mu.Lock()
	defer c.h.st.mu.Unlock()
	out := make([]string, len(c.h.st.recs))
	for i, r := range c.h.st.recs {
		out[i] = r.msg
	}
	return out
}

// Values returns the value of attribute attr, as text, of every record
// whose message is msg, in order. Attributes added with Logger.With count.
func (c *LogCapture) Values(msg, attr string) []string {
	c.h.st.mu.Lock()
	defer c.h.st.mu.Unlock()
	var out []string
	for _, r := range c.h.st.recs {
		if r.msg != msg {
			continue
		}
		if v, ok := r.attrs[attr]; ok {
			out = append(out, v)
		}
	}
	return out
}

type capturedRecord struct {
	msg   string
	attrs map[string]string
}

type captured struct {
	mu   sync.Mutex
	recs []capturedRecord
}

type captureHandler struct {
	st     *captured
	attrs  []slog.Attr
	prefix string
	next   slog.Handler
}

func (h *captureHandler) Enabled(context.Context, slog.Level) bool { return true }

func (h *captureHandler) Handle(ctx context.Context, r slog.Record) error {
	rec := capturedRecord{msg: r.Message, attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.attrs[a.Key] = a.Value.Resolve().String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.attrs[h.prefix+a.Key] = a.Value.Resolve().String()
		return true
	})
	h.st.mu.Lock()
	h.st.recs = append(h.st.recs, rec)
	h.st.mu.Unlock()
	return h.next.Handle(ctx, r)
}

func (h *captureHandler) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), prefixed(h.prefix, as)...)
	c.next = h.next.WithAttrs(as)
	return &c
}

func (h *captureHandler) WithGroup(name string) slog.Handler {
	c := *h
	c.prefix = h.prefix + name + "."
	c.next = h.next.WithGroup(name)
	return &c
}

func prefixed(prefix string, as []slog.Attr) []slog.Attr {
	if prefix == "" {
		return as
	}
	out := make([]slog.Attr, len(as))
	for i, a := range as {
		out[i] = slog.Attr{Key: prefix + a.Key, Value: a.Value}
	}
	return out
}
