package sdk

import (
	"context"
	"fmt"
	"io"
	"sort"
)

// Health is an optional interface of a Source or a Sink: a condition the
// connector watches outside Poll and Consume, such as a resource it pins on
// the other system, or uploads that keep failing while no record arrives.
// The source loop calls Health before every Poll, the sink loop every
// second. A non-nil error sets the status Error with its message while the
// connector keeps running (Poll and Consume go on, so a connector that is
// behind can catch up); nil again returns the status to Running. Health
// must be cheap: it reads what the connector's own monitor last saw, it
// does not query anything.
type Health interface {
	Health() error
}

// AdminCommand is an operator command a connector offers outside of a
// running runtime, such as listing or dropping what it created on the
// other system. The binary runs it as
//
//	pico-connectors admin --config FILE KEY NAME [ARGS]
//
// with the connector's effective configuration (environment overrides
// applied); the runtime itself knows nothing of what the command does.
type AdminCommand struct {
	// Name is what the operator types, such as "slots".
	Name string
	// Args describes the arguments for the usage text, such as "[NAME]".
	Args string
	// Summary is one line for the usage text.
	Summary string
	// Run runs the command. An error is printed and the binary exits 1.
	Run func(ctx context.Context, req AdminRequest) error
}

// AdminRequest is what an AdminCommand receives.
type AdminRequest struct {
	// Key is the connector's key from its definition file.
	Key string
	// Config is the connector's typed configuration, as its registration's
	// Load returned it.
	Config Config
	// Args are the words after the command's name.
	Args []string
	// Out receives the command's output.
	Out io.Writer
}

var admin = map[string][]AdminCommand{}

// RegisterAdmin adds admin commands for the connector registered under
// path. It panics on a command name registered twice for one path, a
// programming error caught by the first test that links the connector.
func RegisterAdmin(path string, cmds ...AdminCommand) {
	registry.Lock()
	defer registry.Unlock()
	for _, c := range cmds {
		for _, have := range admin[path] {
			if have.Name == c.Name {
				panic(fmt.Sprintf("plugin: admin command %q of %q registered twice", c.Name, path))
			}
		}
		admin[path] = append(admin[path], c)
	}
	sort.Slice(admin[path], func(i, j int) bool { return admin[path][i].Name < admin[path][j].Name })
}

// AdminCommands returns the admin commands of the connector registered
// under path, sorted by name.
func AdminCommands(path string) []AdminCommand {
	registry.RLock()
	defer registry.RUnlock()
	return append([]AdminCommand(nil), admin[path]...)
}
