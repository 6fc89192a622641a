package definition

import (
	"fmt"
	"sort"
	"strings"
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

// Suggest returns the option closest to s when it is close enough to be a
// likely typo, or "".
func Suggest(s string, options []string) string {
	best, bestDist := "", -1
	ls := strings.ToLower(s)
	for _, o := range options {
		d := distance(ls, strings.ToLower(o))
		if bestDist < 0 || d < bestDist {
			best, bestDist = o, d
		}
	}
	if best == "" {
		return ""
	}
	limit := len(s) / 3
	if limit < 2 {
		limit = 2
	}
	if bestDist <= limit || strings.Contains(strings.ToLower(best), ls) || strings.Contains(ls, strings.ToLower(best)) {
		return best
	}
	return ""
}

// didYouMean renders a Suggest result as a sentence fragment, or lists the
// allowed options when nothing is close.
func didYouMean(s string, options []string) string {
	if sug := Suggest(s, options); sug != "" {
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

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	prev := make([]int, len(rb)+1)
	cur := make([]int, len(rb)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(ra); i++ {
		cur[0] = i
		for j := 1; j <= len(rb); j++ {
			cost := 1
			if ra[i-1] == rb[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(rb)]
}
