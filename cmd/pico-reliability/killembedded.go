package main

import (
	"os"
	"path/filepath"
	"time"
)

// killEmbedded runs the random source on the runtime's own embedded broker
// (persistent, in broker.data_dir by default) and SIGKILLs the whole process,
// broker included, at random points: after each restart the topic still
// holds every sequence number the checkpoint acknowledged, and after the
// last one every acknowledged number is read back, duplicates only from the
// batch in flight at each kill.
func (s *suite) killEmbedded() {
	const topic = "kill.embedded"
	r, statePath := s.numbersRT("", topic)
	addr := r.Addr
	kills := s.pick(10, 3)
	var checkpoints []int64
	var cp int64
	for i := 0; i < kills; i++ {
		must(r.Run())
		if i > 0 {
			end := endOffset(addr, topic)
			if !s.check(end >= cp, "restart %d: the embedded broker still holds %d records, checkpoint next_seq=%d", i, end, cp) {
				return
			}
		}
		s.killPast(r, addr, topic, cp+int64(500+s.rng.IntN(3000)), 40)
		cp = readSeq(statePath)
		checkpoints = append(checkpoints, cp)
		s.inject("SIGKILL %d/%d of the runtime and its embedded broker, checkpoint next_seq=%d", i+1, kills, cp)
	}
	must(r.Run())
	end := endOffset(addr, topic)
	s.check(end >= cp, "last restart: the embedded broker holds %d records, checkpoint next_seq=%d", end, cp)
	s.seqCheck(addr, topic, cp, checkpoints, killPerBatch)
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	_, err = os.Stat(filepath.Join(r.Dir, "broker-data"))
	s.check(err == nil, "the broker's data is in broker-data beside the runtime config (%v)", err)
}
