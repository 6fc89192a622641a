package cli

import (
	"context"
	"fmt"
	"io"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/picomq/pico-connectors/runtime/definition"
	"github.com/picomq/pico-connectors/sdk"
)

const adminUsage = `Usage:
  pico-connectors admin --config FILE KEY [COMMAND [ARGS]]
      Run an operator command of connector KEY (or sink/KEY, source/KEY)
      with its effective definition, whether or not it is enabled or
      running. Without COMMAND, list the commands the connector offers.
`

// adminCmd runs a command a connector registered with sdk.RegisterAdmin.
// The binary knows nothing of what the command does.
func adminCmd(args []string, stdout, stderr io.Writer, environ []string) int {
	path, _, pos, ok := parseFlags("admin", args, stderr, false)
	if !ok {
		fmt.Fprint(stderr, adminUsage)
		return 2
	}
	if len(pos) == 0 {
		fmt.Fprintf(stderr, "pico-connectors admin: KEY is required\n%s", adminUsage)
		return 2
	}
	cfg, loadErr := definition.Load(path, definition.Environ(environ))
	if cfg == nil {
		printProblems(stderr, loadErr)
		return 1
	}
	def, err := findDefinition(cfg, pos[0])
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if def.Plugin == nil {
		fmt.Fprintf(stderr, "pico-connectors admin: the definition of %q (%s) did not load; fix it first:\n", def.Key, def.File)
		if loadErr != nil {
			printProblems(stderr, loadErr)
		}
		return 1
	}
	cmds := sdk.AdminCommands(def.Path)
	if len(pos) == 1 {
		if len(cmds) == 0 {
			fmt.Fprintf(stdout, "%s %s (%s) offers no admin commands\n", def.Type, def.Key, def.Path)
			return 0
		}
		fmt.Fprintf(stdout, "admin commands of %s %s (%s):\n", def.Type, def.Key, def.Path)
		tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
		for _, c := range cmds {
			fmt.Fprintf(tw, "  %s\t%s\n", strings.TrimSpace(c.Name+" "+c.Args), c.Summary)
		}
		_ = tw.Flush()
		return 0
	}
	name := pos[1]
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
		if c.Name != name {
			continue
		}
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		defer stop()
		err := c.Run(ctx, sdk.AdminRequest{Key: def.Key, Config: def.Plugin, Args: pos[2:], Out: stdout})
		if err != nil {
			fmt.Fprintf(stderr, "pico-connectors admin %s %s: %v\n", def.Key, name, err)
			return 1
		}
		return 0
	}
	if len(names) == 0 {
		fmt.Fprintf(stderr, "pico-connectors admin: %s %s (%s) offers no admin commands\n", def.Type, def.Key, def.Path)
	} else {
		fmt.Fprintf(stderr, "pico-connectors admin: %s %s has no command %q; it offers %s\n", def.Type, def.Key, name, strings.Join(names, ", "))
	}
	return 2
}
