package definition

import (
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"time"
)

// Runtime modes (Runtime.Mode).
const (
	ModeStandalone  = "standalone"
	ModeDistributed = "distributed"
)

// Defaults of the fleet keys.
const (
	DefaultSessionTimeout = "10s"
	DefaultLeaseTopic     = "pico-connectors.leases"
	DefaultStateTopic     = "pico-connectors.state"
)

// Bounds of fleet.session_timeout. librdkafka refuses a session.timeout.ms
// above max.poll.interval.ms, MaxSessionTimeout by default (a
// max.poll.interval.ms in broker.properties moves the bound), and so does
// the embedded broker's group.max.session.timeout.ms.
const (
	MinSessionTimeout = time.Second
	MaxSessionTimeout = 5 * time.Minute
)

// runtimeIDPattern is what a group.instance.id and a topic name allow.
var runtimeIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,200}$`)

// validateFleet checks state.storage, mode, id and [fleet], and the keys
// they need together.
func (r *Runtime) validateFleet(d *decoder) {
	d.oneOf("state.storage", r.State.Storage, "file", "http", "broker")
	if r.Mode != "" {
		d.oneOf("mode", r.Mode, ModeStandalone, ModeDistributed)
	}
	if r.ID != "" && !runtimeIDPattern.MatchString(r.ID) {
		d.add("id", "%q%s is not a runtime id; use 1 to 200 letters, digits, '.', '_' or '-', such as \"connect-0\"", r.ID, d.origin("id"))
	}
	d.duration("fleet.session_timeout", r.Fleet.SessionTimeout)
	limit, why := MaxSessionTimeout, "max.poll.interval.ms, "+MaxSessionTimeout.String()+" by default"
	if v, ok := r.Broker.Properties["max.poll.interval.ms"]; ok {
		if ms, err := strconv.Atoi(v); err == nil && ms > 0 {
			limit, why = time.Duration(ms)*time.Millisecond, fmt.Sprintf(`broker.properties."max.poll.interval.ms" = %q`, v)
		}
	}
	if t, err := parseDuration(r.Fleet.SessionTimeout); r.Fleet.SessionTimeout != "" && err == nil && t < MinSessionTimeout {
		d.add("fleet.session_timeout", "%q%s is too short; use at least %s (brokers usually refuse less than 6s)", r.Fleet.SessionTimeout, d.origin("fleet.session_timeout"), MinSessionTimeout)
	} else if err == nil && t > limit {
		d.add("fleet.session_timeout", "%q%s is too long; use at most %s (librdkafka refuses a session.timeout.ms above max.poll.interval.ms: %s)", r.Fleet.SessionTimeout, d.origin("fleet.session_timeout"), limit, why)
	}
	for _, k := range []struct{ key, value string }{{"fleet.lease_topic", r.Fleet.LeaseTopic}, {"state.topic", r.State.Topic}} {
		if k.value != "" && !runtimeIDPattern.MatchString(k.value) {
			d.add(k.key, "%q%s is not a topic name; use letters, digits, '.', '_' or '-'", k.value, d.origin(k.key))
		}
	}
	if !r.Distributed() {
		return
	}
	if r.State.Storage != "broker" {
		d.add("state.storage", "%q%s cannot be used with mode = \"distributed\": a file or http store cannot fence a stale owner (a runtime paused past its session timeout would still save its older checkpoint over the new owner's); set state.storage = \"broker\", whose checkpoints are written in the same transaction as the records", r.State.Storage, d.origin("state.storage"))
	}
	if r.Broker.BootstrapServers == "" {
		d.add("broker.bootstrap_servers", "missing: mode = \"distributed\" needs a broker the runtimes share; an embedded broker belongs to one runtime")
	}
}

// Distributed reports whether mode = "distributed".
func (r Runtime) Distributed() bool { return r.Mode == ModeDistributed }

// RuntimeID is id, or HOSTNAME-PORT from http.address, or the host name
// alone when the address has no port.
func (r Runtime) RuntimeID() string {
	if r.ID != "" {
		return r.ID
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "pico-connectors"
	}
	if _, port, err := net.SplitHostPort(r.HTTP.Address); err == nil && port != "" {
		return host + "-" + port
	}
	return host
}

// SessionTimeoutDuration is session_timeout, or its default.
func (f Fleet) SessionTimeoutDuration() time.Duration {
	return mustDuration(f.SessionTimeout, DefaultSessionTimeout)
}

// LeaseTopicName is lease_topic, or its default.
func (f Fleet) LeaseTopicName() string {
	if f.LeaseTopic == "" {
		return DefaultLeaseTopic
	}
	return f.LeaseTopic
}

// MinSigningKey is the shortest state.signing_key accepted, in bytes.
const MinSigningKey = 32

// TopicPrefix is state.topic, or its default.
func (s State) TopicPrefix() string {
	if s.Topic == "" {
		return DefaultStateTopic
	}
	return s.Topic
}
