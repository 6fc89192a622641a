package main

import (
	"time"
)

// soak runs the random source into the broker and the S3 sink out of it
// for a bounded time and samples the runtime's RSS (/proc/<pid>/status)
// and goroutine count (go_goroutines on /metrics).
func (s *suite) soak() {
	srv := s.startS3()
	b := startBroker()
	defer b.Close()
	const topic = "soak.numbers"
	sink := s3Def("soaks3", topic, srv.Endpoint, srv, 1, "") // rotation overridden below
	sink = replaceLine(sink, "file_rotation = ", `file_rotation = "size"`)
	sink = replaceLine(sink, "max_messages_per_file = ", `max_file_size = "1MiB"`)
	sink = replaceLine(sink, "batch_length = ", "batch_length = 1000")
	r := s.newRT(b.Addr(), "", map[string]string{
		"numbers.toml": randomDef("soaksrc", topic, 200, "20ms"),
		"s3.toml":      sink,
	})
	dur := time.Duration(s.pick(180, 30)) * time.Second
	every := time.Duration(s.pick(10, 3)) * time.Second
	must(r.Run())
	s.inject("random source (200 records every 20 ms) -> broker -> S3 sink (1 MiB files) for %s, sampling every %s", dur, every)
	type sample struct {
		at        time.Duration
		rss, gor  int64
		prod, con int64
	}
	var samples []sample
	sampleRuntime(r, time.Now(), dur, every, func(at time.Duration, rss, g int64) {
		src, _ := r.Entry("source", "soaksrc")
		snk, _ := r.Entry("sink", "soaks3")
		if src.Status != "Running" || snk.Status != "Running" {
			s.check(false, "statuses at %s: source %s (%s), sink %s (%s)", at, src.Status, src.LastError, snk.Status, snk.LastError)
		}
		samples = append(samples, sample{at, rss, g, src.Counters.Produced, snk.Counters.Consumed})
		s.note("t=%-5s RSS %6.1f MiB  goroutines %4d  produced %8d  consumed %8d", at, float64(rss)/1024, g, src.Counters.Produced, snk.Counters.Consumed)
	})
	err := r.Term(30 * time.Second)
	s.check(err == nil, "SIGTERM: clean exit (%v)", err)
	if len(samples) < 3 {
		mustf("only %d samples", len(samples))
	}
	// The first sample is warm-up (librdkafka buffers, first files);
	// flat means the end is not above the early level plus a margin.
	base := samples[1]
	last := samples[len(samples)-1]
	var maxRSS, maxG int64
	for _, x := range samples {
		maxRSS, maxG = max(maxRSS, x.rss), max(maxG, x.gor)
	}
	rssLimit := max(base.rss*13/10, base.rss+32*1024)
	s.check(last.rss <= rssLimit, "RSS flat: first %.1f MiB, after warm-up %.1f MiB, last %.1f MiB, max %.1f MiB (limit %.1f MiB)",
		float64(samples[0].rss)/1024, float64(base.rss)/1024, float64(last.rss)/1024, float64(maxRSS)/1024, float64(rssLimit)/1024)
	s.check(last.gor <= base.gor+10, "goroutines flat: first %d, after warm-up %d, last %d, max %d", samples[0].gor, base.gor, last.gor, maxG)
	lag := last.prod - last.con
	s.check(last.prod > base.prod && last.con > base.con && lag < last.prod/4+5000,
		"records kept flowing: %d produced, %d consumed by the sink (lag %d) in %s", last.prod, last.con, lag, dur)
	keys, lost := s3Objects(srv, "soaks3")
	s.check(len(keys) > 0 && len(lost) == 0, "%d objects uploaded, %d .lost markers", len(keys), len(lost))
}

// replaceLine replaces the first line starting with prefix.
func replaceLine(doc, prefix, line string) string {
	out := ""
	done := false
	for _, l := range splitLines(doc) {
		if !done && len(l) >= len(prefix) && l[:len(prefix)] == prefix {
			l, done = line, true
		}
		out += l + "\n"
	}
	if !done {
		mustf("no line %q in definition", prefix)
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}
