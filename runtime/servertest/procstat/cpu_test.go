package procstat

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// TestCPUSecondsCountsWork burns CPU until this process's CPU time, read as
// pid 0 before and as its pid after, grew by 0.1 s, and checks that the
// growth is no more than the wall time on every CPU.
func TestCPUSecondsCountsWork(t *testing.T) {
	before, err := CPUSeconds(0)
	if err != nil {
		t.Fatal(err)
	}
	// Spin until the reading grows by 0.1 s (its clock ticks every 10 ms),
	// not for a wall-clock time: on a loaded machine 200 ms of wall time
	// may hold far less CPU time. The growth cannot exceed the wall time
	// on every CPU.
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	var after float64
	for x := 0; ; x++ {
		if x%100000 == 0 {
			if after, err = CPUSeconds(os.Getpid()); err != nil {
				t.Fatal(err)
			}
			if after-before >= 0.1 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("CPU time grew by %.2f s over 30 s of spinning; want 0.1 s", after-before)
			}
		}
	}
	if d, most := after-before, time.Since(start).Seconds()*float64(runtime.NumCPU())+0.05; d > most {
		t.Errorf("CPU time grew by %.2f s in %.2f s of wall time on %d CPUs", d, time.Since(start).Seconds(), runtime.NumCPU())
	}
	if _, err := CPUSeconds(-1); err == nil {
		t.Error("CPUSeconds(-1) returned no error")
	}
}
