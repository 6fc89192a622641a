package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/picomq/pico-connectors/runtime/broker"
)

// brokerCmd runs a kfake broker in its own process, so a scenario can
// take the broker away from the runtime and bring it back.
const brokerCmd = "broker"

func brokerMain(args []string) int {
	fs := flag.NewFlagSet(brokerCmd, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:0", "listen address")
	data := fs.String("data", "", "data folder (kept across restarts)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	b, err := broker.Start(broker.Config{Address: *addr, DataDir: *data, AutoCreateTopics: true})
	if err != nil {
		fmt.Println("error:", err)
		return 1
	}
	fmt.Println("ready", b.Addr())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, os.Interrupt)
	<-sig
	b.Close()
	return 0
}

// brokerProc is an external broker process started by the driver.
type brokerProc struct {
	addr, data string
	cmd        *exec.Cmd
}

// startBroker re-executes this binary as a broker on addr with data.
func (s *suite) startBroker(addr, data string) *brokerProc {
	exe, err := os.Executable()
	must(err)
	cmd := exec.Command(exe, brokerCmd, "--addr", addr, "--data", data)
	out, err := cmd.StdoutPipe()
	must(err)
	cmd.Stderr = os.Stderr
	must(cmd.Start())
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case line <- sc.Text():
			default:
			}
		}
	}()
	p := &brokerProc{addr: addr, data: data, cmd: cmd}
	s.cleanups.Add(p.kill)
	select {
	case l := <-line:
		if !strings.HasPrefix(l, "ready ") {
			mustf("broker process: %s", l)
		}
		p.addr = strings.TrimPrefix(l, "ready ")
	case <-time.After(20 * time.Second):
		mustf("broker process did not start")
	}
	return p
}

// kill stops the broker process at once.
func (p *brokerProc) kill() {
	if p.cmd.ProcessState == nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		_ = p.cmd.Wait()
	}
}
