package definition

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

func loadRuntime(t *testing.T, body string, env map[string]string) (*Config, confkit.Problems) {
	t.Helper()
	path := writeFiles(t, map[string]string{"runtime.toml": body, "connectors/.keep": ""})
	cfg, err := Load(path, env)
	var ps confkit.Problems
	if err != nil && !errors.As(err, &ps) {
		t.Fatalf("Load: %v", err)
	}
	return cfg, ps
}

func TestFleetDistributedGood(t *testing.T) {
	cfg, ps := loadRuntime(t, "mode = \"distributed\"\n[broker]\nbootstrap_servers = \"b:9092\"\n[state]\nstorage = \"broker\"\n[fleet]\nsession_timeout = \"7s\"\n",
		map[string]string{"PICOMQ_CONNECTORS_ID": "connect-1"})
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	r := cfg.Runtime
	if !r.Distributed() || r.RuntimeID() != "connect-1" || r.Fleet.SessionTimeoutDuration() != 7*time.Second ||
		r.Fleet.LeaseTopicName() != DefaultLeaseTopic || r.State.TopicPrefix() != DefaultStateTopic {
		t.Fatalf("%+v", r)
	}
}

func TestFleetDefaults(t *testing.T) {
	cfg, ps := loadRuntime(t, "[http]\naddress = \"127.0.0.1:8099\"\n", nil)
	if len(ps) > 0 {
		t.Fatal(ps)
	}
	r := cfg.Runtime
	host, _ := os.Hostname()
	if r.Distributed() || r.RuntimeID() != host+"-8099" || r.Fleet.SessionTimeoutDuration() != 10*time.Second {
		t.Fatalf("distributed %v, id %q, session %v", r.Distributed(), r.RuntimeID(), r.Fleet.SessionTimeoutDuration())
	}
}

func TestFleetProblems(t *testing.T) {
	for _, tc := range []struct {
		body string
		env  map[string]string
		key  string
		want string
	}{
		{"mode = \"distributed\"\n[broker]\nbootstrap_servers = \"b:1\"\n", nil, "state.storage", "cannot fence a stale owner"},
		{"mode = \"distributed\"\n[state]\nstorage = \"http\"\n[state.http]\nurl = \"http://x\"\n[broker]\nbootstrap_servers = \"b:1\"\n", nil, "state.storage", `"http" cannot be used with mode = "distributed"`},
		{"mode = \"distributed\"\n[state]\nstorage = \"broker\"\n", nil, "broker.bootstrap_servers", "embedded broker belongs to one runtime"},
		{"mode = \"fleet\"\n", nil, "mode", `use "standalone" or "distributed"`},
		{"", map[string]string{"PICOMQ_CONNECTORS_ID": "a b"}, "id", "(from environment variable PICOMQ_CONNECTORS_ID) is not a runtime id"},
		{"[fleet]\nsession_timeout = \"10\"\n", nil, "fleet.session_timeout", "not a duration"},
		{"[fleet]\nsession_timeout = \"999999999999h\"\n", nil, "fleet.session_timeout", "too long for a duration"},
		{"[fleet]\nsession_timeout = \"-5s\"\n", nil, "fleet.session_timeout", `"-5s" is negative`},
		{"[fleet]\nsession_timeout = \"10ms\"\n", nil, "fleet.session_timeout", "too short"},
		{"[fleet]\nsession_timeout = \"100000h\"\n", nil, "fleet.session_timeout", "too long; use at most 5m"},
		{"[fleet]\nsession_timeout = \"2m\"\n[broker.properties]\n\"max.poll.interval.ms\" = \"60000\"\n", nil, "fleet.session_timeout", `use at most 1m0s (librdkafka refuses a session.timeout.ms above max.poll.interval.ms: broker.properties."max.poll.interval.ms" = "60000")`},
		{"[state]\nstorage = \"kafka\"\n", nil, "state.storage", `"file" or "http" or "broker"`},
		{"[state]\ntopic = \"a/b\"\n", nil, "state.topic", "not a topic name"},
		{"mode = \"distributed\"\n[state]\nstorage = \"broker\"\n[broker]\nbootstrap_servers = \"b:1\"\n[broker.properties]\n\"session.timeout.ms\" = \"9000\"\n", nil, `broker.properties."session.timeout.ms"`, `set by the runtime for mode = "distributed"`},
		{"[state]\nstorage = \"broker\"\n[broker]\nbootstrap_servers = \"b:1\"\n[broker.properties]\n\"isolation.level\" = \"read_uncommitted\"\n", nil, `broker.properties."isolation.level"`, `set by the runtime for state.storage = "broker"`},
	} {
		_, ps := loadRuntime(t, tc.body, tc.env)
		found := false
		for _, p := range ps {
			if p.Key == tc.key && strings.Contains(p.Message, tc.want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%q: want %s: ...%s..., got %v", tc.body, tc.key, tc.want, ps)
		}
	}
}

func TestFleetSessionTimeoutFollowsMaxPollInterval(t *testing.T) {
	_, ps := loadRuntime(t, "[fleet]\nsession_timeout = \"8m\"\n[broker.properties]\n\"max.poll.interval.ms\" = \"600000\"\n", nil)
	if len(ps) > 0 {
		t.Fatalf("a session_timeout under broker.properties' max.poll.interval.ms refused: %v", ps)
	}
}

// A property reserved for two reasons is one problem, with the more
// specific reason.
func TestReservedPropertyReportedOnce(t *testing.T) {
	_, ps := loadRuntime(t, "mode = \"distributed\"\n[state]\nstorage = \"broker\"\n[broker]\nbootstrap_servers = \"b:1\"\n[broker.properties]\n\"group.id\" = \"g\"\n\"transactional.id\" = \"t\"\n", nil)
	want := map[string]string{
		`broker.properties."group.id"`:         `for mode = "distributed"`,
		`broker.properties."transactional.id"`: `for state.storage = "broker"`,
	}
	if len(ps) != len(want) {
		t.Fatalf("%d problems, want one per property: %v", len(ps), ps)
	}
	for _, p := range ps {
		if w, ok := want[p.Key]; !ok || !strings.Contains(p.Message, w) {
			t.Errorf("%s: %s; want the reason %s", p.Key, p.Message, w)
		}
	}
}
