package procstat

import (
	"os"
	"testing"
	"time"
)

// TestCPUSecondsCountsWork burns CPU for 200 ms and checks that this
// process's CPU time grew by about as much, read as pid 0 and as its pid.
func TestCPUSecondsCountsWork(t *testing.T) {
	before, err := CPUSeconds(0)
	if err != nil {
		t.Fatal(err)
	}
	x := 0
	for end := time.Now().Add(200 * time.Millisecond); time.Now().Before(end); {
		x++
	}
	_ = x
	after, err := CPUSeconds(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if d := after - before; d < 0.1 || d > 5 {
		t.Errorf("CPU time grew by %.2f s over 200 ms of work; want about 0.2 s", d)
	}
	if _, err := CPUSeconds(-1); err == nil {
		t.Error("CPUSeconds(-1) returned no error")
	}
}
