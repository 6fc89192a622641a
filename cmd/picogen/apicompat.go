package main

import "github.com/picomq/pico-connectors/gen/apicompat"

func init() {
	commands["apicompat"] = command{
		summary: "list incompatible Go API changes of the SDK's packages: picogen apicompat --base GIT_REV",
		run:     apicompat.Main,
	}
}
