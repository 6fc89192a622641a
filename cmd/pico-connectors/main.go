// Command pico-connectors runs PicoMQ connectors: sinks that consume topics
// into other systems and sources that produce other systems into topics.
// It links the standard connectors; see package runtime/cli for the
// commands, and for how a module builds its own binary the same way.
package main

import (
	"os"

	_ "github.com/picomq/pico-connectors/connectors"
	"github.com/picomq/pico-connectors/runtime/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, os.Environ())) }
