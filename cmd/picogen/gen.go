package main

import (
	"fmt"
	"io"
	"path/filepath"

	"github.com/picomq/pico-connectors/gen"
	"github.com/picomq/pico-connectors/gen/cmdline"
	"github.com/picomq/pico-connectors/gen/lint"
)

func init() {
	commands["gen"] = command{
		summary: "regenerate generated/ (config packages, docs, registry) and schemas/runtime/ from schemas/",
		run:     runGen,
	}
}

func runGen(args []string, stdout, stderr io.Writer) int {
	fs := cmdline.Flags("picogen gen", "", stderr)
	rootFlag := cmdline.Root(fs, "", "repository root (default: the folder holding go.mod, found from the working directory)")
	out := fs.String("out", "generated", "output folder, relative to the root")
	verbose := fs.Bool("v", false, "list the files written")
	if code, stop := cmdline.Parse(fs, args); stop {
		return code
	}
	root, err := gen.RootOrFind(*rootFlag)
	if err != nil {
		fmt.Fprintln(stderr, "picogen gen:", err)
		return 1
	}
	// Lint first: a schema that lints dirty would generate code and docs
	// that mislead (an unmasked secret, an undocumented key).
	findings, err := lint.Dir(filepath.Join(root, "schemas"))
	if err != nil {
		fmt.Fprintln(stderr, "picogen gen:", err)
		return 1
	}
	if len(findings) > 0 {
		fmt.Fprintln(stderr, findings.Error())
		fmt.Fprintf(stderr, "picogen gen: %d lint finding(s); fix the schemas above (see schemas/README.md) and run it again\n", len(findings))
		return 1
	}
	changed, err := gen.Write(gen.Options{Root: root, Out: *out})
	if err != nil {
		fmt.Fprintln(stderr, "picogen gen:", err)
		return 1
	}
	if *verbose {
		for _, c := range changed {
			fmt.Fprintln(stdout, c)
		}
	}
	return 0
}
