package definition

import (
	"fmt"
	"strings"
	"testing"
)

// TestEmbeddedBrokerBind: the embedded broker beyond loopback needs
// broker.embedded_password; the message names the key, the value, the
// environment variable and what is allowed, and never shows the password.
func TestEmbeddedBrokerBind(t *testing.T) {
	const pw = "s3cret-s3cret-s3cret"
	for _, tc := range []struct {
		body string
		env  map[string]string
		key  string
		want string
	}{
		{"[broker]\nembedded_address = \"0.0.0.0:9092\"\n", nil, "broker.embedded_address",
			`"0.0.0.0:9092" listens beyond loopback, where anyone who reaches it could use the broker; set broker.embedded_password (or PICOMQ_CONNECTORS_BROKER_EMBEDDED_PASSWORD, at least 12 characters) so that every client must log in, or listen on 127.0.0.1`},
		{"[broker]\nembedded_address = \":9092\"\n", nil, "broker.embedded_address", "listens beyond loopback"},
		{"", map[string]string{"PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS": "10.0.0.5:9092"}, "broker.embedded_address",
			`"10.0.0.5:9092" (from environment variable PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS) listens beyond loopback`},
		{"[broker]\nembedded_address = \"broker.example:9092\"\n", nil, "broker.embedded_address", "listens beyond loopback"},
		{"[broker]\nembedded_password = \"short\"\n", nil, "broker.embedded_password", "has 5 characters; use at least 12 (the value is not shown: it is a secret)"},
		{"", map[string]string{"PICOMQ_CONNECTORS_BROKER_EMBEDDED_PASSWORD": "tiny"}, "broker.embedded_password",
			"has 4 characters (from environment variable PICOMQ_CONNECTORS_BROKER_EMBEDDED_PASSWORD); use at least 12"},
	} {
		_, ps := loadRuntime(t, tc.body, tc.env)
		found := false
		for _, p := range ps {
			if p.Key == tc.key && strings.Contains(p.Error(), tc.want) {
				found = true
			}
			if strings.Contains(p.Error(), "short") || strings.Contains(p.Error(), "tiny") {
				t.Errorf("the password is in %q", p.Error())
			}
		}
		if !found {
			t.Errorf("%q %v: problems %v, want %s: %s", tc.body, tc.env, ps, tc.key, tc.want)
		}
	}
	for _, body := range []string{
		"",
		"[broker]\nembedded_address = \"127.0.0.1:9092\"\n",
		"[broker]\nembedded_address = \"localhost:9092\"\n",
		"[broker]\nembedded_address = \"[::1]:9092\"\n",
		fmt.Sprintf("[broker]\nembedded_address = \"0.0.0.0:9092\"\nembedded_password = %q\n", pw),
		"[broker]\nbootstrap_servers = \"kafka:9092\"\nembedded_address = \"0.0.0.0:9092\"\n",
	} {
		cfg, ps := loadRuntime(t, body, nil)
		if len(ps) > 0 {
			t.Errorf("%q: %v", body, ps)
			continue
		}
		if strings.Contains(fmt.Sprint(cfg.Runtime.Redacted()), pw) {
			t.Errorf("the config view shows broker.embedded_password: %v", cfg.Runtime.Redacted())
		}
	}
}
