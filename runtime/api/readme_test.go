package api

import (
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/status"
)

// TestReadmeDocumentsEveryField keeps README.md in step with the JSON the
// API writes: every field of Entry, Counters, Health, Readiness and Error is listed.
func TestReadmeDocumentsEveryField(t *testing.T) {
	b, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, v := range []any{Entry{}, status.Figures{}, Health{}, Count{}, Readiness{}, NotReady{}, Error{}} {
		typ := reflect.TypeOf(v)
		for i := 0; i < typ.NumField(); i++ {
			name, _, _ := strings.Cut(typ.Field(i).Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !strings.Contains(doc, "`"+name+"`") {
				t.Errorf("README.md does not document the %s field %q", typ.Name(), name)
			}
		}
	}
	for _, route := range []string{"/health", "/ready", "/sources", "/sources/{key}", "/sources/{key}/config", "/sources/{key}/restart",
		"/sinks", "/sinks/{key}", "/sinks/{key}/config", "/sinks/{key}/restart", "/metrics"} {
		if !strings.Contains(doc, "`"+route+"`") {
			t.Errorf("README.md does not list the route %s", route)
		}
	}
}
