package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/broker/clientconf"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/state"
	"github.com/picomq/pico-connectors/runtime/supervisor"
	"github.com/picomq/pico-connectors/sdk"
)

const checkUsage = `Usage:
  pico-connectors check --config FILE [KEY] [--json]
      Connect to what the runtime and its connectors need (the broker, the
      state store, each connector's own system) and report, connector by
      connector, every precondition: OK, or the problem and what to do.
      Exits 1 on any problem.
`

// checkTimeout bounds the checks of one connector, and those of the
// runtime.
const checkTimeout = 90 * time.Second

// brokerTimeout bounds the broker's metadata request.
const brokerTimeout = 5 * time.Second

// checkProbeKey is the state key the state store's check saves and
// removes; connector keys are checked not to use it.
const checkProbeKey = "pico_connectors_check_probe"

// checkRow is one line of check's report.
type checkRow struct {
	// Connector is sink/KEY, source/KEY or runtime.
	Connector string `json:"connector"`
	Check     string `json:"check"`
	OK        bool   `json:"ok"`
	Problem   string `json:"problem,omitempty"`
	Fix       string `json:"fix,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// checkCmd is pico-connectors check.
func checkCmd(args []string, stdout, stderr io.Writer, environ []string) int {
	path, asJSON, pos, ok := parseFlags("check", args, stderr, true)
	if !ok {
		fmt.Fprint(stderr, checkUsage)
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "pico-connectors check: one KEY at most, got %q\n%s", pos, checkUsage)
		return 2
	}
	cfg := loadChecked(path, environ, stdout, "%s has problems; nothing was checked (pico-connectors validate lists them):\n")
	if cfg == nil {
		return 1
	}
	defs := cfg.Connectors
	if len(pos) == 1 {
		d, err := findDefinition(cfg, pos[0])
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		// A connector named is checked, enabled or not.
		named := *d
		named.Enabled = true
		defs = []*definition.Definition{&named}
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	rows := checkRuntime(ctx, cfg, defs)
	cancel()
	for _, d := range defs {
		rows = append(rows, checkConnector(d)...)
	}
	rows = scrubRows(rows, cfg)
	failed := 0
	for _, r := range rows {
		if !r.OK {
			failed++
		}
	}
	if asJSON {
		b, _ := json.MarshalIndent(struct {
			OK     bool       `json:"ok"`
			Checks []checkRow `json:"checks"`
		}{failed == 0, rows}, "", "  ")
		fmt.Fprintf(stdout, "%s\n", b)
	} else {
		printCheckTable(stdout, rows, failed)
	}
	if failed > 0 {
		return 1
	}
	return 0
}

// printCheckTable writes the rows as a table, and a count.
func printCheckTable(w io.Writer, rows []checkRow, failed int) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CONNECTOR\tCHECK\tRESULT")
	for _, r := range rows {
		result := "OK"
		if r.Detail != "" {
			result += ": " + r.Detail
		}
		if !r.OK {
			result = "PROBLEM: " + r.Problem
			if r.Fix != "" {
				result += " -- to do: " + r.Fix
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", r.Connector, r.Check, result)
	}
	_ = tw.Flush()
	if failed == 0 {
		fmt.Fprintf(w, "every check passed (%d)\n", len(rows))
		return
	}
	noun := "problems"
	if failed == 1 {
		noun = "problem"
	}
	fmt.Fprintf(w, "%d %s found in %d checks\n", failed, noun, len(rows))
}

// scrubRows masks URLs' user information and removes the runtime's own
// secrets from every text, whatever a connector or a client put there.
func scrubRows(rows []checkRow, cfg *definition.Config) []checkRow {
	rt := cfg.Runtime
	var secrets []string
	for _, s := range []confkit.Secret{rt.Broker.EmbeddedPassword, rt.HTTP.APIKey, rt.State.SigningKey, rt.State.HTTP.APIKey} {
		if s.IsSet() {
			secrets = append(secrets, s.Reveal())
		}
	}
	scrub := func(s string) string {
		s = confkit.MaskURLs(s)
		for _, v := range secrets {
			s = strings.ReplaceAll(s, v, confkit.Secret{}.String())
		}
		return s
	}
	for i := range rows {
		rows[i].Problem, rows[i].Fix, rows[i].Detail = scrub(rows[i].Problem), scrub(rows[i].Fix), scrub(rows[i].Detail)
	}
	return rows
}

// checkConnector builds one connector, as run would, and runs its
// Checker. A disabled connector is not checked.
func checkConnector(d *definition.Definition) []checkRow {
	who := d.Type + "/" + d.Key
	row := func(c sdk.Check) checkRow {
		return checkRow{Connector: who, Check: c.Name, OK: c.OK(), Problem: c.Problem, Fix: c.Fix, Detail: c.Detail}
	}
	if !d.Enabled {
		return []checkRow{row(sdk.Passed("enabled", "disabled: not checked (name its key to check it)"))}
	}
	env := sdk.Env{Key: d.Key, Logger: slog.New(slog.DiscardHandler), Metrics: sdk.DiscardMetrics}
	var conn any
	var err error
	func() {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("the plugin panicked: %v", p)
			}
		}()
		switch r := d.Registration; {
		case d.Kind() == sdk.KindSink && r.NewSink != nil:
			conn, err = r.NewSink(d.Plugin, env)
		case d.Kind() == sdk.KindSource && r.NewSource != nil:
			conn, err = r.NewSource(d.Plugin, env)
		default:
			err = fmt.Errorf("%s registers no %s constructor", d.Path, d.Type)
		}
	}()
	if err != nil {
		return []checkRow{row(sdk.Failed("builds", err.Error(), "fix plugin_config in "+d.File))}
	}
	checker, ok := conn.(sdk.Checker)
	if !ok {
		return []checkRow{row(sdk.Passed("checks", d.Path+" offers no checks (sdk.Checker)"))}
	}
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	var out []checkRow
	for _, c := range checker.Check(ctx) {
		out = append(out, row(c))
	}
	if len(out) == 0 {
		out = append(out, row(sdk.Passed("checks", "none reported")))
	}
	return out
}

// checkRuntime checks the broker and the state store for defs.
func checkRuntime(ctx context.Context, cfg *definition.Config, defs []*definition.Definition) []checkRow {
	var out []checkRow
	add := func(name string, err error, fix, detail string) {
		r := checkRow{Connector: "runtime", Check: name, OK: err == nil, Detail: detail}
		if err != nil {
			r.Problem, r.Fix, r.Detail = err.Error(), fix, ""
		}
		out = append(out, r)
	}
	rt := cfg.Runtime
	if rt.Broker.BootstrapServers == "" {
		addr := rt.Broker.EmbeddedAddress
		l, err := net.Listen("tcp", addr)
		if err == nil {
			_ = l.Close()
		} else {
			err = fmt.Errorf("broker.embedded_address %s: %v; the embedded broker cannot listen there", addr, err)
		}
		add("embedded broker address", err, "stop what listens there (another runtime?), set broker.embedded_address, or set broker.bootstrap_servers to the running broker", addr+" is free")
		if dir := cfg.BrokerDataDir(); dir != "" {
			add("embedded broker data_dir writable", writableDir(dir), "make broker.data_dir writable by this user, or choose another folder", dir)
		}
		add("topics", nil, "", "the embedded broker creates each topic on first use")
	} else {
		out = append(out, checkBroker(ctx, cfg, defs)...)
	}
	switch rt.State.Storage {
	case "broker":
		// Its topics are among the broker's checks.
	default:
		err := checkStore(ctx, cfg, defs)
		what := "state store (" + rt.State.Storage + ") reachable and writable"
		detail := cfg.StateDir()
		if rt.State.Storage == "http" {
			detail = confkit.MaskURL(rt.State.HTTP.URL)
		}
		add(what, err, "fix the [state] section, or make the store reachable and writable for this runtime", detail)
	}
	return out
}

// writableDir creates dir when needed and writes and removes a file in it.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".check-")
	if err != nil {
		return err
	}
	name := f.Name()
	_ = f.Close()
	return os.Remove(name)
}

// checkStore saves and removes a probe checkpoint in the file or http
// store, and loads each source's checkpoint.
func checkStore(ctx context.Context, cfg *definition.Config, defs []*definition.Definition) error {
	for _, d := range cfg.Connectors {
		if d.Key == checkProbeKey {
			return fmt.Errorf("source %q uses the key the check saves its probe under; rename it", d.Key)
		}
	}
	store, err := supervisor.NewStore(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	for _, d := range defs {
		if d.Kind() == sdk.KindSource && d.Enabled {
			if _, err := store.Load(ctx, d.Key); err != nil {
				return err
			}
		}
	}
	if err := store.Save(ctx, checkProbeKey, []byte("{}")); err != nil {
		return err
	}
	if fs, ok := store.(*state.FileStore); ok {
		return os.Remove(fs.Path(checkProbeKey))
	}
	return nil
}

// checkBroker reaches broker.bootstrap_servers and looks up every topic the
// runtime writes by name: a source's literal topics, dead-letter topics,
// the state topics of the broker store and the lease topic of a fleet.
func checkBroker(ctx context.Context, cfg *definition.Config, defs []*definition.Definition) []checkRow {
	rt := cfg.Runtime
	bootstrap := rt.Broker.BootstrapServers
	row := func(name string, err error, fix, detail string) checkRow {
		if err != nil {
			return checkRow{Connector: "runtime", Check: name, Problem: err.Error(), Fix: fix}
		}
		return checkRow{Connector: "runtime", Check: name, OK: true, Detail: detail}
	}
	admin, stop, err := newCheckAdmin(bootstrap, rt.Broker.Properties)
	if err != nil {
		return []checkRow{row("broker reachable", err, "fix [broker] properties", "")}
	}
	defer stop()
	md, err := admin.GetMetadata(nil, true, int(brokerTimeout/time.Millisecond))
	if err != nil {
		return []checkRow{row("broker reachable",
			fmt.Errorf("broker.bootstrap_servers = %s did not answer within %s: %v", bootstrap, brokerTimeout, err),
			"start the broker, or fix broker.bootstrap_servers (and the SASL/TLS settings in [broker] properties)", "")}
	}
	out := []checkRow{row("broker reachable", nil, "", fmt.Sprintf("%s, %d brokers", bootstrap, len(md.Brokers)))}
	for _, t := range wantedTopics(cfg, defs) {
		name := "topic " + t.name + " (" + t.who + ")"
		if _, ok := md.Topics[t.name]; ok {
			out = append(out, row(name, nil, "", "present"))
			continue
		}
		if !t.creatable {
			out = append(out, row(name, fmt.Errorf("topic %q does not exist and %s has create_topics = false", t.name, t.who),
				"create the topic, or set create_topics = true in its [[topics]] block", ""))
			continue
		}
		err := validateCreate(ctx, admin, t.name)
		out = append(out, row(name, err, "create the topic, or allow this user to create topics", "missing; creatable, created on first use"))
	}
	return out
}

// newCheckAdmin builds an admin client with the runtime's broker
// properties; its logs are dropped (the check reports what matters).
func newCheckAdmin(bootstrap string, props map[string]string) (*kafka.AdminClient, func(), error) {
	cm, err := clientconf.ConfigMap(bootstrap, kafka.ConfigMap{"client.id": "pico-connectors-check"}, definition.ReservedProducer, props)
	if err != nil {
		return nil, nil, err
	}
	c, err := clientconf.NewProducerAdmin(&cm, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, nil, fmt.Errorf("broker client: %w", err)
	}
	return c.Admin, func() { c.Close(0) }, nil
}

// validateCreate asks the broker whether it would create topic.
func validateCreate(ctx context.Context, admin *kafka.AdminClient, topic string) error {
	spec := kafka.TopicSpecification{Topic: topic, NumPartitions: 1, ReplicationFactor: 1}
	if err := clientconf.CreateTopic(ctx, admin, spec, brokerTimeout, kafka.SetAdminValidateOnly(true)); err != nil {
		return fmt.Errorf("topic %q is missing and cannot be created: %v", topic, err)
	}
	return nil
}

// wantedTopic is a topic the runtime writes by name.
type wantedTopic struct {
	name, who string
	// creatable: the runtime creates it when missing.
	creatable bool
}

// wantedTopics lists the topics of the enabled defs the runtime writes by
// name, each once.
func wantedTopics(cfg *definition.Config, defs []*definition.Definition) []wantedTopic {
	var out []wantedTopic
	seen := map[string]bool{}
	want := func(name, who string, creatable bool) {
		if name != "" && !seen[name] {
			seen[name] = true
			out = append(out, wantedTopic{name, who, creatable})
		}
	}
	rt := cfg.Runtime
	for _, d := range defs {
		if !d.Enabled {
			continue
		}
		who := d.Type + "/" + d.Key
		for _, t := range d.Topics {
			if d.Kind() == sdk.KindSource {
				want(t.Topic.Literal, who, t.CreateTopics)
				if !strings.Contains(t.Topic.Fallback, "{") {
					want(t.Topic.Fallback, who, t.CreateTopics)
				}
			}
			want(t.DeadLetterTopic, who+" dead letters", true)
		}
		if d.Kind() == sdk.KindSource && rt.State.Storage == "broker" {
			want(rt.State.TopicPrefix()+"."+d.Key, "state of "+who, true)
		}
	}
	if rt.Distributed() {
		want(rt.Fleet.LeaseTopicName(), "fleet leases", true)
	}
	return out
}
