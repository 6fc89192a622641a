package confkit

import (
	"strings"
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	good := map[string]time.Duration{"100ms": 100 * time.Millisecond, "1s": time.Second, "1m30s": 90 * time.Second, "0": 0, " 2h ": 2 * time.Hour}
	for in, want := range good {
		if got, err := ParseDuration(in); err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	bad := map[string]string{"": "empty", "-1s": "must not be negative", "10": "missing unit", "abc": "such as 100ms", "999999999999h": "too large", "1.5.5s": "such as 100ms", ".s": "such as 100ms", "1x": "such as 100ms"}
	for in, want := range bad {
		if _, err := ParseDuration(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseDuration(%q) error = %v; want %q", in, err, want)
		}
	}
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"100ms", "1s", "1m30s", "-1s", "0", "1.5h", "10"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err != nil {
			return
		}
		if d < 0 {
			t.Fatalf("negative %v from %q", d, s)
		}
		back, err := ParseDuration(d.String())
		if err != nil || back != d {
			t.Fatalf("round trip %q: %v, %v", s, back, err)
		}
	})
}
