// Package cmdline is the flag handling that every picogen subcommand
// shares: a flag set that prints the command's help, the -C (or -root)
// repository root, and the exit codes of -h and of a bad flag.
package cmdline

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Flags returns an empty flag set for the subcommand name that reports to
// stderr and, when usage is not empty, prints usage for -h and after a bad
// flag.
func Flags(name, usage string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	if usage != "" {
		fs.Usage = func() { fmt.Fprint(stderr, usage) }
	}
	return fs
}

// Root defines -C and its alias -root, the repository root, with the
// default def and the help text help.
func Root(fs *flag.FlagSet, def, help string) *string {
	root := fs.String("C", def, help)
	fs.StringVar(root, "root", def, "same as -C")
	return root
}

// Parse parses args into fs. stop is true when the command must end at
// once, with the exit code code: 0 after -h or --help, 2 after a bad flag.
func Parse(fs *flag.FlagSet, args []string) (code int, stop bool) {
	err := fs.Parse(args)
	switch {
	case err == nil:
		return 0, false
	case errors.Is(err, flag.ErrHelp):
		return 0, true
	}
	return 2, true
}
