package main

import (
	"fmt"
	"io"

	"github.com/picomq/pico-connectors/sdk"
)

func init() {
	commands["version"] = command{
		summary: "print the pico-connectors version picogen was built from",
		run: func(args []string, stdout, stderr io.Writer) int {
			if len(args) > 0 {
				fmt.Fprintf(stderr, "picogen version takes no arguments, got %q\n", args)
				return 2
			}
			fmt.Fprintf(stdout, "picogen %s\n", sdk.Version())
			return 0
		},
	}
}
