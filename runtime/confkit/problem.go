package confkit

import (
	"errors"
	"strings"
)

// Problem is one thing wrong with a configuration.
type Problem struct {
	// Key is the key path, nested keys joined by ".", such as "max_file_size".
	Key string
	// Value is the offending value as written, masked for secrets; empty
	// when the problem is a missing key.
	Value string
	// Rule names the rule broken: "required", "type", "enum", "format",
	// "unknown-key", "env", "x-maximum", "x-required-if" and so on.
	Rule string
	// Message says what is wrong and what is allowed. When the schema has
	// an x-message for the rule, Message is that text.
	Message string
}

// Error returns "key: message".
func (p Problem) Error() string {
	if p.Key == "" {
		return p.Message
	}
	return p.Key + ": " + p.Message
}

// Problems is every problem found in one configuration. It is an error.
type Problems []Problem

// Error lists the problems, one per line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.Error()
	}
	return strings.Join(lines, "\n")
}

// Err returns ps as an error, or nil when it is empty.
func (ps Problems) Err() error {
	if len(ps) == 0 {
		return nil
	}
	return ps
}

// Has reports whether some problem concerns key.
func (ps Problems) Has(key string) bool {
	for _, p := range ps {
		if p.Key == key {
			return true
		}
	}
	return false
}

// AsProblems returns the Problems inside err, if any.
func AsProblems(err error) (Problems, bool) {
	var ps Problems
	if errors.As(err, &ps) {
		return ps, true
	}
	return nil, false
}
