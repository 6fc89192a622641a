package confkit

import (
	"errors"
	"strings"
)

// Problem is one thing wrong with a configuration: the runtime config, a
// definition file, the plugin_config of a connector or a schema. It is the
// one problem type of the module; the runtime's loader (runtime/definition),
// the generated packages and picogen all report Problems.
type Problem struct {
	// File is the file the configuration came from, as the user named it
	// ("connectors/orders_s3.toml"), or empty when there is no file, as for
	// a Config built in code.
	File string
	// Key is the key path, nested keys joined by "." and array elements as
	// [i], such as "max_file_size" or "topics[0].pattern"; for a schema it
	// is the JSON pointer, such as "/properties/bucket/default". Empty when
	// the problem is about the whole file.
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

// Error returns "file: key: message", leaving out an empty file or key. A
// key that is a JSON pointer (a schema's problem) reads "at /pointer".
func (p Problem) Error() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(": ")
	}
	if strings.HasPrefix(p.Key, "/") {
		b.WriteString("at ")
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
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

// ProblemsOf returns err as problems: its own when it holds some (joined
// errors one by one), else one problem of the whole table per line of its
// message. It returns nil for a nil err.
func ProblemsOf(err error) Problems {
	if err == nil {
		return nil
	}
	var ps Problems
	var p Problem
	switch {
	case errors.As(err, &ps):
		return append(Problems(nil), ps...)
	case errors.As(err, &p):
		return Problems{p}
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		var out Problems
		for _, e := range j.Unwrap() {
			out = append(out, ProblemsOf(e)...)
		}
		if len(out) > 0 {
			return out
		}
	}
	var out Problems
	for _, line := range strings.Split(err.Error(), "\n") {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, Problem{Message: line})
		}
	}
	return out
}
