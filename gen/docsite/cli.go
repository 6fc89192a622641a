package docsite

import (
	"errors"
	"flag"
	"fmt"
	"io"
)

// Usage is the help text of picogen docs.
const Usage = `usage: picogen docs --out DIR [--format md|html] [-C ROOT]

Publishes the reference: a catalog of every connector, one page per
connector (Configuration table with env variables, rules, an example
definition), the runtime config and definition-file reference, and the
schema dialect. --format html writes a static site with one stylesheet and
no external assets; the JSON Schemas are copied under DIR/schemas.
Run go generate ./... first: the pages come from generated/docs.
`

// Main runs picogen docs with args (without the command name) and returns
// the exit code: 0 on success, 1 when the site cannot be built, 2 on a
// usage error.
func Main(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("docs", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { fmt.Fprint(stderr, Usage) }
	out := fs.String("out", "", "output folder")
	format := fs.String("format", "md", "md or html")
	root := fs.String("C", ".", "repository root")
	fs.StringVar(root, "root", ".", "same as -C")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprint(stderr, Usage)
		return 2
	}
	if *format != string(Markdown) && *format != string(HTML) {
		fmt.Fprintf(stderr, "picogen docs: unknown format %q: use md or html\n", *format)
		return 2
	}
	site, err := Build(Options{Root: *root, Out: *out, Format: Format(*format)})
	if err != nil {
		fmt.Fprintf(stderr, "picogen docs: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "wrote %d pages (%d connectors and transforms) and %d JSON Schemas to %s\n",
		len(site.Pages), len(site.Plugins), len(site.Schemas), *out)
	return 0
}
