package gocode

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

// comment returns line comments for text: every line prefixed with "// ",
// control characters and invalid UTF-8 replaced, so no description can end
// a comment early or break the file.
func comment(text string) *jen.Statement {
	st := jen.Null()
	for i, line := range commentLines(text) {
		if i > 0 {
			st.Line()
		}
		st.Comment(strings.TrimRight("// "+line, " "))
	}
	return st
}

func commentLines(text string) []string {
	text = strings.ToValidUTF8(text, "\uFFFD")
	text = strings.NewReplacer("\r\n", "\n", "\r", "\n", "\u2028", "\n", "\u2029", "\n").Replace(text)
	var out []string
	for _, line := range strings.Split(text, "\n") {
		line = strings.Map(func(r rune) rune {
			if r == '\t' {
				return ' '
			}
			if unicode.IsControl(r) || r == '\uFEFF' {
				return -1
			}
			return r
		}, line)
		out = append(out, strings.TrimSpace(line))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// Summary is the first sentence of a description, on one line.
func Summary(desc string) string {
	d := strings.Join(strings.Fields(strings.ToValidUTF8(desc, "\uFFFD")), " ")
	if i := strings.Index(d, ". "); i >= 0 {
		d = d[:i+1]
	}
	return d
}

// wrap breaks text into lines of at most 76 characters, as a comment.
func wrap(text string) string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(text) {
		if line != "" && len(line)+1+len(w) > 76 {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	return strings.Join(append(lines, line), "\n")
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// defaultWords describes the default for docs and comments.
func defaultWords(pr *model.Property) string {
	var parts []string
	for _, d := range pr.DefaultIf {
		parts = append(parts, fmt.Sprintf("%s when %s", jsonText(d.Value), CondWords(d.When)))
	}
	if pr.HasDefault {
		w := jsonText(pr.Default)
		if len(parts) > 0 {
			w += " otherwise"
		}
		parts = append(parts, w)
	}
	return strings.Join(parts, ", ")
}

// DefaultWords is defaultWords for the docs generator.
func DefaultWords(pr *model.Property) string { return defaultWords(pr) }

func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// CondWords says a condition in words.
func CondWords(c model.Cond) string {
	if c.Present != nil {
		if *c.Present {
			return c.Key + " is set"
		}
		return c.Key + " is not set"
	}
	return fmt.Sprintf("%s is %s", c.Key, jsonText(c.Equals))
}
