package supervisor

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
)

// startEmbedded starts the embedded broker (no bootstrap_servers). Every
// client must log in: the runtime's own with broker.embedded_password or a
// generated one (clientProps), other users may only produce and consume
// the topics the definitions name (definitionTopics).
func (s *Supervisor) startEmbedded() error {
	rb := s.cfg.Runtime.Broker
	dir := s.cfg.BrokerDataDir()
	if dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("broker.data_dir %q: create the embedded broker's folder: %w", rb.DataDir, err)
		}
	}
	password, generated := rb.EmbeddedPassword.Reveal(), false
	if password == "" {
		var err error
		if password, err = broker.GeneratedPassword(dir); err != nil {
			return fmt.Errorf("broker.embedded_password is not set and no password could be generated in broker.data_dir %q: %w", rb.DataDir, err)
		}
		generated = true
	}
	var defs []*definition.Definition
	for _, c := range s.order {
		defs = append(defs, c.def)
	}
	topics, prefixes := definitionTopics(defs)
	// Other clients keep auto-creation, as on a default Kafka broker;
	// the sources' producers ask for it only with create_topics.
	b, err := broker.Start(broker.Config{Address: rb.EmbeddedAddress, AutoCreateTopics: true, DataDir: dir,
		Password: password, Topics: topics, TopicPrefixes: prefixes, Logger: s.log})
	if err != nil {
		return fmt.Errorf("start the embedded broker (set [broker] bootstrap_servers to use an existing one): %w", err)
	}
	s.broker = b
	s.bootstrap = b.Addr()
	props := maps.Clone(rb.Properties)
	if props == nil {
		props = map[string]string{}
	}
	maps.Copy(props, b.ClientProperties())
	s.clientProps = props
	where, login := dir, "broker.embedded_password"
	if where == "" {
		where = "memory only"
	}
	if generated {
		login = "generated, in " + broker.PasswordFile + " of the data dir"
		if dir == "" {
			login = "generated, kept in memory"
		}
	}
	s.log.Info("embedded broker started", "address", rb.EmbeddedAddress, "clients_connect_to", b.Addr(), "data_dir", where,
		"sasl", "SCRAM-SHA-256 user "+broker.User, "password", login, "open_topics", strings.Join(append(slices.Clone(topics), prefixesShown(prefixes)...), ","))
	return nil
}

func prefixesShown(prefixes []string) []string {
	out := make([]string, len(prefixes))
	for i, p := range prefixes {
		out[i] = p + "*"
	}
	return out
}

// definitionTopics lists what the definitions name: literal topics, dead
// letter topics and routing fallbacks; routing templates up to their first
// {, and sink patterns up to their first metacharacter, as prefixes. A
// pattern with no literal prefix (such as .*) names no topic.
func definitionTopics(defs []*definition.Definition) (topics, prefixes []string) {
	add := func(list *[]string, name string) {
		if name != "" && !slices.Contains(*list, name) {
			*list = append(*list, name)
		}
	}
	for _, d := range defs {
		for _, t := range d.Topics {
			add(&topics, t.Topic.Literal)
			add(&topics, t.Topic.Fallback)
			add(&topics, t.DeadLetterTopic)
			if tpl := t.Topic.Template; tpl != "" {
				if i := strings.Index(tpl, "{"); i > 0 {
					add(&prefixes, tpl[:i])
				} else if i < 0 {
					add(&topics, tpl)
				}
			}
			if t.Pattern != "" {
				re, err := regexp.Compile(t.Pattern)
				if err != nil {
					continue
				}
				prefix, complete := re.LiteralPrefix()
				if complete {
					add(&topics, prefix)
				} else {
					add(&prefixes, prefix)
				}
			}
		}
	}
	slices.Sort(topics)
	slices.Sort(prefixes)
	return topics, prefixes
}
