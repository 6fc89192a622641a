package clientconf

import (
	"strings"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
)

func TestConfigMapLayers(t *testing.T) {
	m, err := ConfigMap("h:1", kafka.ConfigMap{"linger.ms": 5, "acks": "all"}, []string{"group.id"},
		map[string]string{"linger.ms": "10"}, map[string]string{"linger.ms": "20", "compression.type": "lz4"})
	if err != nil {
		t.Fatal(err)
	}
	if m["bootstrap.servers"] != "h:1" || m["linger.ms"] != "20" || m["acks"] != "all" || m["compression.type"] != "lz4" || m["enable.metrics.push"] != false {
		t.Fatalf("%v", m)
	}
	if _, err := ConfigMap("h:1", nil, []string{"group.id"}, map[string]string{"group.id": "x"}); err == nil || !strings.Contains(err.Error(), `"group.id"`) {
		t.Fatalf("reserved key: %v", err)
	}
	if _, err := ConfigMap(" ", nil, nil); err == nil || !strings.Contains(err.Error(), "bootstrap") {
		t.Fatalf("no servers: %v", err)
	}
}

func TestMillis(t *testing.T) {
	m := kafka.ConfigMap{"a.ms": 4500, "b.ms": "300", "c.ms": "soon", "d.ms": 0, "e.ms": "-5"}
	for key, want := range map[string]time.Duration{"a.ms": 4500 * time.Millisecond, "b.ms": 300 * time.Millisecond} {
		if d, ok := Millis(m, key); !ok || d != want {
			t.Errorf("Millis(%s) = %v, %v; want %v, true", key, d, ok, want)
		}
	}
	for _, key := range []string{"c.ms", "d.ms", "e.ms", "missing.ms"} {
		if d, ok := Millis(m, key); ok {
			t.Errorf("Millis(%s) = %v, true; want false", key, d)
		}
	}
}
