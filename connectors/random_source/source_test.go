package randomsource

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/generated/randomsourceconfig"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk"
)

func testConfig() randomsourceconfig.Config {
	cfg := randomsourceconfig.Default()
	cfg.RecordsPerBatch, cfg.PayloadSize = 10, 64
	return cfg
}

func mustSource(t testing.TB, cfg randomsourceconfig.Config, state []byte) *Source {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	s := newSource(cfg)
	if err := s.Open(context.Background(), state); err != nil {
		t.Fatal(err)
	}
	return s
}

type payload struct {
	Seq    int64
	TS     string
	Filler string
}

func decode(t testing.TB, m sdk.Message) payload {
	t.Helper()
	var p payload
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v", m.Payload, err)
	}
	return p
}

func TestCandidateCommittedOnlyOnAck(t *testing.T) {
	ctx := context.Background()
	s := mustSource(t, testConfig(), nil)
	b, _ := s.Poll(ctx)
	if len(b.Messages) != 10 || string(b.State) != `{"next_seq":10}` || decode(t, b.Messages[9]).Seq != 9 {
		t.Fatalf("first batch: %d records, state %s", len(b.Messages), b.State)
	}
	if s.Committed() != 0 {
		t.Fatal("poll advanced the committed state")
	}
	s.OnBatchResult(ctx, sdk.Nack)
	b2, _ := s.Poll(ctx)
	if decode(t, b2.Messages[0]).Seq != 0 || string(b2.State) != `{"next_seq":10}` {
		t.Fatal("after a nack the same records must come again")
	}
	if !bytes.Equal(b.Messages[3].Key, b2.Messages[3].Key) || decode(t, b.Messages[3]).Filler != decode(t, b2.Messages[3]).Filler {
		t.Fatal("a replayed record differs from the first attempt")
	}
	s.OnBatchResult(ctx, sdk.Ack)
	if s.Committed() != 10 {
		t.Fatalf("committed %d after ack", s.Committed())
	}
	b3, _ := s.Poll(ctx)
	if decode(t, b3.Messages[0]).Seq != 10 || string(b3.Messages[0].Key) != "10" {
		t.Fatal("the batch after an ack starts at 10")
	}
}

func TestResumeFromState(t *testing.T) {
	s := mustSource(t, testConfig(), []byte(`{"next_seq":1234}`))
	b, _ := s.Poll(context.Background())
	if decode(t, b.Messages[0]).Seq != 1234 {
		t.Fatal("did not resume")
	}
	for _, bad := range []string{`garbage`, `{"next_seq":-1}`} {
		if err := newSource(testConfig()).Open(context.Background(), []byte(bad)); err == nil || !strings.Contains(err.Error(), "random_source") {
			t.Errorf("state %s: %v", bad, err)
		}
	}
}

func TestMaxRecordsAndShapes(t *testing.T) {
	ctx := context.Background()
	opt := testConfig()
	opt.MaxRecords = confkit.Ptr(15)
	opt.KeyShape = randomsourceconfig.KeyShapeUUID
	s := mustSource(t, opt, nil)
	b, _ := s.Poll(ctx)
	s.OnBatchResult(ctx, sdk.Ack)
	b2, _ := s.Poll(ctx)
	if len(b.Messages) != 10 || len(b2.Messages) != 5 || string(b2.State) != `{"next_seq":15}` {
		t.Fatalf("%d then %d records", len(b.Messages), len(b2.Messages))
	}
	if k := string(b.Messages[0].Key); len(k) != 36 || k[14] != '4' {
		t.Fatalf("uuid key %q", k)
	}
	s.OnBatchResult(ctx, sdk.Ack)
	start := time.Now()
	b3, _ := s.Poll(ctx)
	if len(b3.Messages) != 0 || b3.State != nil || time.Since(start) < 50*time.Millisecond {
		t.Fatal("an exhausted source must wait and return an empty batch without state")
	}
	for _, shape := range []randomsourceconfig.PayloadShape{randomsourceconfig.PayloadShapeText, randomsourceconfig.PayloadShapeBytes} {
		opt := testConfig()
		opt.PayloadShape, opt.KeyShape, opt.PayloadSize, opt.KeySize = shape, randomsourceconfig.KeyShapeRandom, 100, 7
		b, _ := mustSource(t, opt, nil).Poll(ctx)
		if len(b.Messages[0].Payload) != 100 || len(b.Messages[0].Key) != 7 {
			t.Fatalf("%s: payload %d bytes, key %d", shape, len(b.Messages[0].Payload), len(b.Messages[0].Key))
		}
	}
	opt = testConfig()
	opt.KeyShape = randomsourceconfig.KeyShapeNone
	opt.PayloadSize = 300
	b, _ = mustSource(t, opt, nil).Poll(ctx)
	if b.Messages[0].Key != nil || len(b.Messages[0].Payload) != 300 {
		t.Fatalf("key %q, json payload %d bytes (want 300)", b.Messages[0].Key, len(b.Messages[0].Payload))
	}
}

func TestIntervalPacesPolls(t *testing.T) {
	opt := testConfig()
	opt.Interval = 40 * time.Millisecond
	s := mustSource(t, opt, nil)
	ctx := context.Background()
	start := time.Now()
	for range 3 {
		s.Poll(ctx)
		s.OnBatchResult(ctx, sdk.Ack)
	}
	if time.Since(start) < 80*time.Millisecond {
		t.Fatal("three polls took less than two intervals")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if b, err := s.Poll(cctx); err != nil || len(b.Messages) != 0 {
		t.Fatal("a cancelled poll returns an empty batch")
	}
}
