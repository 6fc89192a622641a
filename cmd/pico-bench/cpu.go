package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
)

// cpuSeconds returns the CPU time, user and system, spent so far by this
// process and by the processes of pids (a server the benchmark started).
// A CPU-bound pipeline's ceiling on this machine is its cores over the
// CPU seconds one record costs; the time a process spends does not depend
// on what else runs, so it tells what a rate alone cannot.
func cpuSeconds(pids ...int) float64 {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	total := float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		// The fields after the command name, which is in parentheses and
		// may hold spaces: utime and stime are the 12th and 13th.
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 13 {
			continue
		}
		for _, v := range f[11:13] {
			ticks, _ := strconv.ParseFloat(v, 64)
			total += ticks / 100 // USER_HZ, 100 on Linux
		}
	}
	return total
}
