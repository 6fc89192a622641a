// Package cli is the pico-connectors command line: run, validate, check,
// config, admin and version. A runtime binary is this package's Main plus the
// connectors it links, each of which registers itself from its init:
//
//	package main
//
//	import (
//		"os"
//
//		_ "github.com/picomq/pico-connectors/connectors" // the standard connectors
//		"github.com/picomq/pico-connectors/runtime/cli"
//		_ "example.com/acme/generated/registry" // this module's own
//	)
//
//	func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr, os.Environ())) }
//
// picogen new writes that file into a module the first time it scaffolds a
// connector there; cmd/pico-connectors is the same five lines.
//
// The runtime config names the broker, the HTTP API, the state store and
// the folder of definition files; every key of it and of the definitions
// can be overridden by PICOMQ_CONNECTORS_... environment variables.
package cli

import (
	"fmt"
	"io"
)

const usage = `pico-connectors runs PicoMQ sink and source connectors.

Usage:
  pico-connectors run --config FILE
      Start the embedded broker (when no bootstrap_servers), the HTTP API and
      every enabled connector. SIGTERM or Ctrl-C stops gracefully; a second
      signal exits at once.
  pico-connectors validate --config FILE
      Check the runtime config and every definition in connectors_dir,
      plugin_config included; print every problem with its file and key.
      Exits 1 on any problem.
  pico-connectors config --config FILE [KEY] [--json]
      Print the effective runtime config, or with KEY (or sink/KEY,
      source/KEY) a connector's effective definition, after environment
      overrides, with secrets masked.
  pico-connectors check --config FILE [KEY] [--json]
      Connect to the broker, the state store and each enabled connector's
      system (or only KEY's) and report every precondition, connector by
      connector: OK, or the problem and what to do. Exits 1 on any problem.
  pico-connectors admin --config FILE KEY [COMMAND [ARGS]]
      Run an operator command the connector KEY offers, outside a running
      runtime (Postgres: slots, drop-slot [NAME]); without COMMAND, list them.
  pico-connectors version
      Print the pico-connectors version this binary was built with, and the
      connectors it links.

Every key of both files can be overridden from the environment:
  PICOMQ_CONNECTORS_{SECTION}_{FIELD}            runtime config
  PICOMQ_CONNECTORS_{SINK|SOURCE}_{KEY}_{FIELD}  a definition's top-level key
  PICOMQ_CONNECTORS_{SINK|SOURCE}_{KEY}_TOPICS_{i}_{FIELD}
  PICOMQ_CONNECTORS_{SINK|SOURCE}_{KEY}_PLUGIN_CONFIG_{FIELD}
`

// Main runs the command line with args (without the program name), writing
// to stdout and stderr and reading the PICOMQ_CONNECTORS_... overrides from
// environ (os.Environ's form), and returns the process's exit code.
func Main(args []string, stdout, stderr io.Writer, environ []string) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd, rest := args[0], args[1:]
	switch cmd {
	case "run":
		return runCmd(rest, stdout, stderr, environ)
	case "validate":
		return validateCmd(rest, stdout, stderr, environ)
	case "config":
		return configCmd(rest, stdout, stderr, environ)
	case "admin":
		return adminCmd(rest, stdout, stderr, environ) // admin.go
	case "check":
		return checkCmd(rest, stdout, stderr, environ) // check.go
	case "version":
		return versionCmd(rest, stdout, stderr) // version.go
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "pico-connectors: unknown command %q; use run, validate, check, config, admin or version\n\n%s", cmd, usage)
	return 2
}
