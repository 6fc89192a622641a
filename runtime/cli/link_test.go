package cli

// The tests run the commands against the standard connectors, as the
// pico-connectors binary links them.
import _ "github.com/picomq/pico-connectors/connectors"
