package cli

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/definition"
)

// TestLogMasksURLs: the runtime's logger masks the user information and
// query values of a URL in a message, a text value or an error, in both
// formats, so a client error that quotes its URL shows no token.
func TestLogMasksURLs(t *testing.T) {
	for _, format := range []string{"text", "json"} {
		var out bytes.Buffer
		log := newLogger(&out, definition.Log{Format: format, Level: "info"})
		log.Info("GET https://tok-CANARY@state.example/s failed", "url", "https://u:pw-CANARY@state.example/s?sig=CANARY",
			"error", errors.New(`Put "https://state.example/s?token=CANARY": EOF`), "endpoint", "http://127.0.0.1:9000")
		got := out.String()
		if strings.Contains(got, "CANARY") {
			t.Errorf("%s log shows a secret: %s", format, got)
		}
		for _, want := range []string{"state.example/s", "http://127.0.0.1:9000"} {
			if !strings.Contains(got, want) {
				t.Errorf("%s log lost %q: %s", format, want, got)
			}
		}
	}
}
