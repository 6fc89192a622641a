package main

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// fleetRows measures a fleet of real pico-connectors processes (built by
// runtimebin) against a broker process: the S3 sink's throughput with 1, 2
// and 3 runtimes sharing one sink key over 8 topics, each against a bare
// consumer group with as many members reading the same records in the same
// run; and how long a random source takes to move to another runtime after
// its owner is SIGKILLed, against the session timeout.
func (b *bench) fleetRows() []row {
	srv := b.startS3()
	bin, err := runtimebin.Compile()
	b.must(err)
	br, err := fleet.NewBroker(b.tempDir(""), bin)
	b.must(err)
	defer br.Kill()
	const perTopic, size = 100_000, 100
	var topics []string
	for i := range 8 {
		topics = append(topics, fmt.Sprintf("fleetbench.%d", i))
	}
	b.logf("fleet: writing %d records of %d B to each of 8 topics", perTopic, size)
	b.must(fill(br.Addr, topics, perTopic, size))
	ends := map[string]int64{}
	for _, t := range topics {
		ends[t] = perTopic
	}
	total := float64(8 * perTopic)
	var rows []row
	for n := 1; n <= 3; n++ {
		bareT, err := bareGroup(br.Addr, topics, n, 8*perTopic)
		b.must(err)
		key := fmt.Sprintf("fleet_bench_%d", n)
		var rts []*fleet.Runtime
		for i := range n {
			rts = append(rts, b.runtime(bin, fleet.Options{Bootstrap: br.Addr, ID: fmt.Sprintf("bench-%d-%d", n, i),
				Defs: map[string]string{"s3.toml": fleet.S3SinkDef(key, `fleetbench\.[0-7]`, srv, 10_000, `"fetch.queue.backoff.ms" = "10"`, "")}}))
		}
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, len(rts))
		for i, r := range rts {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = r.Run() }()
		}
		wg.Wait()
		b.must(errors.Join(errs...))
		b.must(fleet.AwaitCommitted(br.Addr, "pico-connectors-"+key, ends, 5*time.Minute))
		sinkT := time.Since(t0)
		for _, r := range rts {
			b.must(r.Term(60 * time.Second))
		}
		rate, bare := total/sinkT.Seconds(), total/bareT.Seconds()
		b.logf("fleet: %d runtime(s): S3 sink %.0f rec/s (every offset committed); bare group of %d: %.0f rec/s", n, rate, n, bare)
		rows = append(rows, row{Name: fmt.Sprintf("S3 sink, %d runtime(s), one key over 8 topics", n), Value: rate, Unit: "rec/s",
			BaseName: fmt.Sprintf("bare consumer group of %d, same records", n), BaseValue: bare, BaseUnit: "rec/s", Ratio: rate / bare,
			Note: fmt.Sprintf("%dk records of %d B; from process start to every offset committed (exactly_once, files of 10k records); the bare group from its start to the last record", 8*perTopic/1000, size)})
	}

	// Failover: three runtimes in distributed mode with a random source;
	// SIGKILL its owner, time until another runs it.
	const session = 6 * time.Second
	var rts []*fleet.Runtime
	for i := range 3 {
		rts = append(rts, b.runtime(bin, fleet.Options{Bootstrap: br.Addr, ID: fmt.Sprintf("fo-%d", i), Top: `mode = "distributed"`,
			Extra: fmt.Sprintf("[fleet]\nsession_timeout = %q\n[state]\nstorage = \"broker\"\n", session.String()),
			Defs: map[string]string{"rnd.toml": `type = "source"
key = "fo_rnd"
path = "libpicomq_connector_random_source"
[[topics]]
topic = "fleetbench.src"
create_topics = true
[plugin_config]
records_per_batch = 50
interval = "20ms"
payload_size = "64B"
`}}))
	}
	for _, r := range rts {
		b.must(r.Run())
	}
	var takeovers []time.Duration
	const kills = 5
	for i := range kills {
		victim, err := fleet.AwaitOwner(rts, "fo_rnd", 60*time.Second)
		b.must(err)
		t0 := time.Now()
		victim.Kill()
		next, err := fleet.AwaitOwner(rts, "fo_rnd", session+60*time.Second, victim)
		b.must(err)
		d := time.Since(t0)
		takeovers = append(takeovers, d)
		b.logf("fleet: SIGKILL %d/%d of %s: taken over by %s in %s", i+1, kills, victim.ID, next.ID, d.Round(10*time.Millisecond))
		b.must(victim.Run())
	}
	for _, r := range rts {
		r.Kill()
	}
	slices.Sort(takeovers)
	med, worst := takeovers[len(takeovers)/2], takeovers[len(takeovers)-1]
	rows = append(rows,
		row{Name: "fleet failover after SIGKILL, median", Value: float64(med.Milliseconds()), Unit: "ms",
			BaseName: "fleet.session_timeout", BaseValue: float64(session.Milliseconds()), BaseUnit: "ms", Ratio: med.Seconds() / session.Seconds(),
			Note: fmt.Sprintf("random source, 3 runtimes, %d kills: from SIGKILL to another runtime Running it", kills)},
		row{Name: "fleet failover after SIGKILL, worst", Value: float64(worst.Milliseconds()), Unit: "ms",
			BaseName: "fleet.session_timeout", BaseValue: float64(session.Milliseconds()), BaseUnit: "ms", Ratio: worst.Seconds() / session.Seconds(),
			Note: fmt.Sprintf("of the same %d kills", kills)})
	return rows
}

// runtime writes the folder of a runtime of bin described by o, killed
// when the bench ends.
func (b *bench) runtime(bin string, o fleet.Options) *fleet.Runtime {
	r, err := fleet.NewRuntime(b.tempDir(""), bin, o)
	b.must(err)
	b.cleanups.Add(r.Kill)
	return r
}

// bareGroup reads want records from topics with n bare confluent-kafka-go
// consumers in one new group (cooperative-sticky, as the sink loop), and
// returns the time from their start to the last record.
func bareGroup(addr string, topics []string, n, want int) (time.Duration, error) {
	group := "bare-fleet-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	var got sync.WaitGroup
	var mu sync.Mutex
	count := 0
	done := make(chan struct{})
	var once sync.Once
	stop := func() { once.Do(func() { close(done) }) }
	errc := make(chan error, n)
	t0 := time.Now()
	for range n {
		got.Add(1)
		go func() {
			defer got.Done()
			cm := kafka.ConfigMap{"bootstrap.servers": addr, "group.id": group, "enable.auto.commit": false, "auto.offset.reset": "earliest",
				"partition.assignment.strategy": "cooperative-sticky", "go.logs.channel.enable": true, "enable.metrics.push": false}
			for k, v := range consumerProps {
				cm[k] = v
			}
			for k, v := range fleet.ClientProperties(addr) {
				cm[k] = v
			}
			c, err := kafka.NewConsumer(&cm)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			go func() {
				for range c.Logs() {
				}
			}()
			if err := c.SubscribeTopics(topics, nil); err != nil {
				errc <- err
				return
			}
			for {
				select {
				case <-done:
					return
				default:
				}
				if m, ok := c.Poll(100).(*kafka.Message); ok && m.TopicPartition.Error == nil {
					mu.Lock()
					count++
					if count == want {
						stop()
					}
					mu.Unlock()
				}
			}
		}()
	}
	var err error
	select {
	case <-done:
	case err = <-errc:
	case <-time.After(5 * time.Minute):
		mu.Lock()
		err = fmt.Errorf("bare group of %d: %d of %d records after 5 minutes", n, count, want)
		mu.Unlock()
	}
	d := time.Since(t0)
	stop()
	got.Wait()
	return d, err
}
