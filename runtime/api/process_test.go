package api_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/picomq/pico-connectors/runtime/servertest/runtimebin"
)

// TestMain removes the binary runtimebin.Build compiled.
func TestMain(m *testing.M) {
	code := m.Run()
	runtimebin.Remove()
	os.Exit(code)
}

// process is one pico-connectors run with its output collected.
type process struct {
	cmd  *exec.Cmd
	out  *runtimebin.Output
	done chan struct{}
	err  error
}

// startProcess runs pico-connectors run --config cfg with env added to the
// test's environment.
func startProcess(t *testing.T, bin, cfg string, env []string) *process {
	t.Helper()
	p := &process{cmd: exec.Command(bin, "run", "--config", cfg), out: &runtimebin.Output{}, done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// stop sends SIGTERM and waits for the exit, failing the test when it
// takes longer than limit or exits non-zero.
func (p *process) stop(t *testing.T, limit time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(limit):
		p.cmd.Process.Kill()
		<-p.done
		t.Fatalf("pico-connectors did not exit within %s of SIGTERM; output:\n%s", limit, p.out.String())
	}
	if p.err != nil {
		t.Fatalf("pico-connectors exited with %v after SIGTERM; output:\n%s", p.err, p.out.String())
	}
}

// apiAddress waits for the "http api listening" log line and returns the
// address in it.
func (p *process) apiAddress(t *testing.T) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(p.out.String(), "\n") {
			if !strings.Contains(line, "http api listening") {
				continue
			}
			if i := strings.Index(line, `"address":"`); i >= 0 {
				rest := line[i+len(`"address":"`):]
				return rest[:strings.IndexByte(rest, '"')]
			}
		}
		select {
		case <-p.done:
			t.Fatalf("pico-connectors exited (%v) before the API listened; output:\n%s", p.err, p.out.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no \"http api listening\" line; output:\n%s", p.out.String())
	return ""
}

// client talks to a running API and keeps every body it read.
type client struct {
	base, key string
	mu        sync.Mutex
	seen      bytes.Buffer
}

func (c *client) do(t *testing.T, method, path string, hdr ...string) (int, []byte) {
	t.Helper()
	req, _ := http.NewRequest(method, c.base+path, nil)
	if method == http.MethodPost {
		req.Header.Set("Content-Type", "application/json") // as the API asks of a POST
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	resp, err := http.DefaultClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	c.mu.Lock()
	c.seen.WriteString(method + " " + path + "\n")
	for k, vs := range resp.Header {
		c.seen.WriteString(k + ": " + strings.Join(vs, ",") + "\n")
	}
	c.seen.Write(b)
	c.seen.WriteString("\n")
	c.mu.Unlock()
	return resp.StatusCode, b
}
