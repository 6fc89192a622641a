package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/procstat"
)

// newRT writes the folder of a runtime with bootstrap as its broker (its
// own embedded broker when empty), extra appended to runtime.toml, one
// definition file per entry of defs (file name -> content) and env added
// to its environment. It is killed when the suite ends.
func (s *suite) newRT(bootstrap, extra string, defs map[string]string, env ...string) *fleet.Runtime {
	return s.runtime(fleet.Options{Bootstrap: bootstrap, Extra: extra, Defs: defs, Env: env})
}

// runtime writes the folder of a runtime described by o, killed when the
// suite ends.
func (s *suite) runtime(o fleet.Options) *fleet.Runtime {
	r := mustGet(fleet.NewRuntime(s.tempDir(), s.bin, o))
	s.cleanups.Add(r.Kill)
	return r
}

// newClient is a franz-go client of the broker at addr, logged in as
// fleet's runtimes are (a broker without SASL lets the login pass).
func newClient(addr string, opts ...kgo.Opt) (*kgo.Client, error) {
	return fleet.NewClient(addr, opts...)
}

// metricValue reads one unlabelled sample from GET /metrics.
func metricValue(api, name string) (float64, error) {
	c := http.Client{Timeout: 2 * time.Second}
	resp, err := c.Get("http://" + api + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+" "); ok {
			return strconv.ParseFloat(v, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /metrics", name)
}

// goroutines reads go_goroutines from r's GET /metrics.
func goroutines(r *fleet.Runtime) (int64, error) {
	f, err := metricValue(r.API, "go_goroutines")
	return int64(f), err
}

// sampleRuntime calls take every every until dur has passed since t0, with the
// time since t0 (to the second), r's RSS in KiB and its goroutines.
func sampleRuntime(r *fleet.Runtime, t0 time.Time, dur, every time.Duration, take func(at time.Duration, rss, goroutines int64)) {
	for time.Since(t0) < dur {
		time.Sleep(every)
		rss, err := procstat.KiB(r.PID(), "VmRSS")
		must(err)
		g, err := goroutines(r)
		must(err)
		take(time.Since(t0).Round(time.Second), rss, g)
	}
}

// readTopic reads partition 0 of topic from the start to its high
// watermark with franz-go (independent of librdkafka).
func readTopic(addr, topic string) ([]broker.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	adm, err := newClient(addr)
	if err != nil {
		return nil, err
	}
	ends, err := kadm.NewClient(adm).ListEndOffsets(ctx, topic)
	adm.Close()
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(topic, 0)
	if !ok || end.Err != nil {
		return nil, fmt.Errorf("end offset of %s: %v", topic, end.Err)
	}
	return broker.ReadPartition(ctx, topic, end.Offset, fleet.ClientOptions(addr)...)
}

// endOffset returns the high watermark of partition 0 of topic (0 when the
// topic does not exist yet).
func endOffset(addr, topic string) int64 {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := newClient(addr)
	if err != nil {
		return -1
	}
	defer cl.Close()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, topic)
	if err != nil {
		return -1
	}
	o, ok := ends.Lookup(topic, 0)
	if !ok || o.Err != nil {
		return 0
	}
	return o.Offset
}

// committed returns the committed offset of group on partition 0 of topic,
// or 0 when none.
func committed(addr, group, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	cl, err := newClient(addr)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	offs, err := kadm.NewClient(cl).FetchOffsets(ctx, group)
	if err != nil {
		return 0, err
	}
	o, ok := offs.Lookup(topic, 0)
	if !ok {
		return 0, nil
	}
	return o.At, o.Err
}

// produce writes values without keys to topic with franz-go and waits for
// every ack.
func produce(addr, topic string, values [][]byte) error {
	kvs := make([][2][]byte, len(values))
	for i, v := range values {
		kvs[i][1] = v
	}
	return produceKeyed(addr, topic, kvs)
}

// startBroker starts a broker in this process on a free port that creates
// topics on first use. The caller closes it.
func startBroker() *broker.Broker {
	return mustGet(broker.Start(broker.Config{Address: "127.0.0.1:0", AutoCreateTopics: true}))
}
