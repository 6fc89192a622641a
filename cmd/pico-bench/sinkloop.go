package main

import (
	"context"
	"fmt"
	"regexp"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/sdk"
)

// noopSink accepts every batch and does nothing with it.
type noopSink struct{}

func (noopSink) Open(context.Context) error                  { return nil }
func (noopSink) Close(context.Context) error                 { return nil }
func (noopSink) Consume(context.Context, []sdk.Record) error { return nil }

// sinkLoopRows measures the sink loop's own overhead: a no-op sink through
// it against a bare confluent-kafka-go consumer on the same topic and
// broker, interleaved rounds.
func (b *bench) sinkLoopRows() []row {
	br, err := broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true})
	b.must(err)
	defer br.Close()
	const n, size, rounds, batch = 300_000, 100, 5, 1000
	topic := "loopbench"
	b.logf("sinkloop: writing %d records of %d B to %s", n, size, topic)
	b.must(fill(br.Addr(), []string{topic}, n, size))
	// Interleaved rounds, so machine noise hits both alike; rates over
	// the sums.
	var bareN, loopN int
	var bareT, loopT time.Duration
	for i := 0; i < rounds; i++ {
		t, err := bareConsume(br.Addr(), topic, n)
		b.must(err)
		ln, lt, err := sinkRun(br.Addr(), noopSink{}, regexp.QuoteMeta(topic)+"$", n, batch)
		b.must(err)
		b.logf("sinkloop: round %d: bare consumer %.0f rec/s, sink loop with a no-op sink %.0f rec/s", i+1, float64(n-1)/t.Seconds(), float64(ln)/lt.Seconds())
		bareN, bareT = bareN+n-1, bareT+t
		loopN, loopT = loopN+ln, loopT+lt
	}
	bare, loop := float64(bareN)/bareT.Seconds(), float64(loopN)/loopT.Seconds()
	return []row{{Name: "Sink loop, no-op sink (100 B JSON)", Value: loop, Unit: "rec/s",
		BaseName: "bare confluent-kafka-go consumer", BaseValue: bare, BaseUnit: "rec/s", Ratio: loop / bare,
		Note: fmt.Sprintf("same topic and embedded broker, %d interleaved rounds of %dk, batch_length %d, JSON checked, fetch.queue.backoff.ms=10 for both", rounds, n/1000, batch)}}
}
