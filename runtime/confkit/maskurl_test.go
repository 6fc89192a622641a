package confkit

import (
	"strings"
	"testing"
)

func TestMaskURL(t *testing.T) {
	for in, want := range map[string]string{
		"https://state.example/s":                         "https://state.example/s",
		"https://u:pw-CANARY@state.example/s":             "https://****@state.example/s",
		"https://tok-CANARY@state.example/s":              "https://****@state.example/s",
		"https://state.example/s?token=CANARY&x=1":        "https://state.example/s?token=****&x=****",
		"https://u:pw-CANARY@host:bad-port/s":             "****",
		"http://u:pw-CANARY@[::1/s?token=CANARY":          "****",
		"postgres://app:CANARY@db:5432/x?sslmode=disable": "postgres://****@db:5432/x?sslmode=****",
		"not a url, not even one with ://":                "not a url, not even one with ://",
	} {
		if got := MaskURL(in); got != want {
			t.Errorf("MaskURL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestMaskURLs(t *testing.T) {
	msg := `save state of src at https://u:CANARY@state.example/s/src: Put "https://state.example/s/src?sig=CANARY": EOF; broker at 127.0.0.1:9092`
	got := MaskURLs(msg)
	if strings.Contains(got, "CANARY") {
		t.Fatalf("MaskURLs left a secret: %s", got)
	}
	want := `save state of src at https://****@state.example/s/src: Put "https://state.example/s/src?sig=****": EOF; broker at 127.0.0.1:9092`
	if got != want {
		t.Fatalf("MaskURLs = %s\nwant        %s", got, want)
	}
}
