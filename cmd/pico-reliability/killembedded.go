package main

import (
	"os"
	"path/filepath"
	"regexp"
	"time"
)

// embeddedAddr is the embedded_address newRT wrote into the runtime config
// in dir.
func embeddedAddr(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "runtime.toml"))
	must(err)
	m := regexp.MustCompile(`(?m)^embedded_address = "([^"]+)"`).FindSubmatch(b)
	if m == nil {
		mustf("no embedded_address in %s", filepath.Join(dir, "runtime.toml"))
	}
	return string(m[1])
}

// killEmbedded runs the random source on the runtime's own embedded broker
// (persistent, in broker.data_dir by default) and SIGKILLs the whole process,
// broker included, at random points: after each restart the topic still
// holds every sequence number the checkpoint acknowledged, and after the
// last one every acknowledged number is read back, duplicates only from the
// batch in flight at each kill.
func (s *suite) killEmbedded() {
	const topic, perBatch = "kill.embedded", 100
	r := s.newRT("", "", map[string]string{"numbers.toml": randomDef("numbers", topic, perBatch, "1ms")})
	addr := embeddedAddr(r.dir)
	statePath := filepath.Join(r.dir, "state", "numbers.state")
	kills := s.pick(10, 3)
	var checkpoints []int64
	var cp int64
	for i := 0; i < kills; i++ {
		r.start()
		if i == 0 {
			// The embedded broker admits only clients that log in: the
			// runtime generated its password at the first start.
			loginAt(addr, filepath.Join(r.dir, "broker-data"))
		}
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
	r.start()
	end := endOffset(addr, topic)
	s.check(end >= cp, "last restart: the embedded broker holds %d records, checkpoint next_seq=%d", end, cp)
	s.seqCheck(addr, topic, cp, checkpoints, perBatch)
	err := r.term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	_, err = os.Stat(filepath.Join(r.dir, "broker-data"))
	s.check(err == nil, "the broker's data is in broker-data beside the runtime config (%v)", err)
}
