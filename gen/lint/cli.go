package lint

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/picomq/pico-connectors/gen/cmdline"
)

// Usage is the help text of picogen lint.
const Usage = `usage: picogen lint [SCHEMA.json ...]

Checks connector schemas (default: every schemas/*.json) for keys that look
secret but are not marked x-secret, missing descriptions, defaults that fail
their own rules and enum values without descriptions. Exits 1 on any finding.
`

// Main runs picogen lint with args (without the command name) and returns
// the exit code: 0 when clean, 1 on a finding, 2 on a usage or read error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := cmdline.Flags("lint", Usage, stderr)
	dir := cmdline.Root(fs, ".", "repository root, for the default schema list")
	if code, stop := cmdline.Parse(fs, args); stop {
		return code
	}
	var (
		found Findings
		err   error
		n     int
	)
	if fs.NArg() == 0 {
		m, _ := filepath.Glob(filepath.Join(*dir, "schemas", "*.json"))
		n = len(m)
		found, err = Dir(filepath.Join(*dir, "schemas"))
	} else {
		n = fs.NArg()
		found, err = Files(fs.Args()...)
	}
	if err != nil {
		fmt.Fprintf(stderr, "picogen lint: %v\n", err)
		return 2
	}
	for _, f := range found {
		fmt.Fprintln(stdout, f)
	}
	if len(found) > 0 {
		fmt.Fprintf(stdout, "%d finding(s) in %d schema(s)\n", len(found), n)
		return 1
	}
	fmt.Fprintf(stdout, "%d schema(s) clean\n", n)
	return 0
}
