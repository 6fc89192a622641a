package cli

import (
	"fmt"
	"io"

	"github.com/picomq/pico-connectors/sdk"
)

// versionCmd prints the SDK version this binary was built with, then each
// linked connector and transform.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "pico-connectors version takes no arguments, got %q\n", args)
		return 2
	}
	fmt.Fprintf(stdout, "pico-connectors %s\n", sdk.Version())
	for _, r := range sdk.All() {
		fmt.Fprintf(stdout, "  %-9s %s\n", r.Kind, r.Path)
	}
	return 0
}
