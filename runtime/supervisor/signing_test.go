package supervisor

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/state"
)

// TestBrokerStoreSignedFromConfig: with state.signing_key set, the
// checkpoints the runtime saves carry the HMAC of that key.
func TestBrokerStoreSignedFromConfig(t *testing.T) {
	b, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const key = "0123456789abcdef0123456789abcdef"
	cfg := writeConfig(t, fmt.Sprintf("[broker]\nbootstrap_servers = %q\n[state]\nstorage = \"broker\"\ntopic = \"ckpt\"\nsigning_key = %q\n", b.Addr(), key),
		map[string]string{"gen.toml": sourceDef("gen", true)})
	sup, err := New(cfg, Options{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	tr, _ := sup.Tracker("source", "gen")
	for deadline := time.Now().Add(30 * time.Second); tr.Counters.StateSaves.Load() < 3; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no 3 checkpoints saved within 30 s")
		}
	}
	if err := sup.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	recs, err := b.ReadTopic(context.Background(), "ckpt.gen")
	if err != nil || len(recs) == 0 {
		t.Fatalf("%d checkpoints, %v", len(recs), err)
	}
	for _, r := range recs {
		mac := hmac.New(sha256.New, []byte(key))
		mac.Write([]byte("pico-connectors checkpoint v1\x00ckpt.gen\x00gen\x00"))
		mac.Write(r.Value)
		if got := r.Headers[state.SignatureHeader]; !hmac.Equal([]byte(got), mac.Sum(nil)) {
			t.Fatalf("checkpoint at offset %d: signature %x, want the HMAC of state.signing_key", r.Offset, got)
		}
	}
}
