package metrics

import (
	"log/slog"
	"os"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/status"
)

// TestReadmeDocumentsEveryMetric keeps README.md in step with the
// exposition: every picomq_connectors_ metric the runtime itself exports
// is listed.
func TestReadmeDocumentsEveryMetric(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	r := New(slog.New(slog.DiscardHandler))
	for _, kind := range []string{"source", "sink"} {
		r.Track(status.New(kind, "k_"+kind, nil))
		c := r.For(kind, "k_"+kind)
		c.ObserveStage(StageDecode, 0)
		c.Counter(RecordsAcknowledged, "").Add(1)
		c.Counter(RecordsNacked, "").Add(1)
	}
	families, err := r.Prometheus().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, f := range families {
		if !strings.HasPrefix(f.GetName(), Prefix) {
			continue
		}
		n++
		if !strings.Contains(doc, "`"+f.GetName()+"`") {
			t.Errorf("README.md does not document %s", f.GetName())
		}
	}
	if n < 15 {
		t.Errorf("only %d runtime metric families gathered", n)
	}
}
