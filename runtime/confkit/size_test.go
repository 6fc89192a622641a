package confkit

import (
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	tests := []struct {
		in   string
		want Size
	}{
		{"0", 0},
		{"4096", 4096},
		{"4096B", 4096},
		{"1KB", 1000},
		{"10MB", 10_000_000},
		{"2GB", 2_000_000_000},
		{"1TB", 1_000_000_000_000},
		{"1KiB", 1024},
		{"8MiB", 8 << 20},
		{"5GiB", 5 << 30},
		{"1TiB", 1 << 40},
		{"8 MiB", 8 << 20},
		{" 8mib ", 8 << 20},
		{"1.5KiB", 1536},
		{"0.5GiB", 512 << 20},
		{"+3B", 3},
		{"8388608", 8 << 20},
	}
	for _, tt := range tests {
		got, err := ParseSize(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty size"},
		{"-1", "must not be negative"},
		{"-8MiB", "must not be negative"},
		{"8XB", `unknown unit "XB"`},
		{"abc", "unknown unit"},
		{"MiB", "use a number"},
		{"1.2.3KB", "use a number"},
		{"1.5B", "whole number of bytes"},
		{"9223372036854775808", "too large"},
		{"9000000TiB", "too large"},
		{"99999999999999999999.5TiB", "too large"},
		{".", "use a number"},
	}
	for _, tt := range tests {
		_, err := ParseSize(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseSize(%q) error = %v; want it to contain %q", tt.in, err, tt.want)
		}
	}
}

func TestSizeString(t *testing.T) {
	tests := []struct {
		in   Size
		want string
	}{
		{0, "0B"},
		{1, "1B"},
		{1000, "1KB"},
		{1024, "1KiB"},
		{1536, "1536B"},
		{8 << 20, "8MiB"},
		{10_000_000, "10MB"},
		{5 << 30, "5GiB"},
		{1024000, "1024KB"}, {1000 * 1024, "1024KB"},
		{3 << 40, "3TiB"},
		{-5, "-5B"},
	}
	for _, tt := range tests {
		if got := tt.in.String(); got != tt.want {
			t.Errorf("Size(%d).String() = %q; want %q", int64(tt.in), got, tt.want)
		}
		if tt.in >= 0 {
			back, err := ParseSize(tt.in.String())
			if err != nil || back != tt.in {
				t.Errorf("round trip of %d: %d, %v", int64(tt.in), back, err)
			}
		}
	}
}

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"8MiB", "10MB", "0", "1.5KiB", "-1", "9223372036854775807", "1e3", " 3 gib"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseSize(s)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		if v < 0 {
			t.Fatalf("ParseSize(%q) = %d, negative", s, v)
		}
		back, err := ParseSize(v.String())
		if err != nil || back != v {
			t.Fatalf("round trip %q -> %d -> %q -> %d, %v", s, v, v.String(), back, err)
		}
	})
}
