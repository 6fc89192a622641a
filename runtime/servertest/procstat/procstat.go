// Package procstat reads a process's memory figures from Linux's
// /proc/<pid>/status, for the tests, benchmarks and reliability scenarios
// that bound a connector's resident memory, and its CPU time from
// /proc/<pid>/stat, for the benchmarks that count what a record costs.
package procstat

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// KiB returns one "Name:  N kB" field of /proc/<pid>/status, such as VmRSS
// (resident now) or VmHWM (peak resident), in KiB. pid 0 means this process.
func KiB(pid int, field string) (int64, error) {
	p := name(pid)
	b, err := os.ReadFile("/proc/" + p + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%s/status", field, p)
}

// CPUSeconds returns the CPU time, user and system, that process pid has
// spent so far, in seconds. pid 0 means this process. Unlike a rate, it
// does not depend on what else the machine runs.
func CPUSeconds(pid int) (float64, error) {
	p := name(pid)
	b, err := os.ReadFile("/proc/" + p + "/stat")
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses and may
	// hold spaces; utime and stime are the 12th and 13th of them.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%s/stat has %d fields after the command name, want at least 13", p, len(f))
	}
	var ticks float64
	for _, v := range f[11:13] {
		n, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc/%s/stat: %w", p, err)
		}
		ticks += n
	}
	return ticks / 100, nil // USER_HZ, 100 on Linux
}

// name is pid's folder under /proc.
func name(pid int) string {
	if pid == 0 {
		return "self"
	}
	return strconv.Itoa(pid)
}
