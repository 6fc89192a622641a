package main

import "github.com/picomq/pico-connectors/gen/docsite"

func init() {
	commands["docs"] = command{
		summary: "publish the reference: picogen docs --out DIR [--format md|html]",
		run:     docsite.Main,
	}
}
