package definition

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DefaultBrokerDataDir is where the embedded broker keeps its data unless
// broker.data_dir says otherwise, relative to the runtime config file.
const DefaultBrokerDataDir = "broker-data"

// MaxInFlight is the highest max.in.flight.requests.per.connection an
// idempotent producer keeps its ordering with.
const MaxInFlight = 5

// WeakensProducer says why setting a librdkafka property key to value would
// void the runtime's delivery promise (every producer runs with
// enable.idempotence=true and acks=all), or "" when it does not.
func WeakensProducer(key, value string) string {
	v := strings.ToLower(strings.TrimSpace(value))
	switch strings.ToLower(strings.TrimSpace(key)) {
	case "acks", "request.required.acks":
		if v == "all" || v == "-1" {
			return ""
		}
		return fmt.Sprintf("the runtime produces with acks=all so that a record is acknowledged only once the broker has it; %q could acknowledge a record the broker then loses; remove it or set \"all\"", value)
	case "enable.idempotence":
		if v == "true" || v == "t" || v == "1" {
			return ""
		}
		return fmt.Sprintf("the runtime produces with enable.idempotence=true so that a retried produce never duplicates or reorders records; %q turns that off; remove it", value)
	case "max.in.flight.requests.per.connection", "max.in.flight":
		n, err := strconv.Atoi(v)
		if err == nil && n >= 1 && n <= MaxInFlight {
			return ""
		}
		return fmt.Sprintf("%q: an idempotent producer keeps records in order only with 1 to %d requests in flight; remove it or set a number from 1 to %d", value, MaxInFlight, MaxInFlight)
	}
	return ""
}

// Properties the runtime sets on its clients, refused in every properties
// table: ReservedConsumer on a sink's consumer, ReservedProducer on the
// producers, and both in broker.properties, which every client takes.
// broker.properties also reaches the fleet's lease consumers (mode =
// "distributed"), which refuse ReservedLease, and the broker state store's
// producer and reader (state.storage = "broker"), which refuse
// ReservedStateStore.
var (
	ReservedConsumer   = []string{"bootstrap.servers", "group.id", "enable.auto.commit", "enable.auto.offset.store", "go.logs.channel.enable", "go.application.rebalance.enable"}
	ReservedProducer   = []string{"bootstrap.servers", "go.delivery.reports", "go.logs.channel.enable", "transactional.id"}
	ReservedLease      = []string{"group.id", "group.instance.id", "session.timeout.ms", "partition.assignment.strategy", "group.protocol"}
	ReservedStateStore = []string{"acks", "enable.idempotence", "transactional.id", "isolation.level"}
)

// A reservation is a list of properties the runtime sets, and why: a
// clause such as ` for mode = "distributed" (...)`, or "" for always.
type reservation struct {
	why   string
	names []string
}

// checkReserved adds one problem under key."NAME" for every property of
// props that a reservation holds, giving the first one's reason: list the
// most specific first.
func (d *decoder) checkReserved(key string, props map[string]string, rs ...reservation) {
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		for _, r := range rs {
			if slices.Contains(r.names, k) {
				path := key + "." + quoteKey(k)
				d.add(path, "is set by the runtime%s and cannot be overridden%s; remove it", r.why, d.origin(path))
				break
			}
		}
	}
}

// checkProducerProperties adds a problem under key.properties."NAME" for
// every property that would weaken the producers.
func (d *decoder) checkProducerProperties(key string, props map[string]string) {
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		path := key + "." + quoteKey(k)
		if msg := WeakensProducer(k, props[k]); msg != "" {
			d.add(path, "%s%s", msg, d.origin(path))
		}
	}
}

// BrokerDataDir is broker.data_dir resolved against the runtime config
// file's folder. Load fills in DefaultBrokerDataDir; an empty one (a Config
// built in code) keeps the embedded broker's data in memory only.
func (c *Config) BrokerDataDir() string {
	if c.Runtime.Broker.DataDir == "" {
		return ""
	}
	return resolveDir(c.File, c.Runtime.Broker.DataDir, DefaultBrokerDataDir)
}

// StateDir is state.path, the file store's folder, resolved against the
// runtime config file's folder (DefaultStatePath when empty).
func (c *Config) StateDir() string {
	return resolveDir(c.File, c.Runtime.State.Path, DefaultStatePath)
}

func resolveDir(file, dir, def string) string {
	if dir == "" {
		dir = def
	}
	if !filepath.IsAbs(dir) && file != "" {
		dir = filepath.Join(filepath.Dir(file), dir)
	}
	return dir
}

// checkFolder refuses a folder key (broker.data_dir, state.path) whose
// value cannot be a folder: blank, a file, or under one. def is the key's
// default, what names the folder's contents.
func (d *decoder) checkFolder(key, file, dir, def, what string) {
	if strings.TrimSpace(dir) == "" {
		d.add(key, "must not be blank; name a folder such as %q, or remove the key for the default", def)
		return
	}
	if strings.ContainsRune(dir, 0) {
		d.add(key, "contains a NUL byte%s; name a folder such as %q", d.origin(key), def)
		return
	}
	full := resolveDir(file, dir, def)
	for p := full; ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err == nil {
			if !fi.IsDir() {
				d.add(key, "%q%s: %s is a file, not a folder; name a folder for %s", dir, d.origin(key), p, what)
			}
			return
		}
		if parent := filepath.Dir(p); parent == p {
			return
		}
	}
}

// checkDeadLetterTopic refuses a dead_letter_topic that is not a topic
// name, or that the block itself writes to (sources) or reads (sinks):
// a sink reading its own dead letters would reject them again, forever.
func (t *Topics) checkDeadLetterTopic(d *decoder, key, typ string) {
	dl := t.DeadLetterTopic
	if !d.defined[key+".dead_letter_topic"] {
		return
	}
	k := key + ".dead_letter_topic"
	if msg := validTopicName(dl); msg != "" {
		d.add(k, "%q%s %s", dl, d.origin(k), msg)
		return
	}
	switch {
	case t.Topic.Literal == dl:
		if typ == "sink" {
			d.add(k, "%q is the topic this block consumes; the sink would read its own dead letters; name another topic, such as %q", dl, dl+".dlq")
		} else {
			d.add(k, "%q is the topic this block writes to; name another topic, such as %q", dl, dl+".dlq")
		}
	case typ == "sink" && t.Pattern != "":
		// librdkafka anchors a subscription pattern at the start only.
		pat := t.Pattern
		if !strings.HasPrefix(pat, "^") {
			pat = "^" + pat
		}
		if re, err := regexp.Compile(pat); err == nil {
			if re.MatchString(dl) {
				d.add(k, "%q matches this block's pattern %q, so the sink would read its own dead letters; name a topic the pattern does not match", dl, t.Pattern)
			}
		}
	case typ == "source" && t.Topic.IsRule() && t.Topic.Fallback == dl:
		d.add(k, "%q is also this block's topic.fallback; name another topic", dl)
	}
}
