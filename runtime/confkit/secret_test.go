package confkit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

func TestSecretNeverPrints(t *testing.T) {
	const value = "hunter2-very-secret"
	s := NewSecret(value)
	type holder struct {
		Name   string
		Secret Secret
		Ptr    *Secret
	}
	h := holder{Name: "x", Secret: s, Ptr: &s}
	var outs []string
	for _, verb := range []string{"%v", "%+v", "%#v", "%s", "%q", "%x", "%X", "%d", "%10s", "%-8v"} {
		outs = append(outs, fmt.Sprintf(verb, s), fmt.Sprintf(verb, h), fmt.Sprintf(verb, &h))
	}
	outs = append(outs, s.String(), fmt.Sprint(s), fmt.Sprintln(h))
	j, _ := json.Marshal(h)
	outs = append(outs, string(j))
	txt, _ := s.MarshalText()
	outs = append(outs, string(txt))
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("m", "secret", s, "h", h)
	slog.New(slog.NewTextHandler(&buf, nil)).Info("m", "secret", s)
	outs = append(outs, buf.String())
	for _, o := range outs {
		if strings.Contains(o, value) || strings.Contains(o, "hunter") {
			t.Errorf("secret leaked: %s", o)
		}
	}
	if !strings.Contains(fmt.Sprintf("%v", s), Mask) || !strings.Contains(string(j), Mask) || !strings.Contains(buf.String(), Mask) {
		t.Errorf("mask missing: %v %s %s", s, j, buf.String())
	}
	if s.Reveal() != value || !s.IsSet() {
		t.Fatal("Reveal")
	}
	if NewSecret("").String() != "" || NewSecret("").IsSet() {
		t.Fatal("empty secret")
	}
	if got := fmt.Sprintf("%#v", s); got != `confkit.Secret("****")` {
		t.Fatalf("%%#v = %s", got)
	}
}
