package confkit

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Template is a parsed string with {placeholders}, such as an object key
// template "{topic}/{date}/{hour}" or "{topic_segment[-1]}".
type Template struct {
	// Source is the text as written.
	Source string
	// Parts is the text split into literals and placeholders, in order.
	Parts []TemplatePart
}

// TemplatePart is one literal run or one placeholder of a Template.
type TemplatePart struct {
	// Text is the literal text; empty for a placeholder.
	Text string
	// Name is the placeholder name, "" for a literal.
	Name string
	// Arg is the index of {name[n]}, which may be negative.
	Arg int
	// HasArg reports whether the placeholder was written with an index.
	HasArg bool
	// Param is the text after the colon of {name:param}, such as the
	// field path of {field:customer.region}.
	Param string
	// HasParam reports whether the placeholder was written with a colon.
	HasParam bool
}

// ParseTemplate parses s, allowing only the placeholders named in allowed.
// An allowed entry "name" permits {name}; "name[n]" (any text between the
// brackets) permits {name[3]} and {name[-1]} and requires the index;
// "name:text" (any text after the colon) permits {name:anything} and
// requires the text after the colon, which may hold any character but a
// brace. A nil allowed list accepts any placeholder name.
//
// ParseTemplate rejects unknown placeholders (with a suggestion), unbalanced
// or nested braces, empty placeholders, ".." path segments and a leading "/".
func ParseTemplate(s string, allowed []string) (Template, error) {
	if strings.HasPrefix(s, "/") {
		return Template{}, fmt.Errorf("template %q must not start with '/'", s)
	}
	for seg := range strings.SplitSeq(s, "/") {
		if seg == ".." {
			return Template{}, fmt.Errorf("template %q must not contain '..' path segments", s)
		}
	}
	return ParsePlaceholders(s, allowed)
}

// ParsePlaceholders is ParseTemplate without its path rules (a leading "/",
// ".." segments): the one {placeholder} grammar, for templates that are no
// path (a routing rule's topic template) and for paths whose renderer
// cleans them itself (the S3 sink's object keys built in code).
func ParsePlaceholders(s string, allowed []string) (Template, error) {
	t := Template{Source: s}
	if s != "" {
		// Every placeholder may follow a literal, and one literal may end it.
		t.Parts = make([]TemplatePart, 0, 2*strings.Count(s, "{")+1)
	}
	lit := 0 // where the current literal starts
	for i := 0; i < len(s); {
		switch s[i] {
		case '}':
			return Template{}, fmt.Errorf("template %q has an unbalanced '}' at byte %d", s, i)
		case '{':
			end := strings.IndexAny(s[i+1:], "{}") // the brace that closes it
			if end < 0 || s[i+1+end] == '{' {
				return Template{}, fmt.Errorf("template %q has an unbalanced '{' at byte %d", s, i)
			}
			end += i + 1
			body := s[i+1 : end]
			p, err := parsePlaceholder(s, body)
			if err != nil {
				return Template{}, err
			}
			if allowed != nil {
				if err := checkAllowed(s, body, p, allowed); err != nil {
					return Template{}, err
				}
			}
			if lit < i {
				t.Parts = append(t.Parts, TemplatePart{Text: s[lit:i]})
			}
			t.Parts = append(t.Parts, p)
			i = end + 1
			lit = i
		default:
			i++
		}
	}
	if lit < len(s) {
		t.Parts = append(t.Parts, TemplatePart{Text: s[lit:]})
	}
	return t, nil
}

// checkAllowed says why allowed does not permit the placeholder p, written
// {body} in the template src, or nil when it does.
func checkAllowed(src, body string, p TemplatePart, allowed []string) error {
	plain, indexed, param := false, false, false
	for _, a := range allowed {
		if name, ok := indexedName(a); ok {
			indexed = indexed || name == p.Name
		} else if name, _, ok := strings.Cut(a, ":"); ok {
			param = param || name == p.Name
		} else {
			plain = plain || a == p.Name
		}
	}
	switch {
	case param && !p.HasParam && !plain && !indexed:
		return fmt.Errorf("template %q: placeholder {%s} needs a value after a colon, such as {%s:name}", src, p.Name, p.Name)
	case p.HasParam && !param && (plain || indexed):
		return fmt.Errorf("template %q: placeholder {%s} takes no ':' value", src, p.Name)
	case p.HasParam && param:
		return nil
	case p.HasArg && !indexed && plain:
		return fmt.Errorf("template %q: placeholder {%s} takes no index", src, p.Name)
	case !p.HasArg && indexed && !plain:
		return fmt.Errorf("template %q: placeholder {%s} needs an index, such as {%s[0]} or {%s[-1]}", src, p.Name, p.Name, p.Name)
	case !plain && !indexed && !param:
		names := make([]string, len(allowed))
		for i, a := range allowed {
			names[i] = a
			if name, ok := indexedName(a); ok {
				names[i] = name
			} else if name, _, ok := strings.Cut(a, ":"); ok {
				names[i] = name
			}
		}
		msg := fmt.Sprintf("template %q: unknown placeholder {%s}", src, body)
		if sug := Suggest(p.Name, names); sug != "" {
			msg += fmt.Sprintf(" (did you mean {%s}?)", sug)
		}
		return errors.New(msg + "; allowed: " + allowedList(allowed))
	}
	return nil
}

// indexedName returns name for an allowed entry "name[n]".
func indexedName(a string) (string, bool) {
	if i := strings.IndexByte(a, '['); i > 0 && strings.HasSuffix(a, "]") {
		return a[:i], true
	}
	return "", false
}

func allowedList(allowed []string) string {
	out := make([]string, len(allowed))
	for i, a := range allowed {
		out[i] = "{" + a + "}"
	}
	return strings.Join(out, ", ")
}

func parsePlaceholder(src, body string) (TemplatePart, error) {
	if body == "" {
		return TemplatePart{}, fmt.Errorf("template %q has an empty placeholder {}", src)
	}
	if name, param, ok := strings.Cut(body, ":"); ok {
		if param == "" {
			return TemplatePart{}, fmt.Errorf("template %q: placeholder {%s} needs a value after the colon, such as {%sname}", src, body, body)
		}
		if err := checkName(src, body, name); err != nil {
			return TemplatePart{}, err
		}
		return TemplatePart{Name: name, Param: param, HasParam: true}, nil
	}
	name, arg := body, ""
	hasArg := false
	if i := strings.IndexByte(body, '['); i >= 0 {
		if !strings.HasSuffix(body, "]") || i == 0 {
			return TemplatePart{}, fmt.Errorf("template %q: malformed placeholder {%s}, write {name} or {name[n]}", src, body)
		}
		name, arg, hasArg = body[:i], body[i+1:len(body)-1], true
	}
	if err := checkName(src, body, name); err != nil {
		return TemplatePart{}, err
	}
	p := TemplatePart{Name: name, HasArg: hasArg}
	if hasArg {
		n, err := strconv.Atoi(arg)
		if err != nil || len(arg) > 6 {
			return TemplatePart{}, fmt.Errorf("template %q: index of {%s} must be an integer such as 0 or -1", src, body)
		}
		p.Arg = n
	}
	return p, nil
}

// checkName reports a placeholder name that is not letters, digits and _.
func checkName(src, body, name string) error {
	for _, r := range name {
		if !(r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return fmt.Errorf("template %q: malformed placeholder {%s}, names use letters, digits and _", src, body)
		}
	}
	if name == "" {
		return fmt.Errorf("template %q: malformed placeholder {%s}, write {name:value}", src, body)
	}
	return nil
}

// String returns the source text.
func (t Template) String() string { return t.Source }

// MarshalText writes the source text.
func (t Template) MarshalText() ([]byte, error) { return []byte(t.Source), nil }

// Placeholders returns the distinct placeholder names used, in order of
// first use.
func (t Template) Placeholders() []string {
	var out []string
	seen := map[string]bool{}
	for _, p := range t.Parts {
		if p.Name != "" && !seen[p.Name] {
			seen[p.Name] = true
			out = append(out, p.Name)
		}
	}
	return out
}

// Render builds the string, asking value for each placeholder. The first
// error value returns stops rendering and is returned.
func (t Template) Render(value func(p TemplatePart) (string, error)) (string, error) {
	var b strings.Builder
	for _, p := range t.Parts {
		if p.Name == "" {
			b.WriteString(p.Text)
			continue
		}
		v, err := value(p)
		if err != nil {
			return "", err
		}
		b.WriteString(v)
	}
	return b.String(), nil
}
