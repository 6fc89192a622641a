package docsite

import (
	"fmt"
	"io"

	"github.com/picomq/pico-connectors/gen/cmdline"
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
	fs := cmdline.Flags("docs", Usage, stderr)
	out := fs.String("out", "", "output folder")
	format := fs.String("format", "md", "md or html")
	root := cmdline.Root(fs, ".", "repository root")
	if code, stop := cmdline.Parse(fs, args); stop {
		return code
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
