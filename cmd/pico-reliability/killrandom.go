package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/fleet"
)

// killPast waits until topic on addr holds at least n records, then up to
// pauseMs milliseconds more (at random), and kills r with SIGKILL.
func (s *suite) killPast(r *fleet.Runtime, addr, topic string, n int64, pauseMs int) {
	s.waitEnd(r, addr, topic, n, 30*time.Second)
	time.Sleep(time.Duration(s.rng.IntN(pauseMs)) * time.Millisecond)
	r.Kill()
}

// waitEnd waits until topic holds at least n records, failing after limit
// or when the runtime died.
func (s *suite) waitEnd(r *fleet.Runtime, addr, topic string, n int64, limit time.Duration) int64 {
	deadline := time.Now().Add(limit)
	for {
		e := endOffset(addr, topic)
		if e >= n {
			return e
		}
		if r != nil && !r.Alive() {
			mustf("pico-connectors exited while waiting for %d records on %s (at %d):\n%s", n, topic, e, r.Tail())
		}
		if time.Now().After(deadline) {
			mustf("%s has %d records, want %d, after %s\n%s", topic, e, n, limit, r.Tail())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// randomDef is a random source definition.
func randomDef(key, topic string, perBatch int, interval string) string {
	return fleet.SourceDef(key, "libpicomq_connector_random_source", topic, fmt.Sprintf(`records_per_batch = %d
interval = %q
payload_size = "64B"
key_shape = "sequence"
`, perBatch, interval))
}

// killPerBatch is the batch size of the random source the kill scenarios
// run: a duplicate is allowed only within the batch after a checkpoint.
const killPerBatch = 100

// numbersRT is a runtime on bootstrap (empty: its own embedded broker)
// running the random source "numbers" into topic, killPerBatch records a
// batch every millisecond, and the file where it keeps its checkpoint.
func (s *suite) numbersRT(bootstrap, topic string) (r *fleet.Runtime, statePath string) {
	r = s.newRT(bootstrap, "", map[string]string{"numbers.toml": randomDef("numbers", topic, killPerBatch, "1ms")})
	return r, filepath.Join(r.Dir, "state", "numbers.state")
}

func readSeq(path string) int64 {
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return 0
	}
	must(err)
	var st struct {
		NextSeq int64 `json:"next_seq"`
	}
	must(json.Unmarshal(b, &st))
	return st.NextSeq
}

// seqCheck reads the topic and checks that every sequence number below
// upTo is there, that each duplicate lies in an allowed window
// [cp, cp+perBatch) after a checkpoint, and returns counts.
func (s *suite) seqCheck(addr, topic string, upTo int64, checkpoints []int64, perBatch int64) {
	recs, err := readTopic(addr, topic)
	must(err)
	counts := map[int64]int{}
	for _, r := range recs {
		var p struct {
			Seq *int64 `json:"seq"`
		}
		if json.Unmarshal(r.Value, &p) != nil || p.Seq == nil {
			s.check(false, "offset %d has a payload without seq: %.80q", r.Offset, r.Value)
			return
		}
		counts[*p.Seq]++
	}
	missing, dups, outside := 0, 0, 0
	var firstMissing, firstOutside int64 = -1, -1
	for seq := int64(0); seq < upTo; seq++ {
		if counts[seq] == 0 {
			missing++
			if firstMissing < 0 {
				firstMissing = seq
			}
		}
	}
	for seq, c := range counts {
		if c < 2 {
			continue
		}
		dups += c - 1
		ok := checkpoints == nil // nil: duplicates allowed anywhere (nacked batches re-read)
		for _, cp := range checkpoints {
			if seq >= cp && seq < cp+perBatch*int64(c) {
				ok = true
			}
		}
		if !ok {
			outside++
			if firstOutside < 0 || seq < firstOutside {
				firstOutside = seq
			}
		}
	}
	s.check(missing == 0, "%d records read back; every acknowledged sequence 0..%d present (missing %d, first %d)", len(recs), upTo-1, missing, firstMissing)
	if checkpoints == nil {
		s.note("%d duplicates (batches produced again after a Nack, as the spec allows)", dups)
		return
	}
	s.check(outside == 0, "%d duplicates, all within the in-flight batch after a checkpoint (outside: %d, first %d)", dups, outside, firstOutside)
}

// killRandom kills the runtime running the random source at random
// points, then restarts it and stops it gracefully.
func (s *suite) killRandom() {
	b := startBroker()
	defer b.Close()
	const topic = "kill.random"
	r, statePath := s.numbersRT(b.Addr(), topic)
	kills := s.pick(10, 3)
	var checkpoints []int64
	var last int64
	for i := 0; i < kills; i++ {
		must(r.Run())
		s.killPast(r, b.Addr(), topic, last+int64(500+s.rng.IntN(3000)), 40)
		last = b.HighWatermark(topic)
		cp := readSeq(statePath)
		checkpoints = append(checkpoints, cp)
		s.inject("SIGKILL %d/%d with %d records on the topic, checkpoint next_seq=%d", i+1, kills, last, cp)
		if !s.check(cp > 0 && cp <= last, "checkpoint %d <= records on the topic %d", cp, last) {
			return
		}
	}
	must(r.Run())
	s.waitEnd(r, b.Addr(), topic, last+1000, 30*time.Second)
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	final := readSeq(statePath)
	s.note("final checkpoint next_seq=%d, %d records on the topic", final, b.HighWatermark(topic))
	s.seqCheck(b.Addr(), topic, final, checkpoints, killPerBatch)
}
