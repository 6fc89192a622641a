package scaffold

import (
	"fmt"
	"io"
	"strings"

	"github.com/picomq/pico-connectors/gen/cmdline"
	"github.com/picomq/pico-connectors/templates"
)

// Usage is the help text of picogen new.
const Usage = `usage: picogen new [--dry-run] [-C ROOT] [--topic TOPIC] sink|source NAME

Writes a new connector NAME_sink or NAME_source into the Go module it runs
in: a starter schema (schemas/), the connector and its tests
(connectors/), and an example definition (examples/). In a module of your
own, the first connector also brings the module's runtime binary
(cmd/BIN/main.go: the standard connectors plus yours) and a runtime config
that runs the examples (examples/runtime.toml). NAME is lower-case letters,
digits and _, starting with a letter. Existing files are never
overwritten; --dry-run lists the files without writing them.
`

// Main runs picogen new with args (without the command name) and returns
// the exit code: 0 on success, 1 when the connector cannot be written, 2
// on a usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := cmdline.Flags("new", Usage, stderr)
	dry := fs.Bool("dry-run", false, "list the files without writing them")
	root := cmdline.Root(fs, "", "repository root (default: the folder holding go.mod, from here up)")
	topic := fs.String("topic", "", "topic of the example definition")
	if code, stop := cmdline.Parse(fs, args); stop {
		return code
	}
	if fs.NArg() != 2 {
		fmt.Fprint(stderr, Usage)
		return 2
	}
	kind, name := fs.Arg(0), fs.Arg(1)
	if err := CheckName(kind, name); err != nil {
		fmt.Fprintf(stderr, "picogen new: %v\n", err)
		return 2
	}
	files, d, err := New(Options{Root: *root, Kind: kind, Name: name, Topic: *topic, DryRun: *dry})
	if err != nil {
		fmt.Fprintf(stderr, "picogen new: %v\n", err)
		return 1
	}
	verb := "wrote"
	if *dry {
		verb = "would write"
	}
	fmt.Fprintf(stdout, "%s %s:\n", verb, d.Name)
	for _, f := range files {
		fmt.Fprintf(stdout, "  %s\n", f.Path)
	}
	if *dry {
		fmt.Fprintln(stdout, "(dry run: nothing written)")
		return 0
	}
	fmt.Fprint(stdout, NextSteps(d))
	return 0
}

// NextSteps is what picogen new prints after writing connector d.
func NextSteps(d templates.Data) string {
	code := "sink.go"
	if d.Kind == "source" {
		code = "source.go"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\nNext steps:\n")
	fmt.Fprintf(&b, "  1. go generate ./...\n")
	fmt.Fprintf(&b, "     writes generated/%s/ from the schema and links the connector into the binaries\n", d.ConfigPkg)
	if !d.InSDK() {
		fmt.Fprintf(&b, "     then go mod tidy, which records the modules the connector and the binary import\n")
	}
	fmt.Fprintf(&b, "  2. go test ./connectors/%s/...\n", d.Name)
	fmt.Fprintf(&b, "     runs its tests, including the connector test kit's conformance suite\n")
	if d.InSDK() {
		fmt.Fprintf(&b, "  3. cp examples/%s.toml examples/demo/connectors/ && go run ./cmd/pico-connectors validate --config examples/demo/runtime.toml\n", d.Name)
		fmt.Fprintf(&b, "     adds it to the demo and checks the definition; go run ./cmd/pico-connectors run --config examples/demo/runtime.toml runs it\n")
	} else {
		fmt.Fprintf(&b, "  3. go run ./cmd/%s validate --config examples/runtime.toml\n", d.Bin)
		fmt.Fprintf(&b, "     checks every definition in %s; go run ./cmd/%s run --config examples/runtime.toml runs them\n", d.ExampleDir, d.Bin)
	}
	fmt.Fprintf(&b, "Then make it do the real work in schemas/%s.json and connectors/%s/%s (rerun step 1 after each schema change).\n", d.Name, d.Name, code)
	return b.String()
}
