package scaffold

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/sdk"
)

// TestScaffoldInOwnModule does what a connector author does in a Go module
// of their own, outside this checkout: require pico-connectors (a replace to
// the checkout), get picogen as a Go tool, scaffold a sink and a source,
// generate, vet and test them, replace the sink's body and test again,
// build the module's runtime binary, validate and run its example runtime
// config (the standard random source into the new sink, and the new
// source) on the embedded broker until the API's counters move, and
// render the module's docs. It works from the module cache alone
// (GOPROXY=off): the replaced module needs no network, and the modules it
// requires are those this checkout builds with. It takes about two
// minutes; -short skips it.
func TestScaffoldInOwnModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own and runs its binary; skipped with -short")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	before := gitStatus(t, root)

	mod := filepath.Join(t.TempDir(), "acme-connectors")
	if err := os.MkdirAll(mod, 0o755); err != nil {
		t.Fatal(err)
	}
	gomod := fmt.Sprintf("module example.com/acme-connectors\n\ngo 1.26.0\n\nrequire %s v0.0.0-00010101000000-000000000000\n\nreplace %s => %s\n",
		sdk.ModulePath, sdk.ModulePath, root)
	write(t, filepath.Join(mod, "go.mod"), gomod)
	// The checkout's go.sum has the sums of every module it builds with,
	// so nothing needs the checksum database.
	sums, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(mod, "go.sum"), string(sums))

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	env := append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local")
	run := func(name string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, name, args...)
		cmd.Dir, cmd.Env = mod, env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		start := time.Now()
		if err := cmd.Run(); err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
		}
		t.Logf("%s %s: %v", name, strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
		return out.String()
	}

	run("go", "get", "-tool", sdk.ModulePath+"/cmd/picogen")
	out := run("go", "tool", "picogen", "new", "sink", "hook")
	for _, want := range []string{"cmd/acme-connectors/main.go", "examples/runtime.toml", "examples/connectors/hook_sink.toml", "go mod tidy"} {
		if !strings.Contains(out, want) {
			t.Errorf("picogen new sink output lacks %q:\n%s", want, out)
		}
	}
	out = run("go", "tool", "picogen", "new", "source", "feed")
	if strings.Contains(out, "cmd/acme-connectors/main.go") {
		t.Errorf("the second picogen new wrote the module's main again:\n%s", out)
	}
	run("go", "generate", "./...")
	// go mod tidy would do, but it also resolves the tests of every
	// dependency, which the module cache of a machine that never ran them
	// lacks; go get ./... records what this module's packages import.
	run("go", "get", "./...")
	gen, err := os.ReadFile(filepath.Join(mod, "generated", "generate.go"))
	if err != nil || !strings.Contains(string(gen), "//go:generate go tool picogen gen -root ..") {
		t.Errorf("generated/generate.go does not run picogen as a tool (%v):\n%s", err, gen)
	}
	registry, _ := os.ReadFile(filepath.Join(mod, "generated", "registry", "registry.go"))
	for _, p := range []string{"example.com/acme-connectors/connectors/hook_sink", "example.com/acme-connectors/connectors/feed_source"} {
		if !strings.Contains(string(registry), `"`+p+`"`) {
			t.Errorf("the module's registry does not link %s:\n%s", p, registry)
		}
	}
	for _, f := range []string{"connectors/hook_sink/sink.go", "connectors/hook_sink/sink_test.go", "connectors/feed_source/source.go", "connectors/feed_source/source_test.go"} {
		b, _ := os.ReadFile(filepath.Join(mod, f))
		if n := strings.Count(string(b), `"`+sdk.ModulePath+"/"); n != 1 {
			t.Errorf("%s imports %d SDK packages, want exactly one", f, n)
		}
	}
	run("go", "vet", "./...")
	out = run("go", "test", "-count=1", "-v", "./...")
	if !strings.Contains(out, "conformance cases ran") {
		t.Errorf("the kit did not say which conformance cases ran:\n%s", out)
	}

	// The scaffolded sink tests hold when Consume's body is replaced.
	sinkFile := filepath.Join(mod, "connectors", "hook_sink", "sink.go")
	src, _ := os.ReadFile(sinkFile)
	start := strings.Index(string(src), "func (s *Sink) Consume(")
	end := strings.Index(string(src), "// Close logs the final totals.")
	if start < 0 || end < start {
		t.Fatalf("cannot find Consume in the scaffolded sink:\n%s", src)
	}
	replaced := string(src[:start]) + "func (s *Sink) Consume(ctx context.Context, batch []sdk.Record) error {\n\tfor _, r := range batch {\n\t\t_ = r.Payload // the author's real work\n\t}\n\treturn nil\n}\n\n" + string(src[end:])
	write(t, sinkFile, replaced)
	run("go", "test", "-count=1", "./connectors/hook_sink/")

	bin := filepath.Join(t.TempDir(), "acme-connectors")
	run("go", "build", "-o", bin, "./cmd/acme-connectors")
	out = run(bin, "version")
	for _, want := range []string{"pico-connectors v0.0.0-00010101000000-000000000000 => " + root, "libpicomq_connector_hook_sink", "libpicomq_connector_feed_source", "libpicomq_connector_s3_sink"} {
		if !strings.Contains(out, want) {
			t.Errorf("version output lacks %q:\n%s", want, out)
		}
	}
	out = run(bin, "validate", "--config", "examples/runtime.toml")
	for _, want := range []string{"sink hook (libpicomq_connector_hook_sink)", "source feed (libpicomq_connector_feed_source)", "source random (libpicomq_connector_random_source)"} {
		if !strings.Contains(out, want) {
			t.Errorf("validate output lacks %q:\n%s", want, out)
		}
	}
	runBinary(t, ctx, mod, bin)

	for _, format := range []string{"md", "html"} {
		site := filepath.Join(t.TempDir(), "site-"+format)
		run("go", "tool", "picogen", "docs", "--format", format, "--out", site)
		for _, page := range []string{"hook_sink", "feed_source", "index", "api", "dialect"} {
			if _, err := os.Stat(filepath.Join(site, page+"."+format)); err != nil {
				t.Errorf("picogen docs --format %s did not write %s.%s", format, page, format)
			}
		}
	}
	run("go", "tool", "picogen", "lint")
	out = run("go", "tool", "picogen", "compat", "schemas/hook_sink.json", "schemas/hook_sink.json")
	t.Logf("compat of a schema with itself: %s", strings.TrimSpace(out))

	if after := gitStatus(t, root); after != before {
		t.Errorf("the checkout changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
}

// runBinary runs the module's binary on examples/runtime.toml, on free
// ports, until the API shows the new sink consuming the random source's
// records and the new source producing, then stops it with SIGTERM.
func runBinary(t *testing.T, ctx context.Context, mod, bin string) {
	t.Helper()
	brokerAddr, apiAddr := freeLoopback(t), freeLoopback(t)
	cmd := exec.CommandContext(ctx, bin, "run", "--config", "examples/runtime.toml")
	cmd.Dir = mod
	cmd.Env = append(os.Environ(),
		"PICOMQ_CONNECTORS_BROKER_EMBEDDED_ADDRESS="+brokerAddr,
		"PICOMQ_CONNECTORS_HTTP_ADDRESS="+apiAddr)
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-exited
		}
	}()
	counter := func(path, name string) int64 {
		resp, err := http.Get("http://" + apiAddr + path)
		if err != nil {
			return -1
		}
		defer resp.Body.Close()
		var e struct {
			Counters map[string]int64 `json:"counters"`
		}
		if json.NewDecoder(resp.Body).Decode(&e) != nil {
			return -1
		}
		return e.Counters[name]
	}
	deadline := time.Now().Add(2 * time.Minute)
	var consumed, produced int64
	for {
		consumed, produced = counter("/sinks/hook", "records_consumed"), counter("/sources/feed", "records_produced")
		if consumed > 0 && produced > 0 {
			break
		}
		select {
		case err := <-exited:
			t.Fatalf("the module's binary exited (%v) before records arrived:\n%s", err, logs.String())
		case <-time.After(200 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 2 minutes the hook sink consumed %d records and the feed source produced %d; logs:\n%s", consumed, produced, logs.String())
		}
	}
	t.Logf("the hook sink consumed %d records, the feed source produced %d", consumed, produced)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the binary's graceful stop: %v\n%s", err, logs.String())
		}
	case <-time.After(time.Minute):
		t.Fatalf("the binary did not stop within a minute of SIGTERM:\n%s", logs.String())
	}
}

func freeLoopback(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// gitStatus is git status --porcelain of the checkout, or "" outside git.
func gitStatus(t *testing.T, root string) string {
	t.Helper()
	out, err := exec.Command("git", "-C", root, "status", "--porcelain").Output()
	if err != nil {
		return ""
	}
	return string(out)
}
