package definition

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// TestRedactedShowsEveryKey: the config view holds every key of the
// runtime config (mode, id, broker.data_dir and the fleet keys were left
// out of a hand-written list), with its value, and no secret.
func TestRedactedShowsEveryKey(t *testing.T) {
	r := Runtime{Mode: ModeDistributed, ID: "rt-a", ShutdownGrace: "9s"}
	r.Broker.DataDir, r.Broker.Properties = "bd", map[string]string{"sasl.password": "pw-CANARY", "linger.ms": "3"}
	r.Fleet.SessionTimeout, r.Fleet.LeaseTopic = "7s", "leases"
	r.State.Topic, r.State.HTTP.URL, r.State.HTTP.APIKey = "ckpt", "https://u:url-CANARY@state.example/s", confkit.NewSecret("key-CANARY")
	r.HTTP.APIKey = confkit.NewSecret("api-CANARY")
	red := r.Redacted()
	for path, want := range map[string]any{
		"mode": ModeDistributed, "id": "rt-a", "shutdown_grace": "9s", "broker.data_dir": "bd", "broker.embedded_address": "",
		"fleet.session_timeout": "7s", "fleet.lease_topic": "leases", "state.topic": "ckpt", "state.http.max_attempts": 0,
		"state.http.url": "https://****@state.example/s", "state.http.api_key": confkit.Mask, "http.api_key": confkit.Mask, "http.tls_key": "",
	} {
		var v any = red
		for _, k := range strings.Split(path, ".") {
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("%s: not a table at %s", path, k)
			}
			if v, ok = m[k]; !ok {
				t.Fatalf("%s missing from %v", path, red)
			}
		}
		if v != want {
			t.Errorf("%s = %#v, want %#v", path, v, want)
		}
	}
	if props := red["broker"].(map[string]any)["properties"].(map[string]string); props["sasl.password"] != confkit.Mask || props["linger.ms"] != "3" {
		t.Errorf("broker.properties = %v", props)
	}
	if s := fmt.Sprint(red); strings.Contains(s, "CANARY") {
		t.Errorf("a secret is in the view: %s", s)
	}
	if got := confkit.MaskURL("http://u:p w@h/%zz"); got != confkit.Mask {
		t.Errorf("a URL with user info that does not parse shows %q", got)
	}
	if got := confkit.MaskURL("https://tok-CANARY@state.example/s"); strings.Contains(got, "CANARY") || !strings.Contains(got, "state.example/s") {
		t.Errorf("a URL with a token as its user shows %q", got)
	}
	// Every key of the file (every toml tag of Runtime) is in the view.
	var walk func(prefix string, t reflect.Type)
	var keys []string
	walk = func(prefix string, typ reflect.Type) {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
			if name == "" || name == "-" {
				continue
			}
			if f.Type.Kind() == reflect.Struct {
				walk(prefix+name+".", f.Type)
				continue
			}
			keys = append(keys, prefix+name)
		}
	}
	walk("", reflect.TypeFor[Runtime]())
	if len(keys) < 20 {
		t.Fatalf("only %d keys found in Runtime: %v", len(keys), keys)
	}
	for _, path := range keys {
		var v any = red
		for _, k := range strings.Split(path, ".") {
			m, _ := v.(map[string]any)
			var ok bool
			if v, ok = m[k]; !ok {
				t.Errorf("%s missing from the view", path)
			}
		}
	}
}

// TestRedactedMasksWhatItCannotShow: a field of a kind the view does not
// know (a map of lists) is masked, not shown raw.
func TestRedactedMasksWhatItCannotShow(t *testing.T) {
	type future struct {
		Hosts map[string][]string `toml:"hosts"`
		Port  int                 `toml:"port"`
	}
	got := redactStruct(reflect.ValueOf(future{Hosts: map[string][]string{"a": {"h-CANARY"}}, Port: 9}))
	if got["hosts"] != confkit.Mask || got["port"] != 9 {
		t.Errorf("view = %v; want hosts masked and port shown", got)
	}
}
