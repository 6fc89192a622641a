package defaults

import (
	"testing"
	"time"
)

func TestPositive(t *testing.T) {
	for _, c := range []struct{ v, want time.Duration }{{0, time.Second}, {-time.Millisecond, time.Second}, {time.Millisecond, time.Millisecond}} {
		if got := Positive(c.v, time.Second); got != c.want {
			t.Errorf("Positive(%v, 1s) = %v, want %v", c.v, got, c.want)
		}
	}
	if got := Positive(-3, 30); got != 30 {
		t.Errorf("Positive(-3, 30) = %d, want 30", got)
	}
	if got := Positive(7, 30); got != 7 {
		t.Errorf("Positive(7, 30) = %d, want 7", got)
	}
}
