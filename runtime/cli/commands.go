package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/BurntSushi/toml"

	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	"github.com/picomq/pico-connectors/runtime/supervisor"
	"github.com/picomq/pico-connectors/sdk"
)

// parseFlags parses --config FILE (and --json for config) from anywhere in
// args, returning the positional arguments.
func parseFlags(name string, args []string, stderr io.Writer, withJSON bool) (path string, asJSON bool, pos []string, ok bool) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&path, "config", "", "runtime config file (TOML)")
	if withJSON {
		fs.BoolVar(&asJSON, "json", false, "print JSON instead of TOML")
	}
	for {
		if err := fs.Parse(args); err != nil {
			return "", false, nil, false
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	if path == "" {
		fmt.Fprintf(stderr, "pico-connectors %s: --config FILE is required, such as --config examples/demo/runtime.toml\n", name)
		return "", false, nil, false
	}
	return path, asJSON, pos, true
}

// loadNoArgs starts a command that takes no argument besides its flags:
// it parses them (usage errors to stderr) and loads the config
// (loadChecked, problems to w under header). When cfg is nil the command
// exits with code.
func loadNoArgs(name string, args []string, environ []string, stderr, w io.Writer, header string) (cfg *definition.Config, path string, code int) {
	path, _, pos, ok := parseFlags(name, args, stderr, false)
	if ok && len(pos) > 0 {
		fmt.Fprintf(stderr, "pico-connectors %s: unexpected argument %q\n", name, pos[0])
		ok = false
	}
	if !ok {
		return nil, "", 2
	}
	return loadChecked(path, environ, w, header), path, 1
}

// loadChecked loads the runtime config at path and checks its loops
// (checkLoops). On a problem it writes header (a format with the path as
// its argument, or "") and the problems to w, and returns nil.
func loadChecked(path string, environ []string, w io.Writer, header string) *definition.Config {
	cfg, err := definition.Load(path, definition.Environ(environ))
	if err == nil {
		err = checkLoops(cfg)
	}
	if err != nil {
		if header != "" {
			fmt.Fprintf(w, header, path)
		}
		printProblems(w, err)
		return nil
	}
	return cfg
}

// checkLoops checks each definition's [[topics]] blocks the way its sink or
// source loop will use them, so what would stop a loop at start is refused
// up front; each problem names the definition file.
func checkLoops(cfg *definition.Config) error {
	var ps confkit.Problems
	for _, d := range cfg.Connectors {
		var err error
		switch d.Kind() {
		case sdk.KindSource:
			err = sourceloop.CheckTopics(d.Topics, filepath.Dir(d.File))
		case sdk.KindSink:
			err = sinkloop.CheckTopics(d.Topics, filepath.Dir(d.File))
			if err == nil {
				err = sinkTopics(d)
			}
		}
		if err == nil {
			continue
		}
		var many interface{ Unwrap() []error }
		if errors.As(err, &many) {
			for _, e := range many.Unwrap() {
				ps = append(ps, confkit.Problem{File: d.File, Message: e.Error()})
			}
			continue
		}
		ps = append(ps, confkit.Problem{File: d.File, Message: err.Error()})
	}
	if len(ps) > 0 {
		return ps
	}
	return nil
}

// sinkTopics builds d's sink, without opening it, and hands it its
// [[topics]] blocks when it takes them (sdk.TopicSchemas), so what its
// SetTopics refuses is reported before the sink runs.
func sinkTopics(d *definition.Definition) error {
	if d.Registration.NewSink == nil || d.Plugin == nil {
		return nil
	}
	sink, err := d.Registration.NewSink(d.Plugin, sdk.Env{Key: d.Key, Logger: slog.New(slog.DiscardHandler), Metrics: sdk.DiscardMetrics})
	if err != nil {
		return nil // Load reported the config's problems; check builds it again
	}
	return sinkloop.SetTopics(sink, d.Topics, filepath.Dir(d.File))
}

// printProblems writes every problem, one a line, and a count.
func printProblems(w io.Writer, err error) {
	var ps confkit.Problems
	if errors.As(err, &ps) {
		for _, p := range ps {
			fmt.Fprintln(w, p.Error())
		}
		noun := "problems"
		if len(ps) == 1 {
			noun = "problem"
		}
		fmt.Fprintf(w, "%d %s found\n", len(ps), noun)
		return
	}
	fmt.Fprintln(w, err)
}

func validateCmd(args []string, stdout, stderr io.Writer, environ []string) int {
	cfg, path, code := loadNoArgs("validate", args, environ, stderr, stdout, "")
	if cfg == nil {
		return code
	}
	var names []string
	for _, d := range cfg.Connectors {
		state := ""
		if !d.Enabled {
			state = ", disabled"
		}
		names = append(names, fmt.Sprintf("%s %s (%s%s)", d.Type, d.Key, d.Path, state))
	}
	fmt.Fprintf(stdout, "%s is valid: %d connector definitions in %s\n", path, len(cfg.Connectors), cfg.Dir)
	for _, n := range names {
		fmt.Fprintf(stdout, "  %s\n", n)
	}
	return 0
}

func configCmd(args []string, stdout, stderr io.Writer, environ []string) int {
	path, asJSON, pos, ok := parseFlags("config", args, stderr, true)
	if !ok {
		return 2
	}
	if len(pos) > 1 {
		fmt.Fprintf(stderr, "pico-connectors config: one KEY at most, got %q\n", pos)
		return 2
	}
	cfg, loadErr := definition.Load(path, definition.Environ(environ))
	if cfg.Dir == "" {
		// Nothing to show: the runtime config could not be read or parsed.
		printProblems(stderr, loadErr)
		return 1
	}
	var view map[string]any
	if len(pos) == 0 {
		view = cfg.Runtime.Redacted()
	} else {
		def, err := findDefinition(cfg, pos[0])
		if err != nil {
			fmt.Fprintln(stderr, err)
			if loadErr != nil {
				printProblems(stderr, loadErr)
			}
			return 1
		}
		view = api.Definition(def.Connector, def.Plugin, def.TransformConfigs())
	}
	if err := printView(stdout, view, asJSON); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if loadErr != nil {
		fmt.Fprintln(stderr, "the config has problems; values above may be incomplete:")
		printProblems(stderr, loadErr)
		return 1
	}
	return 0
}

// findDefinition resolves KEY, sink/KEY or source/KEY.
func findDefinition(cfg *definition.Config, arg string) (*definition.Definition, error) {
	kind, key, hasKind := strings.Cut(arg, "/")
	if !hasKind {
		key, kind = arg, ""
	}
	var found []*definition.Definition
	var all []string
	for _, d := range cfg.Connectors {
		all = append(all, d.Type+"/"+d.Key)
		if d.Key == key && (kind == "" || d.Type == kind) {
			found = append(found, d)
		}
	}
	switch len(found) {
	case 1:
		return found[0], nil
	case 0:
		sort.Strings(all)
		msg := fmt.Sprintf("no connector %q in %s", arg, cfg.Dir)
		var keys []string
		for _, d := range cfg.Connectors {
			keys = append(keys, d.Key)
		}
		if s := confkit.DidYouMean(key, keys); s != "" {
			msg += s
		} else if len(all) > 0 {
			msg += "; there are " + strings.Join(all, ", ")
		}
		return nil, errors.New(msg)
	}
	return nil, fmt.Errorf("both a sink and a source have key %q; use sink/%s or source/%s", key, key, key)
}

// printView writes a config view as TOML or indented JSON.
func printView(w io.Writer, view map[string]any, asJSON bool) error {
	b, err := json.Marshal(view)
	if err != nil {
		return err
	}
	if asJSON {
		var out bytes.Buffer
		_ = json.Indent(&out, b, "", "  ")
		out.WriteByte('\n')
		_, err := w.Write(out.Bytes())
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var generic map[string]any
	if err := dec.Decode(&generic); err != nil {
		return err
	}
	enc := toml.NewEncoder(w)
	enc.Indent = ""
	return enc.Encode(tomlValue(generic))
}

// tomlValue turns decoded JSON into values the TOML encoder writes well:
// numbers as integers or floats, nulls dropped, arrays of objects as
// arrays of tables.
func tomlValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			if e != nil {
				out[k] = tomlValue(e)
			}
		}
		return out
	case []any:
		allMaps := len(t) > 0
		for _, e := range t {
			if _, ok := e.(map[string]any); !ok {
				allMaps = false
			}
		}
		if allMaps {
			out := make([]map[string]any, len(t))
			for i, e := range t {
				out[i] = tomlValue(e).(map[string]any)
			}
			return out
		}
		out := make([]any, 0, len(t))
		for _, e := range t {
			if e != nil {
				out = append(out, tomlValue(e))
			}
		}
		return out
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64()
		return f
	}
	return v
}

// maskURLsInLog masks the user information and query values of every URL
// in a log line's message and text values (confkit.MaskURLs): a client's
// error quotes the URL it called, which may carry a token.
func maskURLsInLog(_ []string, a slog.Attr) slog.Attr {
	switch a.Value.Kind() {
	case slog.KindString:
		if s := a.Value.String(); strings.Contains(s, "://") {
			a.Value = slog.StringValue(confkit.MaskURLs(s))
		}
	case slog.KindAny:
		if err, ok := a.Value.Any().(error); ok && strings.Contains(err.Error(), "://") {
			a.Value = slog.StringValue(confkit.MaskURLs(err.Error()))
		}
	}
	return a
}

// newLogger builds the slog logger the runtime config asks for.
func newLogger(w io.Writer, cfg definition.Log) *slog.Logger {
	var level slog.Level
	switch cfg.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		level = slog.LevelInfo
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: maskURLsInLog}
	if cfg.Format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// duplicateSignalWindow is how soon after the first signal a repeat is
// taken as the same stop request rather than a demand to exit at once.
const duplicateSignalWindow = 250 * time.Millisecond

func runCmd(args []string, stdout, stderr io.Writer, environ []string) int {
	cfg, _, code := loadNoArgs("run", args, environ, stderr, stderr, "pico-connectors: %s has problems; nothing was started (check with pico-connectors validate):\n")
	if cfg == nil {
		return code
	}
	logger := newLogger(stderr, cfg.Runtime.Log)
	slog.SetDefault(logger)

	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigs)

	reg := metrics.New(logger)
	sup, err := supervisor.New(cfg, supervisor.Options{Logger: logger, Metrics: reg})
	if err != nil {
		logger.Error("cannot start", "error", err.Error())
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := sup.Start(ctx); err != nil {
		logger.Error("cannot start", "error", err.Error())
		return 1
	}
	srv, err := api.New(sup, api.Options{
		Address:      cfg.Runtime.HTTP.Address,
		APIKey:       cfg.Runtime.HTTP.APIKey.Reveal(),
		TLSCert:      cfg.Runtime.HTTP.TLSCert,
		TLSKey:       cfg.Runtime.HTTP.TLSKey,
		AllowedHosts: cfg.Runtime.HTTP.AllowedHosts,
		Metrics:      reg.Handler(),
		Logger:       logger,
	})
	if err == nil {
		err = srv.Start()
	}
	if err != nil {
		logger.Error("cannot start the HTTP API", "address", cfg.Runtime.HTTP.Address, "error", err.Error())
		_ = sup.Stop(context.Background())
		return 1
	}
	enabled := 0
	for _, d := range cfg.Connectors {
		if d.Enabled {
			enabled++
		}
	}
	m := sup.Membership()
	logger.Info("pico-connectors running", "connectors", len(cfg.Connectors), "enabled", enabled,
		"bootstrap_servers", sup.BootstrapServers(), "api", srv.Addr(), "runtime_id", m.RuntimeID, "mode", m.Mode)

	sig := <-sigs
	grace := cfg.Runtime.ShutdownGraceDuration()
	logger.Info("stopping gracefully; send the signal again to exit at once", "signal", sig.String(), "shutdown_grace", grace.String())
	first := time.Now()
	go func() {
		for s := range sigs {
			// Some supervisors deliver one stop request twice in a row
			// (GNU timeout signals the child and then its process group);
			// only a signal sent deliberately later means "now".
			if time.Since(first) < duplicateSignalWindow {
				continue
			}
			logger.Warn("second signal: exiting at once", "signal", s.String())
			os.Exit(1)
		}
	}()
	code = 0
	start := time.Now()
	if err := sup.Stop(context.Background()); err != nil {
		logger.Error("graceful stop incomplete", "error", err.Error())
		code = 1
	}
	shutCtx, shutCancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = srv.Shutdown(shutCtx)
	shutCancel()
	cancel()
	logger.Info("stopped", "took", time.Since(start).Round(time.Millisecond).String())
	return code
}
