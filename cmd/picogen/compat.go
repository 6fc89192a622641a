package main

import "github.com/picomq/pico-connectors/gen/compat"

func init() {
	commands["compat"] = command{
		summary: "list breaking schema changes: picogen compat OLD NEW, or --base GIT_REV",
		run:     compat.Main,
	}
}
