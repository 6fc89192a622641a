package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// memStore is a state store in memory, so the loop is measured and not a
// disk.
type memStore struct{ blob []byte }

func (m *memStore) Load(context.Context, string) ([]byte, error) { return m.blob, nil }
func (m *memStore) Save(_ context.Context, _ string, b []byte) error {
	m.blob = append(m.blob[:0], b...)
	return nil
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newSource builds a registered source from a plugin_config table; the
// source loop opens it.
func newSource(path string, cfg map[string]any) (sdk.Source, error) {
	reg, ok := sdk.Lookup(path)
	if !ok {
		return nil, fmt.Errorf("%s is not linked", path)
	}
	c, err := reg.Load(cfg, "PICO_BENCH_UNUSED_", func(string) (string, bool) { return "", false })
	if err != nil {
		return nil, err
	}
	return reg.NewSource(c, sdk.Env{Key: "bench", Logger: quiet(), Metrics: sdk.DiscardMetrics})
}

// recorder keeps every batch a source returns unless drop is set. It passes
// on the source's PollAhead (ahead), so the loop pipelines it as it would
// the source.
type recorder struct {
	sdk.Source
	drop  bool
	msgs  []sdk.Message
	ahead int
}

// PollAhead is the recorded source's.
func (r *recorder) PollAhead() int { return r.ahead }

func (r *recorder) Poll(ctx context.Context) (sdk.Batch, error) {
	b, err := r.Source.Poll(ctx)
	if !r.drop {
		r.msgs = append(r.msgs, b.Messages...)
	}
	return b, err
}

// runLoop runs the source loop on src into topic until the topic's high
// watermark reaches n, and returns the time that took.
func (b *bench) runLoop(br *broker.Broker, src sdk.Source, topic string, batch, n int) time.Duration {
	topics := []definition.Topics{{Topic: definition.Route{Literal: topic}, Schema: "json", CreateTopics: true, BatchLength: batch, LingerTime: "5ms"}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	tr := status.New("source", "bench", nil)
	start := time.Now()
	go func() {
		done <- sourceloop.Run(ctx, sourceloop.Config{Key: "bench", Topics: topics, Source: src, Store: &memStore{},
			BootstrapServers: br.Addr(), Logger: quiet(), Tracker: tr})
	}()
	deadline := time.Now().Add(2 * time.Minute)
	for br.HighWatermark(topic) < int64(n) {
		if time.Now().After(deadline) {
			cancel()
			b.must(fmt.Errorf("source loop: topic %s has %d of %d records after 2 minutes (last error %q)", topic, br.HighWatermark(topic), n, tr.Snapshot().LastError))
		}
		select {
		case err := <-done:
			b.must(fmt.Errorf("source loop stopped early: %v", err))
		default:
		}
		time.Sleep(200 * time.Microsecond)
	}
	took := time.Since(start)
	cancel()
	<-done
	return took
}

// randomRows runs the random source through the source loop against a bare
// producer sending the same records with the same delivery settings (acks=all,
// enable.idempotence), interleaved over three rounds, once on an in-memory
// embedded broker and once on a persistent one (data_dir with synchronous
// writes, the runtime's default).
func (b *bench) randomRows() []row {
	return []row{
		b.randomRow("in-memory broker", broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true}),
		b.randomRow("persistent broker", broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true, DataDir: b.tempDir("")}),
	}
}

func (b *bench) randomRow(what string, cfg broker.Config) row {
	const n = 200_000
	br, err := broker.Start(cfg)
	b.must(err)
	defer br.Close()
	srcCfg := map[string]any{"records_per_batch": int64(1000), "payload_size": "256B", "key_shape": "sequence",
		"payload_shape": "json", "seed": int64(1), "interval": "0", "max_records": int64(n)}
	var loopT, bareT time.Duration
	var msgs []sdk.Message
	pipelined := "one batch at a time"
	for i := 0; i < 3; i++ {
		src, err := newSource("libpicomq_connector_random_source", srcCfg)
		b.must(err)
		// Only the first round's records are kept, for the bare producer:
		// keeping 200k records in every round made the loop's rounds pay
		// for growing that slice and for the collector scanning it.
		rec := &recorder{Source: src, drop: msgs != nil}
		if p, ok := src.(sdk.Pipelined); ok && p.PollAhead() > 1 {
			rec.ahead = p.PollAhead()
			pipelined = fmt.Sprintf("up to %d batches in flight", rec.ahead)
		}
		t := b.runLoop(br, rec, fmt.Sprintf("random.loop.%d", i), 1000, n)
		loopT += t
		if msgs == nil {
			msgs = rec.msgs[:n]
		}
		bt, err := bareProduce(br.Addr(), fmt.Sprintf("random.bare.%d", i), msgs)
		b.must(err)
		bareT += bt
		b.logf("random, %s: round %d: loop %.0f rec/s, bare producer %.0f rec/s", what, i+1, n/t.Seconds(), n/bt.Seconds())
	}
	loop, bare := 3*n/loopT.Seconds(), 3*n/bareT.Seconds()
	return row{
		Name: "Source loop, random source (256 B JSON), " + what, Value: loop, Unit: "rec/s",
		BaseName: "bare confluent-kafka-go producer", BaseValue: bare, BaseUnit: "rec/s", Ratio: loop / bare,
		Note: "same records; both idempotent, acks=all; 3 interleaved rounds of 200k; " + pipelined,
	}
}
