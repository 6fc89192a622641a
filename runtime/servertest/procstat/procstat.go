// Package procstat reads a process's memory figures from Linux's
// /proc/<pid>/status, for the tests, benchmarks and reliability scenarios
// that bound a connector's resident memory.
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
	p := "self"
	if pid != 0 {
		p = strconv.Itoa(pid)
	}
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
