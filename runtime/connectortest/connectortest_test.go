package connectortest_test

import (
	"context"
	"errors"
	"testing"

	"github.com/picomq/pico-connectors/runtime/connectortest"
	"github.com/picomq/pico-connectors/runtime/connectortest/sinktest"
)

func TestProduceAndWaitTopic(t *testing.T) {
	b := connectortest.Broker(t, "in")
	recs := sinktest.Records("in", 0, 5)
	connectortest.ProduceRecords(t, b, "in", recs)
	got := connectortest.WaitTopic(t, b, "in", 5)
	if len(got) != 5 {
		t.Fatalf("read %d records, want 5", len(got))
	}
	for i, r := range got {
		if string(r.Value) != string(recs[i].Payload) || string(r.Key) != string(recs[i].Key) || r.Headers["n"] != string(recs[i].Headers[0].Value) {
			t.Errorf("record %d = %+v, want payload %s", i, r, recs[i].Payload)
		}
	}
}

func TestMemStore(t *testing.T) {
	s := connectortest.NewMemStore()
	ctx := context.Background()
	if b, err := s.Load(ctx, "k"); b != nil || err != nil {
		t.Fatalf("Load of an empty store = %q, %v", b, err)
	}
	blob := []byte("v1")
	if err := s.Save(ctx, "k", blob); err != nil {
		t.Fatal(err)
	}
	blob[0] = 'x'
	if got := s.Get("k"); string(got) != "v1" || s.Saves() != 1 {
		t.Fatalf("Get = %q after %d saves; want a copy of v1", got, s.Saves())
	}
	boom := errors.New("boom")
	s.Fail(boom)
	if err := s.Save(ctx, "k", []byte("v2")); !errors.Is(err, boom) || string(s.Get("k")) != "v1" {
		t.Fatalf("a failing Save returned %v and left %q", err, s.Get("k"))
	}
}
