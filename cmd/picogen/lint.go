package main

import "github.com/picomq/pico-connectors/gen/lint"

func init() {
	commands["lint"] = command{
		summary: "check schemas for unmarked secrets, missing descriptions, bad defaults, undescribed enums",
		run:     lint.Main,
	}
}
