package definition

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"regexp"
	"unicode/utf8"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Bounds of a file Load reads: the runtime config and each definition.
// The TOML parser's time and memory grow with nesting (200,000 nested
// arrays took 25 s and 794 MB), and a file of either kind needs a few
// kilobytes and a few levels.
const (
	// MaxFileSize is the largest file Load reads.
	MaxFileSize = 1 << 20
	// MaxNesting is how deeply tables, arrays and inline tables may nest.
	MaxNesting = 32
)

// readLimited reads path, refusing a file larger than MaxFileSize.
func readLimited(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("the file is larger than %d bytes (1 MiB), the most a runtime config or definition file may be; keep large data, such as schemas, in files the definition names", MaxFileSize)
	}
	return data, nil
}

// checkBrackets returns an error when the arrays and inline tables of TOML
// text nest deeper than MaxNesting, before the parser sees it. Brackets in
// strings and comments do not count.
func checkBrackets(text []byte) error {
	depth, line := 0, 1
	for i := 0; i < len(text); i++ {
		switch c := text[i]; c {
		case '\n':
			line++
		case '#':
			for i < len(text) && text[i] != '\n' {
				i++
			}
			i-- // count the newline
		case '"', '\'':
			delim := []byte{c}
			if triple := bytes.Repeat(delim, 3); bytes.HasPrefix(text[i:], triple) {
				delim = triple
			}
			end := stringEnd(text, i+len(delim), delim, c == '"')
			line += bytes.Count(text[i:end], []byte("\n"))
			i = end - 1
		case '[', '{':
			if depth++; depth > MaxNesting {
				return fmt.Errorf("line %d: arrays and tables nest more than %d levels deep; a runtime config or definition needs only a few", line, MaxNesting)
			}
		case ']', '}':
			depth = max(depth-1, 0)
		}
	}
	return nil
}

// stringEnd returns the index just after the string that starts at from
// (after its opening delim), or the end of its line for a one-line string
// without an end (the parser reports it).
func stringEnd(text []byte, from int, delim []byte, escapes bool) int {
	for i := from; i < len(text); i++ {
		switch {
		case escapes && text[i] == '\\':
			i++
		case len(delim) == 1 && text[i] == '\n':
			return i
		case bytes.HasPrefix(text[i:], delim):
			return i + len(delim)
		}
	}
	return len(text)
}

// checkNesting returns the key path of the first value of raw that nests
// tables and arrays deeper than MaxNesting (dotted keys and table headers
// nest without brackets), or "" when none does.
func checkNesting(raw map[string]any) string {
	var walk func(v any, path string, depth int) string
	walk = func(v any, path string, depth int) string {
		if depth > MaxNesting {
			return path
		}
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				if p := walk(e, joinKey(path, quoteKey(k)), depth+1); p != "" {
					return p
				}
			}
		case []map[string]any:
			for i, e := range t {
				if p := walk(e, fmt.Sprintf("%s[%d]", path, i), depth+1); p != "" {
					return p
				}
			}
		case []any:
			for i, e := range t {
				if p := walk(e, fmt.Sprintf("%s[%d]", path, i), depth+1); p != "" {
					return p
				}
			}
		}
		return ""
	}
	return walk(raw, "", 0)
}

// Shown lengths of what a problem quotes from a file or the environment.
const (
	maxShown  = 200 // a quoted value or a word longer than this is cut
	shownHead = 160 // to this many bytes
)

// shownRun is a Go-quoted value or a run of characters other than spaces.
var shownRun = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|\S+`)

// clipProblems cuts every quoted value and word longer than maxShown in
// the problems' keys, values and messages to its first shownHead bytes,
// followed by the length it had, so one oversized value (a 400 KB array
// or key) cannot make a problem unreadable.
func clipProblems(ps confkit.Problems) confkit.Problems {
	for i := range ps {
		ps[i].Key = clipValues(ps[i].Key)
		ps[i].Value = clipValues(ps[i].Value)
		ps[i].Message = clipValues(ps[i].Message)
	}
	return ps
}

// clipValues cuts each quoted value and word of s longer than maxShown.
func clipValues(s string) string {
	if len(s) <= maxShown {
		return s
	}
	return shownRun.ReplaceAllStringFunc(s, func(run string) string {
		if len(run) <= maxShown {
			return run
		}
		n := shownHead
		for n > 0 && !utf8.RuneStart(run[n]) {
			n-- // cut between characters
		}
		head := run[:n]
		closing := ""
		if run[0] == '"' && run[len(run)-1] == '"' {
			closing = `"`
		}
		return fmt.Sprintf("%s…%s (%d bytes)", head, closing, len(run))
	})
}
