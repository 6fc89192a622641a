package sdk

import "github.com/picomq/pico-connectors/runtime/confkit"

// Secret holds a credential of a generated Config, such as an API token:
// every way of printing it shows a mask; only Reveal returns the value.
// Build one in code with NewSecret.
type Secret = confkit.Secret

// NewSecret wraps a credential, for a Config built in code.
func NewSecret(value string) Secret { return confkit.NewSecret(value) }

// Problem is one thing wrong with a configuration: the key, the bad value
// (masked for secrets), the rule and a message that says what is allowed.
type Problem = confkit.Problem

// Problems is every problem found in one configuration; it is an error.
// A check passed to a generated Register function returns Problems to name
// the keys at fault, so that validate reports them as it reports the
// schema's own.
type Problems = confkit.Problems
