// Package supervisor runs the connectors of a loaded config: it starts the
// embedded broker when no bootstrap servers are configured, builds each
// enabled connector from its registration, runs it in the sink or source
// loop, tracks its status, restarts it on request, and stops everything
// gracefully.
//
// With mode = "distributed" each source runs only while this runtime holds
// its lease (package lease), with a transactional producer that fences the
// previous owner (fleet.go); sinks in every mode join their groups as
// static members under the runtime id.
package supervisor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/picomq/pico-connectors/runtime/api"
	"github.com/picomq/pico-connectors/runtime/backoff"
	"github.com/picomq/pico-connectors/runtime/broker"
	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/runtime/metrics"
	"github.com/picomq/pico-connectors/runtime/sinkloop"
	"github.com/picomq/pico-connectors/runtime/sourceloop"
	"github.com/picomq/pico-connectors/runtime/state"
	"github.com/picomq/pico-connectors/runtime/status"
	"github.com/picomq/pico-connectors/sdk"
)

// Options configure a Supervisor.
type Options struct {
	// Logger receives the supervisor's and the connectors' logs; nil
	// means slog.Default().
	Logger *slog.Logger
	// Metrics, when not nil, tracks every connector and hands each its
	// sdk.Metrics.
	Metrics *metrics.Registry
	// Store overrides the state store the runtime config names.
	Store state.Store
}

// Supervisor runs the connectors of one config. It implements
// api.Connectors.
type Supervisor struct {
	cfg     *definition.Config
	log     *slog.Logger
	metrics *metrics.Registry
	store   state.Store
	grace   time.Duration

	broker    *broker.Broker
	bootstrap string
	// clientProps are broker.properties plus, on the embedded broker,
	// the SASL login of the runtime's clients (embedded.go). They hold
	// its password: never print them.
	clientProps map[string]string
	// ownStore is the broker store Start built, closed by Stop.
	ownStore *state.BrokerStore
	// fleet is what the source leases saw of the other runtimes.
	fleet fleetView
	// leaving is set by Stop: the source leases leave their groups.
	leaving atomic.Bool

	mu    sync.Mutex
	conns map[string]*conn // kind + "/" + key
	order []*conn
	// runCtx is the parent of every connector's context, set by Start.
	runCtx context.Context
}

// conn is one connector and its running loop.
type conn struct {
	def     *definition.Definition
	tracker *status.Tracker
	log     *slog.Logger

	// Distributed sources: the last owner seen and how often it changed.
	placeMu      sync.Mutex
	lastOwner    string
	ownerChanges int64

	mu     sync.Mutex // serialises start, stop and restart
	cancel context.CancelFunc
	done   chan struct{} // closed when the loop returns; nil when not running
	err    error         // what the loop returned
	gen    uint64        // starts so far: a restart after a failure is for one of them
	// failures counts the failures in a row, for the restart back-off;
	// fences counts the fences by a same-id consumer in a row among them.
	failures atomic.Int64
	fences   atomic.Int64
}

var _ api.Connectors = (*Supervisor)(nil)

// New prepares a supervisor for cfg, which must have loaded without
// problems. It builds the state store but starts nothing.
func New(cfg *definition.Config, opts Options) (*Supervisor, error) {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	s := &Supervisor{
		cfg:     cfg,
		log:     opts.Logger,
		metrics: opts.Metrics,
		store:   opts.Store,
		grace:   cfg.Runtime.ShutdownGraceDuration(),
		conns:   map[string]*conn{},
	}
	if s.store == nil && cfg.Runtime.State.Storage != "broker" {
		st, err := NewStore(cfg, opts.Logger)
		if err != nil {
			return nil, err
		}
		s.store = st
	}
	for _, def := range cfg.Connectors {
		c := &conn{def: def, log: opts.Logger.With("connector", def.Key, "type", def.Type)}
		c.tracker = status.New(def.Type, def.Key, s.statusChanged)
		s.conns[def.Type+"/"+def.Key] = c
		s.order = append(s.order, c)
		if s.metrics != nil {
			s.metrics.Track(c.tracker)
		}
	}
	return s, nil
}

// NewStore builds the state store the runtime config names. A relative
// state.path is taken from the runtime config file's folder.
func NewStore(cfg *definition.Config, logger *slog.Logger) (state.Store, error) {
	st := cfg.Runtime.State
	switch st.Storage {
	case "http":
		return state.NewHTTPStore(state.HTTPConfig{
			URL:         st.HTTP.URL,
			Timeout:     st.HTTP.TimeoutDuration(),
			MaxAttempts: st.HTTP.MaxAttempts,
			RetryDelay:  st.HTTP.RetryDelayDuration(),
			APIKey:      st.HTTP.APIKey.Reveal(),
			Logger:      logger,
		})
	case "file", "":
		return state.NewFileStore(cfg.StateDir())
	}
	return nil, fmt.Errorf("state.storage = %q: use \"file\", \"http\" or \"broker\" (the supervisor builds the broker store when it starts)", st.Storage)
}

// signingKey is state.signing_key as the broker store takes it: nil when
// unset.
func signingKey(k string) []byte {
	if k == "" {
		return nil
	}
	return []byte(k)
}

func (s *Supervisor) statusChanged(key string, from, to status.Status, errText string) {
	args := []any{"connector", key, "from", string(from), "to", string(to)}
	if errText != "" {
		args = append(args, "error", errText)
	}
	if to == status.Error {
		s.log.Error("connector status changed", args...)
		return
	}
	s.log.Info("connector status changed", args...)
}

// BootstrapServers is the broker list the connectors use: the configured
// one, or the embedded broker's address once Start has started it.
func (s *Supervisor) BootstrapServers() string { return s.bootstrap }

// Start starts the embedded broker when the config names no bootstrap
// servers, then every enabled connector; disabled ones are marked
// Disabled. A connector that fails to build is marked Error and the others
// still start. Start returns an error only when the broker cannot start.
// ctx bounds the connectors' lifetime; Stop ends them gracefully first.
func (s *Supervisor) Start(ctx context.Context) error {
	s.bootstrap = s.cfg.Runtime.Broker.BootstrapServers
	s.clientProps = s.cfg.Runtime.Broker.Properties
	if s.bootstrap == "" {
		if err := s.startEmbedded(); err != nil {
			return err
		}
	}
	if s.store == nil {
		bs, err := state.NewBrokerStore(state.BrokerConfig{
			BootstrapServers: s.bootstrap,
			Properties:       s.clientProps,
			TopicPrefix:      s.cfg.Runtime.State.TopicPrefix(),
			Logger:           s.log,
			SigningKey:       signingKey(s.cfg.Runtime.State.SigningKey.Reveal()),
		})
		if err != nil {
			return fmt.Errorf("state.storage = \"broker\": %w", err)
		}
		s.store, s.ownStore = bs, bs
	}
	s.mu.Lock()
	s.runCtx = ctx
	s.mu.Unlock()
	for _, c := range s.order {
		if !c.def.Enabled {
			c.tracker.Set(status.Disabled)
			continue
		}
		c.mu.Lock()
		s.start(c)
		c.mu.Unlock()
	}
	return nil
}

// start builds c's plugin and runs its loop; c.mu is held. When the build
// or the loop fails, it starts c again later (restartLater).
func (s *Supervisor) start(c *conn) {
	def := c.def
	c.tracker.Set(status.Starting)
	c.err = nil
	c.gen++
	gen, started := c.gen, time.Now()
	var metricsFor sdk.Metrics = sdk.DiscardMetrics
	if s.metrics != nil {
		metricsFor = s.metrics.For(def.Type, def.Key)
	}
	env := sdk.Env{Key: def.Key, Logger: c.log, Metrics: metricsFor}
	s.mu.Lock()
	parent := s.runCtx
	s.mu.Unlock()
	if parent == nil {
		parent = context.Background()
	}
	ctx, cancel := context.WithCancel(parent)

	var run func() error
	switch def.Kind() {
	case sdk.KindSource:
		if s.cfg.Runtime.Distributed() {
			// Standby until this runtime holds the source's lease (fleet.go).
			c.tracker.Set(status.Standby)
			run = func() error { return s.runDistributed(ctx, c, env) }
			break
		}
		blob, err := s.store.Load(ctx, def.Key)
		if err != nil {
			cancel()
			s.failed(c, fmt.Errorf("load state: %w", err))
			return
		}
		cfg, err := s.sourceConfig(c, env)
		if err != nil {
			cancel()
			s.failed(c, err)
			return
		}
		cfg.State = blob
		run = func() error { return sourceloop.Run(ctx, cfg) }
	case sdk.KindSink:
		if def.Registration.NewSink == nil {
			cancel()
			s.failed(c, fmt.Errorf("plugin %q cannot build a sink", def.Path))
			return
		}
		sink, err := construct(def, env, "sink", def.Registration.NewSink)
		if err != nil {
			cancel()
			s.failed(c, fmt.Errorf("build sink: %w", err))
			return
		}
		transforms, err := buildTransforms(def)
		if err != nil {
			cancel()
			_ = sink.Close(context.Background())
			s.failed(c, err)
			return
		}
		cfg := sinkloop.Config{
			Key:              def.Key,
			Topics:           def.Topics,
			BaseDir:          filepath.Dir(def.File),
			Sink:             sink,
			Transforms:       transforms,
			BootstrapServers: s.bootstrap,
			Properties:       s.clientProps,
			Logger:           c.log,
			Tracker:          c.tracker,
			Metrics:          metricsFor,
			CloseTimeout:     closeTimeout(s.grace),
			// Static membership in every mode: a restarted runtime gets
			// its partitions back without waiting out its dead self.
			InstanceID:     s.cfg.Runtime.RuntimeID(),
			SessionTimeout: s.cfg.Runtime.Fleet.SessionTimeoutDuration(),
		}
		run = func() error { return sinkloop.Run(ctx, cfg) }
	default:
		cancel()
		s.failed(c, fmt.Errorf("type %q is neither sink nor source", def.Type))
		return
	}
	done := make(chan struct{})
	c.cancel, c.done = cancel, done
	go func() {
		defer close(done)
		// A run that ends on its own releases its context: a restart
		// after a failure builds a new one.
		defer cancel()
		err := catch(run)
		c.err = err
		if err != nil && ctx.Err() == nil {
			if c.tracker.Status() != status.Error {
				c.tracker.Fail(err)
			}
			c.log.Error("connector stopped", "error", err.Error())
			s.restartLater(c, gen, time.Since(started), err)
		} else if err != nil {
			c.log.Warn("connector stopped with an error", "error", err.Error())
		}
		if st := c.tracker.Status(); st != status.Error && st != status.Stopped {
			c.tracker.Set(status.Stopped)
		}
	}()
}

// sourceConfig builds c's source and transforms and the loop's config.
func (s *Supervisor) sourceConfig(c *conn, env sdk.Env) (sourceloop.Config, error) {
	def := c.def
	if def.Registration.NewSource == nil {
		return sourceloop.Config{}, fmt.Errorf("plugin %q cannot build a source", def.Path)
	}
	src, err := construct(def, env, "source", def.Registration.NewSource)
	if err != nil {
		return sourceloop.Config{}, fmt.Errorf("build source: %w", err)
	}
	transforms, err := buildTransforms(def)
	if err != nil {
		_ = src.Close(context.Background())
		return sourceloop.Config{}, err
	}
	return sourceloop.Config{
		Key:              def.Key,
		Topics:           def.Topics,
		BaseDir:          filepath.Dir(def.File),
		Source:           src,
		Store:            s.store,
		Transforms:       transforms,
		BootstrapServers: s.bootstrap,
		Properties:       s.clientProps,
		Logger:           c.log,
		Tracker:          c.tracker,
		Metrics:          env.Metrics,
	}, nil
}

// failed records why c could not be built and starts it again later;
// c.mu is held.
func (s *Supervisor) failed(c *conn, err error) {
	c.err = err
	c.tracker.Fail(err)
	c.log.Error("connector could not start", "error", err.Error())
	s.restartLater(c, c.gen, 0, err)
}

// catch runs run, turning a panic into an error.
func catch(run func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("connector panicked: %v", r)
		}
	}()
	return run()
}

// fencesBeforeError is how many fences in a row by a consumer with the
// same group.instance.id the supervisor takes as a passing fault (a broker
// that restarted and forgot the member) before it logs one at Error.
const fencesBeforeError = 3

// fencedByID reports whether err is a fence by a consumer with the same
// group.instance.id.
func fencedByID(err error) bool {
	var ke kafka.Error
	return errors.As(err, &ke) && ke.Code() == kafka.ErrFencedInstanceID
}

// restartLater starts c again after a back-off, unless the runtime stops
// or c is started again (a restart through the API) meanwhile: retryBase
// after the first failure, doubling with each failure in a row up to
// retryMax, with jitter. A failure after retryMax or more of running
// counts as the first. A fault
// outside the runtime (an S3 endpoint down when the sink opens, a broker
// restart that fenced the sink's consumer, a state store down) then heals
// on its own; the status shows Error, with the error, until a start
// succeeds.
//
// A fence by a consumer with the same group.instance.id (a second runtime
// with this runtime's id, a broker that restarted and forgot the member,
// or a stranger who joined the group with this runtime's id, which /health
// does not show without the API key) is retried like any other failure,
// backing off up to retryMax: the connector never stays stopped because
// of what another client did. After fencesBeforeError in a row it says so
// at Error, with what to check.
func (s *Supervisor) restartLater(c *conn, gen uint64, ran time.Duration, err error) {
	n := c.failures.Add(1)
	if ran >= retryMax {
		n = 1
		c.failures.Store(n)
		c.fences.Store(0)
	}
	if !fencedByID(err) {
		c.fences.Store(0)
	} else if f := c.fences.Add(1); f >= fencesBeforeError {
		c.log.Error("fenced by a consumer with the same id again and again: give every runtime its own id, and keep the broker's groups from other clients; the runtime keeps starting the connector, backing off up to a minute", "fences_in_a_row", f)
	}
	delay := backoff.Exponential(retryBase, retryMax)(int(n))
	c.log.Warn("the runtime starts the connector again after a back-off", "in", delay.Round(time.Millisecond).String(), "failures_in_a_row", n)
	time.AfterFunc(delay, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		s.mu.Lock()
		parent := s.runCtx
		s.mu.Unlock()
		if s.leaving.Load() || c.gen != gen || (parent != nil && parent.Err() != nil) {
			return
		}
		s.start(c)
	})
}

// construct calls the registration's constructor newPlugin (NewSource or
// NewSink) for def, turning a panic, or a nil plugin without an error, into
// an error; what names the plugin in that error ("source" or "sink").
func construct[P any](def *definition.Definition, env sdk.Env, what string, newPlugin func(sdk.Config, sdk.Env) (P, error)) (p P, err error) {
	defer func() {
		if r := recover(); r != nil {
			var none P
			p, err = none, fmt.Errorf("plugin %s panicked: %v", def.Path, r)
		}
	}()
	p, err = newPlugin(def.Plugin, env)
	if err == nil && any(p) == nil {
		err = fmt.Errorf("plugin %s returned no %s", def.Path, what)
	}
	return p, err
}

func buildTransforms(def *definition.Definition) ([]sdk.Transform, error) {
	var out []sdk.Transform
	for i, t := range def.Transforms {
		if !t.Enabled {
			continue
		}
		if t.Registration.NewTransform == nil || t.Config == nil {
			return nil, fmt.Errorf("transforms[%d]: transform %q is not available", i, t.Type)
		}
		tr, err := t.Registration.NewTransform(t.Config)
		if err != nil {
			return nil, fmt.Errorf("transforms[%d] (%s): %w", i, t.Type, err)
		}
		out = append(out, tr)
	}
	return out, nil
}

// stop cancels c's loop and waits for it until ctx ends; c.mu is held.
func (s *Supervisor) stop(ctx context.Context, c *conn) error {
	if c.done == nil {
		return nil
	}
	select {
	case <-c.done:
	default:
		if st := c.tracker.Status(); st != status.Error {
			c.tracker.Set(status.Stopping)
		}
		c.cancel()
		select {
		case <-c.done:
		case <-ctx.Done():
			what := "its current batch"
			if c.def.Kind() == sdk.KindSink {
				what = "its current batch and Close (an upload may be cut short)"
			}
			c.log.Error("connector did not finish in time; the runtime stops without it", "waited_for", what)
			return fmt.Errorf("%s %s did not stop in time (shutdown_grace): %w", c.def.Type, c.def.Key, ctx.Err())
		}
	}
	c.cancel()
	c.done, c.cancel = nil, nil
	return nil
}

// Stop stops every connector gracefully: sources after their current
// batch, sinks after Close has flushed. It waits at most shutdown_grace
// (or until ctx ends), then closes the embedded broker. It returns why a
// connector did not stop in time, or why a sink's Close failed during the
// stop (files it could not upload), not the errors connectors stopped with
// before. In distributed
// mode the sources' leases leave their groups, so other runtimes take the
// sources over at once rather than after the session timeout.
func (s *Supervisor) Stop(ctx context.Context) error {
	s.leaving.Store(true)
	ctx, cancel := context.WithTimeout(ctx, s.grace)
	defer cancel()
	var wg sync.WaitGroup
	errs := make([]error, len(s.order))
	for i, c := range s.order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.mu.Lock()
			defer c.mu.Unlock()
			running := c.done != nil
			if running {
				select {
				case <-c.done:
					running = false // it had stopped on its own
				default:
				}
			}
			errs[i] = s.stop(ctx, c)
			if errs[i] == nil && running && errors.Is(c.err, sinkloop.ErrClose) {
				// A sink's Close failed during the stop, such as one that
				// could not upload its open files: the exit status says
				// so. (A stop that interrupts an Open, or a last commit
				// the coordinator did not answer, is read again by the
				// next owner and loses nothing written.)
				errs[i] = fmt.Errorf("%s %s stopped with an error: %w", c.def.Type, c.def.Key, c.err)
			}
		}()
	}
	wg.Wait()
	s.mu.Lock()
	own := s.ownStore
	s.ownStore = nil
	s.mu.Unlock()
	if own != nil {
		own.Close()
	}
	if s.broker != nil {
		s.broker.Close()
	}
	return errors.Join(errs...)
}

// Restart stops one connector gracefully and starts it again from its
// definition, keeping its counters.
func (s *Supervisor) Restart(ctx context.Context, kind, key string) error {
	c, ok := s.lookup(kind, key)
	if !ok {
		return fmt.Errorf("%s %q: %w", kind, key, api.ErrNotFound)
	}
	if !c.def.Enabled {
		return fmt.Errorf("%s %q: %w", kind, key, api.ErrDisabled)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, s.grace)
	defer cancel()
	if err := s.stop(sctx, c); err != nil {
		return err
	}
	c.log.Info("restarting connector")
	c.failures.Store(0)
	c.fences.Store(0)
	s.start(c)
	if c.done == nil && c.err != nil {
		return c.err
	}
	return nil
}

// Snapshot hands a snapshot request to the running source key
// (api.Snapshotter).
func (s *Supervisor) Snapshot(ctx context.Context, key string, tables []string) error {
	c, ok := s.lookup(api.KindSource, key)
	if !ok {
		return fmt.Errorf("source %q: %w", key, api.ErrNotFound)
	}
	sn := c.tracker.Snapshotter()
	if sn == nil {
		return fmt.Errorf("source %q: %w", key, api.ErrNotRunning)
	}
	return sn.Snapshot(ctx, tables)
}

func (s *Supervisor) lookup(kind, key string) (*conn, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.conns[kind+"/"+key]
	return c, ok
}

// List returns the entries of one kind, sorted by key.
func (s *Supervisor) List(kind string) []api.Entry {
	out := []api.Entry{}
	for _, c := range s.order {
		if c.def.Type == kind {
			out = append(out, api.NewEntry(c.def.Connector, c.tracker.Snapshot()))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// Get returns one connector's entry.
func (s *Supervisor) Get(kind, key string) (api.Entry, bool) {
	c, ok := s.lookup(kind, key)
	if !ok {
		return api.Entry{}, false
	}
	return api.NewEntry(c.def.Connector, c.tracker.Snapshot()), true
}

// Config returns one connector's effective definition with secrets masked.
func (s *Supervisor) Config(kind, key string) (map[string]any, bool) {
	c, ok := s.lookup(kind, key)
	if !ok {
		return nil, false
	}
	return api.Definition(c.def.Connector, c.def.Plugin, c.def.TransformConfigs()), true
}

// Tracker returns one connector's tracker, for tests and tools.
func (s *Supervisor) Tracker(kind, key string) (*status.Tracker, bool) {
	c, ok := s.lookup(kind, key)
	if !ok {
		return nil, false
	}
	return c.tracker, true
}

// Snapshots returns every connector's status, in definition order.
func (s *Supervisor) Snapshots() []status.Snapshot {
	out := make([]status.Snapshot, 0, len(s.order))
	for _, c := range s.order {
		out = append(out, c.tracker.Snapshot())
	}
	return out
}

// closeTimeout is the part of shutdown_grace a sink's stop may take: all
// of it but a margin for the consumer to leave its group and the process
// to exit, so Stop's deadline never ends a sink in the middle of Close.
func closeTimeout(grace time.Duration) time.Duration {
	margin := min(2*time.Second, grace/10)
	return grace - margin
}
