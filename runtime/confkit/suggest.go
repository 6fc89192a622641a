package confkit

import (
	"slices"
	"strings"
)

// Suggest returns the candidate closest to name by edit distance (case
// folded), or "" when none is close enough to be a likely typo: the distance
// must be at most a third of the longer name, and at least 1 is allowed for
// names of three or more characters.
func Suggest(name string, candidates []string) string {
	best, bestD := "", -1
	ln := strings.ToLower(name)
	for _, c := range candidates {
		d := levenshtein(ln, strings.ToLower(c))
		limit := max(len(name), len(c)) / 3
		if limit < 1 && max(len(name), len(c)) >= 3 {
			limit = 1
		}
		if strings.HasPrefix(strings.ToLower(c), ln) && len(ln) >= 3 {
			d = min(d, limit)
		}
		if d <= limit && (bestD < 0 || d < bestD) {
			best, bestD = c, d
		}
	}
	return best
}

// DidYouMean returns ` (did you mean "x"?)` for the Suggest result, or ""
// when no candidate is close. It is the one wording of a suggestion in the
// module: the runtime's loader, the generated packages, picogen lint and
// the command line all use it.
func DidYouMean(name string, candidates []string) string {
	if s := Suggest(name, candidates); s != "" {
		return ` (did you mean "` + s + `"?)`
	}
	return ""
}

// DidYouMeanOrAllowed is DidYouMean, or, when no candidate is close,
// "; allowed: a, b, ..." listing the candidates sorted (the first twelve),
// or "" when there are none.
func DidYouMeanOrAllowed(name string, candidates []string) string {
	if s := DidYouMean(name, candidates); s != "" {
		return s
	}
	if len(candidates) == 0 {
		return ""
	}
	sorted := slices.Sorted(slices.Values(candidates))
	if len(sorted) > 12 {
		sorted = append(sorted[:12], "...")
	}
	return "; allowed: " + strings.Join(sorted, ", ")
}

// levenshtein is the optimal-string-alignment distance of a and b: edits
// are insertions, deletions, substitutions and swaps of two neighbours, so
// the common typo "gne" for "gen" counts as one edit.
func levenshtein(a, b string) int {
	ra, rb := []rune(a), []rune(b)
	if len(ra) > 256 || len(rb) > 256 {
		if a == b {
			return 0
		}
		return max(len(ra), len(rb))
	}
	// Three rows: two back (for swaps), one back, and the current one.
	prev2 := make([]int, len(rb)+1)
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
			if i > 1 && j > 1 && ra[i-1] == rb[j-2] && ra[i-2] == rb[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(rb)]
}
