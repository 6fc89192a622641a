package fleet

import (
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/freeport"
	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// Options describe one runtime's folder.
type Options struct {
	// Bootstrap is the broker list; empty starts the runtime's embedded
	// broker on a free address, kept in the folder's broker-data, with
	// BrokerPassword. The runtime logs in to Bootstrap when another
	// Runtime's embedded broker serves it.
	Bootstrap string
	// ID is runtime.id; empty leaves the default (HOSTNAME-PORT).
	ID string
	// Top are top-level keys written before the first table (mode = ...).
	Top string
	// Extra is appended to runtime.toml (mode, [fleet], [state], ...). A
	// [state] section is added (path = "state") when Extra has none.
	Extra string
	// Defs are the definition files, name -> content.
	Defs map[string]string
	// Env is added to the process environment.
	Env []string
}

// Runtime is one pico-connectors folder and the process running it (one at
// a time; Start again after Kill or Term).
type Runtime struct {
	// Dir is the folder with runtime.toml and connectors/.
	Dir string
	// API is host:port of the HTTP API.
	API string
	// ID is the runtime.id given in Options (may be empty).
	ID string
	// Addr is the embedded broker's address when Options.Bootstrap was
	// empty.
	Addr string

	t    testing.TB // set by New, for Start
	bin  string
	env  []string
	mu   sync.Mutex
	cmd  *exec.Cmd
	out  *runtimebin.Output
	past strings.Builder // what earlier processes wrote
	done chan struct{}
}

// NewRuntime writes the folder of a runtime into dir, which must exist;
// Run runs it. The caller kills it when done.
func NewRuntime(dir, bin string, o Options) (*Runtime, error) {
	if err := os.MkdirAll(filepath.Join(dir, "connectors"), 0o755); err != nil {
		return nil, err
	}
	api, err := freeport.Addr()
	if err != nil {
		return nil, err
	}
	r := &Runtime{Dir: dir, API: api, ID: o.ID, bin: bin, env: o.Env}
	var b strings.Builder
	b.WriteString("shutdown_grace = \"30s\"\n")
	if o.Top != "" {
		b.WriteString(o.Top + "\n")
	}
	if o.ID != "" {
		fmt.Fprintf(&b, "id = %q\n", o.ID)
	}
	b.WriteString("[broker]\n")
	if o.Bootstrap != "" {
		fmt.Fprintf(&b, "bootstrap_servers = %q\n", o.Bootstrap)
	} else {
		// The embedded broker keeps its data in broker-data, the default
		// of broker.data_dir, beside runtime.toml.
		if r.Addr, err = freeport.Addr(); err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "embedded_address = %q\nembedded_password = %q\n", r.Addr, BrokerPassword)
		embedded.Store(r.Addr, true)
	}
	b.WriteString("[broker.properties]\n\"topic.metadata.refresh.interval.ms\" = \"1000\"\n")
	props := ClientProperties(o.Bootstrap)
	for _, k := range slices.Sorted(maps.Keys(props)) {
		fmt.Fprintf(&b, "%q = %q\n", k, props[k])
	}
	fmt.Fprintf(&b, "[http]\naddress = %q\n[log]\nformat = \"json\"\n%s\n", r.API, o.Extra)
	if !strings.Contains(o.Extra, "[state]") {
		b.WriteString("[state]\npath = \"state\"\n")
	}
	if err := os.WriteFile(filepath.Join(dir, "runtime.toml"), []byte(b.String()), 0o644); err != nil {
		return nil, err
	}
	for name, body := range o.Defs {
		if err := os.WriteFile(filepath.Join(dir, "connectors", name), []byte(body), 0o644); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// New is NewRuntime for a test, in a folder of t.TempDir; Start runs it.
// The process is killed at cleanup.
func New(t testing.TB, bin string, o Options) *Runtime {
	t.Helper()
	r, err := NewRuntime(t.TempDir(), bin, o)
	if err != nil {
		t.Fatal(err)
	}
	r.t = t
	t.Cleanup(r.Kill)
	return r
}

// NewBroker starts, in dir, a runtime with no connectors whose embedded
// broker keeps its data in its folder, and returns it; Addr is the broker.
func NewBroker(dir, bin string) (*Runtime, error) {
	b, err := NewRuntime(dir, bin, Options{})
	if err != nil {
		return nil, err
	}
	return b, b.Run()
}

// StartBroker is NewBroker for a test, killed at cleanup.
func StartBroker(t testing.TB, bin string) *Runtime {
	t.Helper()
	b := New(t, bin, Options{})
	b.Start()
	return b
}

// Run runs the process and waits until GET /health answers.
func (r *Runtime) Run() error {
	cmd := exec.Command(r.bin, "run", "--config", filepath.Join(r.Dir, "runtime.toml"))
	cmd.Env = append(os.Environ(), r.env...)
	out := &runtimebin.Output{}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	if r.out != nil {
		r.past.WriteString(r.out.String())
	}
	r.cmd, r.out, r.done = cmd, out, done
	r.mu.Unlock()
	deadline := time.Now().Add(60 * time.Second)
	c := http.Client{Timeout: time.Second}
	for {
		resp, err := c.Get("http://" + r.API + "/health")
		if err == nil {
			resp.Body.Close()
			return nil
		}
		if !r.Alive() {
			return fmt.Errorf("pico-connectors (%s) exited at start: %s\n%s", r.Dir, cmd.ProcessState, r.Tail())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("pico-connectors API %s not up after 60 s\n%s", r.API, r.Tail())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Start is Run for a runtime made by New: an error fails its test.
func (r *Runtime) Start() {
	if r.t == nil {
		panic("fleet: Start is for a runtime made by New(t, ...); call Run")
	}
	r.t.Helper()
	if err := r.Run(); err != nil {
		r.t.Fatal(err)
	}
}

// PID is the id of the running process (0 before Run).
func (r *Runtime) PID() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cmd == nil || r.cmd.Process == nil {
		return 0
	}
	return r.cmd.Process.Pid
}

// Alive reports whether the process runs (a stopped one counts).
func (r *Runtime) Alive() bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

// Tail returns the last lines the process wrote.
func (r *Runtime) Tail() string {
	r.mu.Lock()
	out := r.out
	r.mu.Unlock()
	if out == nil {
		return ""
	}
	s := out.String()
	if len(s) > 6000 {
		s = "..." + s[len(s)-6000:]
	}
	return s
}

// Output returns everything the processes of this runtime wrote, the
// earlier ones first.
func (r *Runtime) Output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.out == nil {
		return ""
	}
	return r.past.String() + r.out.String()
}

func (r *Runtime) signal(s syscall.Signal) {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if cmd != nil && r.Alive() {
		_ = cmd.Process.Signal(s)
	}
}

// Kill sends SIGKILL (after SIGCONT is not needed: SIGKILL ends a stopped
// process too) and waits until the process is gone.
func (r *Runtime) Kill() {
	if !r.Alive() {
		return
	}
	r.signal(syscall.SIGKILL)
	<-r.done
}

// Pause sends SIGSTOP: the process stays in memory, answers nothing, and
// its broker sessions time out.
func (r *Runtime) Pause() { r.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT after Pause.
func (r *Runtime) Resume() { r.signal(syscall.SIGCONT) }

// Term sends SIGTERM and waits up to limit for a clean exit; after limit it
// kills the process and returns an error, as it does for a non-zero exit.
func (r *Runtime) Term(limit time.Duration) error {
	if !r.Alive() {
		return fmt.Errorf("pico-connectors (%s) is not running", r.Dir)
	}
	r.signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(limit):
		r.Kill()
		return fmt.Errorf("pico-connectors (%s) did not stop within %s of SIGTERM\n%s", r.Dir, limit, r.Tail())
	}
	if !r.cmd.ProcessState.Success() {
		return fmt.Errorf("pico-connectors (%s): exit %s\n%s", r.Dir, r.cmd.ProcessState, r.Tail())
	}
	return nil
}
