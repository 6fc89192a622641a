package definition

import (
	"fmt"
	"sort"
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// Problem is one thing wrong with a runtime config or a definition file:
// the file, the key inside it (dotted, with [i] for array elements, empty
// for the file as a whole) and what is wrong.
type Problem struct {
	File    string
	Key     string
	Message string
}

// String renders the problem as "file: key: message".
func (p Problem) String() string {
	var b strings.Builder
	if p.File != "" {
		b.WriteString(p.File)
		b.WriteString(": ")
	}
	if p.Key != "" {
		b.WriteString(p.Key)
		b.WriteString(": ")
	}
	b.WriteString(p.Message)
	return b.String()
}

// Problems is every problem found while loading; it is an error.
type Problems []Problem

// Error lists every problem, one a line.
func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// didYouMean renders a Suggest result as a sentence fragment, or lists the
// allowed options when nothing is close.
func didYouMean(s string, options []string) string {
	if sug := confkit.Suggest(s, options); sug != "" {
		return fmt.Sprintf("; did you mean %q?", sug)
	}
	if len(options) == 0 {
		return ""
	}
	sorted := append([]string(nil), options...)
	sort.Strings(sorted)
	if len(sorted) > 12 {
		sorted = append(sorted[:12], "...")
	}
	return "; allowed: " + strings.Join(sorted, ", ")
}
