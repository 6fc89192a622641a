package main

import "github.com/picomq/pico-connectors/gen/scaffold"

func init() {
	commands["new"] = command{
		summary: "scaffold a new connector: picogen new sink|source NAME [--dry-run]",
		run:     scaffold.Main,
	}
}
