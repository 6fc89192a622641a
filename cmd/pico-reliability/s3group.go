package main

import (
	"fmt"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
)

// s3Group runs two runtimes with the same S3 sink key, so one consumer
// group, over 8 topics while a producer writes to each; SIGKILLs one
// mid-stream, lets the other take over its partitions, restarts it, and
// checks that every offset of every topic is in exactly one object.
func (s *suite) s3Group() {
	srv := s.startS3()
	b := startBroker()
	defer b.Close()
	const key, perFile = "s3g", 100
	group := "pico-connectors-" + key
	var topics []string
	var feeders []*feeder
	for i := 0; i < 8; i++ {
		topics = append(topics, fmt.Sprintf("s3g.%d", i))
		feeders = append(feeders, startFeeder(b.Addr(), topics[i], 10, 20*time.Millisecond))
	}
	def := s3Def(key, topics[0], srv.Endpoint, srv, perFile, "")
	def = replaceLine(def, "topic = ", `pattern = 's3g\..*'`)
	// No static membership: the two runtimes are two members, and the
	// killed one's partitions move to the other when its session times out.
	def = replaceLine(def, "properties = ", `properties = { "session.timeout.ms" = "6000" }`)
	ra := s.newRT(b.Addr(), "", map[string]string{"s3.toml": def})
	rb := s.newRT(b.Addr(), "", map[string]string{"s3.toml": def})
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := 0
		for _, t := range topics {
			if endOffset(b.Addr(), t) > 0 {
				n++
			}
		}
		if n == len(topics) {
			break
		}
		if time.Now().After(deadline) {
			mustf("%d of %d topics have records after 30 s", n, len(topics))
		}
	}
	s.inject("two runtimes, one sink key %q (one group) on 8 topics; a producer writes ~500 records/s to each; files of %d records", key, perFile)
	must(ra.Run())
	must(rb.Run())
	progress := func(r *fleet.Runtime, what string) {
		for _, t := range topics {
			c, _ := committed(b.Addr(), group, t)
			s.waitCommitted(r, b.Addr(), group, t, c+2*perFile, 60*time.Second)
		}
		s.note("%s: every topic's commit moved", what)
	}
	progress(rb, "both runtimes")
	time.Sleep(time.Duration(s.rng.IntN(1000)) * time.Millisecond)
	ra.Kill()
	s.inject("SIGKILL runtime A mid-stream")
	progress(rb, "runtime B alone (took over A's partitions after its session timed out)")
	s.inject("restart runtime A")
	must(ra.Run())
	progress(ra, "A and B after A rejoined")

	ends := map[string]int64{}
	for i, t := range topics {
		ends[t] = feeders[i].halt()
	}
	for _, t := range topics {
		s.waitCommitted(rb, b.Addr(), group, t, ends[t]-perFile+1, 60*time.Second)
	}
	s.check(ra.Term(60*time.Second) == nil && rb.Term(60*time.Second) == nil, "SIGTERM of both runtimes: clean exits")
	// One runtime alone catches up with what the stops handed over; its
	// records_consumed counts from its start.
	var want int64
	for _, t := range topics {
		c, err := committed(b.Addr(), group, t)
		must(err)
		want += ends[t] - c
	}
	must(ra.Run())
	if e, ok := ra.WaitEntry("sink", key, 60*time.Second, func(e fleet.Entry) bool { return e.Counters.Consumed >= want }); !ok {
		mustf("sink consumed %d of %d records\n%s", e.Counters.Consumed, want, ra.Tail())
	}
	err := ra.Term(60 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)

	var total, objects, missing, twice, uncommitted, markers int64
	for _, t := range topics {
		c, err := committed(b.Addr(), group, t)
		must(err)
		if c != ends[t] {
			uncommitted += ends[t] - c
		}
		keys, lost := s3Objects(srv, key+"/"+t)
		markers += int64(len(lost))
		seen := offsetsIn(srv, keys)
		objects += int64(len(keys))
		total += ends[t]
		for o := int64(0); o < ends[t]; o++ {
			switch {
			case seen[o] == 0:
				missing++
			case seen[o] > 1:
				twice++
			}
		}
	}
	s.check(uncommitted == 0, "after the graceful stop every record is committed (%d not)", uncommitted)
	s.check(missing == 0 && twice == 0 && markers == 0, "%d records on 8 topics in %d objects: %d missing, %d in two objects, %d .lost markers",
		total, objects, missing, twice, markers)
}
