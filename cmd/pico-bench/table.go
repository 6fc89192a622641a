package main

import (
	"fmt"
	"runtime"
	"strings"
	"time"
)

// human prints a figure with a k/M suffix and its unit.
func human(v float64, unit string) string {
	switch {
	case unit == "MiB" || unit == "MB/s":
		return fmt.Sprintf("%.1f %s", v, unit)
	case v >= 10e6:
		return fmt.Sprintf("%.1fM %s", v/1e6, unit)
	case v >= 10e3:
		return fmt.Sprintf("%.0fk %s", v/1e3, unit)
	default:
		return fmt.Sprintf("%.0f %s", v, unit)
	}
}

func cells(r row) []string {
	return []string{r.Name, human(r.Value, r.Unit), r.BaseName, human(r.BaseValue, r.BaseUnit), fmt.Sprintf("%.2f", r.Ratio), r.Note}
}

var header = []string{"Measured", "Figure", "Baseline (same run)", "Baseline", "Ratio", "Note"}

// formatTable renders the rows as an aligned plain-text table.
func formatTable(rows []row) string {
	all := [][]string{header}
	for _, r := range rows {
		all = append(all, cells(r))
	}
	w := make([]int, len(header))
	for _, c := range all {
		for i, s := range c {
			w[i] = max(w[i], len([]rune(s)))
		}
	}
	var b strings.Builder
	for n, c := range all {
		for i, s := range c {
			if i > 0 {
				b.WriteString("  ")
			}
			pad := w[i] - len([]rune(s))
			if i == 1 || i == 3 || i == 4 {
				b.WriteString(strings.Repeat(" ", pad) + s)
			} else if i == len(c)-1 {
				b.WriteString(s)
			} else {
				b.WriteString(s + strings.Repeat(" ", pad))
			}
		}
		b.WriteString("\n")
		if n == 0 {
			for i := range w {
				if i > 0 {
					b.WriteString("  ")
				}
				b.WriteString(strings.Repeat("-", w[i]))
			}
			b.WriteString("\n")
		}
	}
	return b.String()
}

// formatMarkdown renders the rows as a Markdown table with a line saying
// where and how long it ran.
func formatMarkdown(rows []row, took time.Duration, load string) string {
	var b strings.Builder
	b.WriteString("| " + strings.Join(header, " | ") + " |\n")
	b.WriteString("|---|---:|---|---:|---:|---|\n")
	for _, r := range rows {
		c := cells(r)
		for i := range c {
			c[i] = strings.ReplaceAll(c[i], "|", `\|`)
		}
		b.WriteString("| " + strings.Join(c, " | ") + " |\n")
	}
	fmt.Fprintf(&b, "\n`make bench` on %d CPUs (%s/%s, %s), %s in total, started at load average %s. Ratio = figure / baseline; for RSS rows, peak RSS / the memory bound in the baseline column (lower is better).\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), took.Round(time.Second), load)
	return b.String()
}
