package supervisor

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk/sdktest"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestEmbeddedBrokerOnAllInterfaces: with embedded_address 0.0.0.0 and a
// password the runtime's own clients (librdkafka) produce through
// loopback ("Failed to resolve ':::PORT'" before), and a client without
// credentials can neither delete the source's topic nor commit offsets.
func TestEmbeddedBrokerOnAllInterfaces(t *testing.T) {
	cfg := writeConfig(t, "[broker]\nembedded_address = \"0.0.0.0:0\"\nembedded_password = \"a-long-enough-password\"\n[state]\npath = \"st\"\n",
		map[string]string{"gen.toml": sourceDef("gen", true)})
	sup, err := New(cfg, Options{Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	if err := sup.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer sup.Stop(context.Background())
	if !strings.HasPrefix(sup.BootstrapServers(), "127.0.0.1:") {
		t.Fatalf("bootstrap %q", sup.BootstrapServers())
	}
	tr, _ := sup.Tracker("source", "gen")
	sdktest.WaitFor(t, 30*time.Second, "records on the embedded broker", func() bool { return tr.Counters.Produced.Load() >= 20 })

	cl, err := kgo.NewClient(kgo.SeedBrokers(sup.BootstrapServers()), kgo.RequestRetries(0))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if r, err := adm.DeleteTopic(ctx, "seq_gen"); err == nil && r.Err == nil {
		t.Fatal("a client without credentials deleted the source's topic")
	}
	offs := kadm.Offsets{}
	offs.AddOffset("seq_gen", 0, 1, -1)
	if err := adm.CommitAllOffsets(ctx, "pico-connectors-x", offs); err == nil {
		t.Fatal("a client without credentials committed offsets")
	}
	if sup.broker.HighWatermark("seq_gen") < 20 {
		t.Fatal("the source's topic lost records")
	}
}

// TestEmbeddedGeneratedPassword: without embedded_password the runtime
// keeps a generated one in the data dir, 0600, the same across restarts.
func TestEmbeddedGeneratedPassword(t *testing.T) {
	cfg := writeConfig(t, "[broker]\nembedded_address = \"127.0.0.1:0\"\n[state]\npath = \"st\"\n", nil)
	read := func() string {
		sup, err := New(cfg, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := sup.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		defer sup.Stop(context.Background())
		if sup.clientProps["sasl.password"] == "" {
			t.Fatal("the runtime's clients have no password")
		}
		return sup.clientProps["sasl.password"]
	}
	first := read()
	path := filepath.Join(cfg.BrokerDataDir(), broker.PasswordFile)
	info, err := os.Stat(path)
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, info, err)
	}
	if dir, err := os.Stat(cfg.BrokerDataDir()); err != nil || dir.Mode().Perm() != 0o700 {
		t.Fatalf("data dir: %v %v", dir, err)
	}
	if read() != first {
		t.Fatal("another password after a restart")
	}
}

func TestDefinitionTopics(t *testing.T) {
	defs := []*definition.Definition{{Connector: definition.Connector{Topics: []definition.Topics{
		{Topic: definition.Route{Literal: "orders"}, DeadLetterTopic: "orders.dlq"},
		{Topic: definition.Route{Strategy: "field", Template: "tenant.{value}", Fallback: "tenant.unknown"}},
		{Pattern: `logs\..*`},
		{Pattern: `exact`},
		{Pattern: `.*`},
	}}}}
	topics, prefixes := definitionTopics(defs)
	if !slices.Equal(topics, []string{"exact", "orders", "orders.dlq", "tenant.unknown"}) || !slices.Equal(prefixes, []string{"logs.", "tenant."}) {
		t.Fatalf("topics %v, prefixes %v", topics, prefixes)
	}
}
