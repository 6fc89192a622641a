package broker

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

func TestStartProduceRead(t *testing.T) {
	b, err := Start(Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if !strings.HasPrefix(b.Addr(), "127.0.0.1:") || strings.HasSuffix(b.Addr(), ":0") {
		t.Fatalf("Addr = %q", b.Addr())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.AllowAutoTopicCreation())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for _, v := range []string{"a", "b", "c"} {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: "t1", Value: []byte(v)}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}
	if hw := b.HighWatermark("t1"); hw != 3 {
		t.Fatalf("high watermark = %d, want 3", hw)
	}
	recs, err := b.ReadTopic(ctx, "t1")
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 3 || string(recs[2].Value) != "c" || recs[2].Offset != 2 {
		t.Fatalf("records = %+v", recs)
	}
	if b.HighWatermark("missing") != -1 {
		t.Fatal("missing topic has a high watermark")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b.Close() // twice is fine
}

func TestBadAddress(t *testing.T) {
	for _, a := range []string{"nonsense", "127.0.0.1:port", "127.0.0.1:70000"} {
		if _, err := Start(Config{Address: a}); err == nil || !strings.Contains(err.Error(), a) {
			t.Errorf("Start(%q) error = %v, want one naming the address", a, err)
		}
	}
}

func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err := Start(Config{Address: ln.Addr().String()}); err == nil {
		t.Fatal("Start on a busy port succeeded")
	}
}

func TestSeedTopicsAndDataDir(t *testing.T) {
	dir := t.TempDir()
	b, err := Start(Config{Address: "127.0.0.1:0", SeedTopics: []string{"seeded"}, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if b.HighWatermark("seeded") != 0 {
		t.Fatal("seed topic missing")
	}
	if err := b.CreateTopic("made"); err != nil {
		t.Fatal(err)
	}
	addr := b.Addr()
	b.Close()
	b2, err := Start(Config{Address: addr, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	if b2.HighWatermark("made") != 0 {
		t.Fatal("topic did not survive a restart with DataDir")
	}
}
