// Package lint checks connector schemas for the mistakes the generator
// cannot see: a key whose name looks secret but is not marked x-secret, a
// key or enum value without a description, a default that fails its own
// key's rules, and an x- keyword the dialect does not have. It reads the
// schema with the generator's own model (gen/internal/model), so it reports
// the generator's errors too.
//
// picogen lint runs it on every schema, and picogen gen runs it before
// generating (see Files).
package lint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/picomq/pico-connectors/gen/internal/model"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

// Rule names one check.
type Rule string

// The checks.
const (
	// SecretNotMarked: the key's name ends in password, secret, token or
	// key, or is connection_string, and it has no x-secret. Mark it
	// "x-secret": true, or "x-secret": false to say it is not a secret.
	SecretNotMarked Rule = "secret-not-marked"
	// MissingDescription: the schema or a key has no description.
	MissingDescription Rule = "missing-description"
	// BadDefault: the default fails the key's own rules.
	BadDefault Rule = "bad-default"
	// EnumUndescribed: an enum value has no description.
	EnumUndescribed Rule = "enum-undescribed"
	// Invalid: the file is not a schema the generator can read (the
	// message is the generator's).
	Invalid Rule = "invalid"
	// UnknownKeyword: an x- keyword the dialect does not have (a typo, or
	// a keyword of another tool: the generator would ignore it).
	UnknownKeyword Rule = "unknown-keyword"
)

// Finding is one problem in a schema.
type Finding struct {
	// File is the schema file, as given.
	File string
	// Pointer is the JSON pointer of the offending keyword's schema, such
	// as /properties/access_key.
	Pointer string
	// Key is the dotted key path, "" for the schema itself.
	Key     string
	Rule    Rule
	Message string
}

// String formats the finding as "file: key: message [rule]".
func (f Finding) String() string {
	where := f.File
	if f.Key != "" {
		where += ": " + f.Key
	}
	return fmt.Sprintf("%s: %s [%s]", where, f.Message, f.Rule)
}

// Findings is a list of findings; as an error it lists them all.
type Findings []Finding

// Error lists the findings one per line.
func (fs Findings) Error() string {
	lines := make([]string, len(fs))
	for i, f := range fs {
		lines[i] = f.String()
	}
	return strings.Join(lines, "\n")
}

// secretName matches key names that usually hold a secret.
var secretName = regexp.MustCompile(`(^|_)(password|passwd|secret|token|key|connection_string|credentials?|dsn)$`)

// LooksSecret reports whether a key's name looks like it holds a secret.
func LooksSecret(name string) bool {
	return secretName.MatchString(strings.ToLower(name))
}

// Files lints every file and returns the findings of all of them, sorted by
// file and pointer. It returns an error only when a file cannot be read.
func Files(paths ...string) (Findings, error) {
	var out Findings
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		out = append(out, Schema(p, b)...)
	}
	return out, nil
}

// Dir lints every *.json file directly in dir (schemas/).
func Dir(dir string) (Findings, error) {
	m, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return nil, err
	}
	slices.Sort(m)
	return Files(m...)
}

// Schema lints one schema document; file names it in findings, and its base
// name without .json is the schema's name.
func Schema(file string, doc []byte) Findings {
	name := strings.TrimSuffix(filepath.Base(file), ".json")
	s, err := model.Parse(file, name, doc)
	l := linter{file: file, keys: map[string]string{}}
	ps, _ := confkit.AsProblems(err)
	for _, e := range ps {
		l.modelErr = append(l.modelErr, e.Key)
		rule := Invalid
		if strings.HasSuffix(e.Key, "/default") {
			rule = BadDefault
		}
		l.out = append(l.out, Finding{File: file, Pointer: e.Key, Rule: rule, Message: e.Message})
	}
	if s == nil {
		return l.out
	}
	if s.Root != nil {
		s.Root.Walk(func(pr *model.Property) { l.keys[pr.Pointer] = pr.DotPath() })
	}
	for i := range l.out {
		l.out[i].Key = l.keyAt(l.out[i].Pointer)
	}
	if s.Description == "" && s.Title == "" {
		l.add("", MissingDescription, "the schema has no description (it is the connector's summary in the catalog)")
	}
	for _, u := range s.Unknown {
		msg := fmt.Sprintf("%s is not a keyword of the dialect, so the generator ignores it", u.Keyword)
		msg += confkit.DidYouMean(u.Keyword, u.Known)
		l.add(u.Pointer, UnknownKeyword, "%s; see schemas/README.md", msg)
	}
	if s.Root != nil {
		s.Root.Walk(l.key)
	}
	slices.SortStableFunc(l.out, func(a, b Finding) int { return strings.Compare(a.Pointer, b.Pointer) })
	return l.out
}

type linter struct {
	file     string
	keys     map[string]string // property pointer → key path
	modelErr []string          // pointers of the model's errors
	out      Findings
}

// keyAt returns the key path of the property that holds ptr, or "".
func (l *linter) keyAt(ptr string) string {
	for p := ptr; p != ""; p = p[:max(strings.LastIndexByte(p, '/'), 0)] {
		if k, ok := l.keys[p]; ok {
			return k
		}
	}
	return ""
}

func (l *linter) add(ptr string, rule Rule, format string, args ...any) {
	l.out = append(l.out, Finding{File: l.file, Pointer: ptr, Key: l.keyAt(ptr), Rule: rule, Message: fmt.Sprintf(format, args...)})
}

func (l *linter) key(pr *model.Property) {
	ptr := pr.Pointer
	if pr.Description == "" {
		l.add(ptr, MissingDescription, "no description: it is the Meaning column of the reference page")
	}
	if !pr.SecretSet && LooksSecret(pr.Key) && (len(pr.Types) == 0 || slices.Contains(pr.Types, "string")) {
		l.add(ptr, SecretNotMarked, `the name looks like a secret but the key is not marked "x-secret": true `+
			`(its value would show in logs and the API); add "x-secret": false if it is not one`)
	}
	if pr.Kind == model.Enum {
		var values []string
		for _, e := range pr.Enum {
			values = append(values, e.Value)
		}
		l.enum(ptr, pr.Description, pr.EnumDescriptions, values)
	}
	if len(pr.ItemEnum) > 0 {
		// A list's values are described on the list.
		l.enum(ptr, pr.Description+" "+pr.ItemDescription, nil, pr.ItemEnum)
	}
	if pr.HasDefault && !slices.Contains(l.modelErr, ptr+"/default") {
		if msg := checkDefault(pr); msg != "" {
			l.add(ptr, BadDefault, "default %s %s", show(pr.Default), msg)
		}
	}
}

// enum checks that every enum value is described: named as a word in the
// key's description (the dialect's way: "json_lines, json_array or raw."),
// or given its own text in x-enum-descriptions (value → text).
func (l *linter) enum(ptr, text string, descs map[string]string, values []string) {
	var missing []string
	for _, v := range values {
		if strings.TrimSpace(descs[v]) != "" || mentions(text, v) {
			continue
		}
		missing = append(missing, v)
	}
	if len(missing) > 0 {
		l.add(ptr, EnumUndescribed, "enum value(s) %s are not described: name each value in the description "+
			"and say what it does (or use x-enum-descriptions)", strings.Join(missing, ", "))
	}
}

// mentions reports whether text names word as a whole word.
func mentions(text, word string) bool {
	if word == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(text[i:], word)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(word)
		if (start == 0 || !isWordByte(text[start-1])) && (end == len(text) || !isWordByte(text[end])) {
			return true
		}
		i = start + 1
	}
}

func isWordByte(c byte) bool {
	return c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// checkDefault returns why the default of pr fails the key's JSON Schema
// rules (with the custom formats of the x-types) or its x- bounds, or "".
// The model has checked that it fits the key's type.
func checkDefault(pr *model.Property) string {
	sub := map[string]any{}
	for k, v := range pr.Schema {
		if k != "default" && k != "examples" {
			sub[k] = v
		}
	}
	if f := formatOf(pr.XType); f != "" {
		sub["format"] = f
	}
	b, err := json.Marshal(sub)
	if err != nil {
		return ""
	}
	compiled, err := confgen.CompileSchema("default", b)
	if err != nil {
		return "cannot be checked: the key's schema does not compile: " + err.Error()
	}
	if err := compiled.Validate(pr.Default); err != nil {
		return "fails the key's rules: " + lastLine(err.Error())
	}
	return xBounds(pr)
}

func formatOf(xtype string) string {
	switch xtype {
	case "size":
		return confgen.FormatSize
	case "duration":
		return confgen.FormatDuration
	case "template":
		return confgen.FormatTemplate
	}
	return ""
}

// xBounds checks the x-minimum / x-maximum family against a size or
// duration default.
func xBounds(pr *model.Property) string {
	if len(pr.Bounds) == 0 {
		return ""
	}
	var v int64
	switch pr.Kind {
	case model.Size:
		d := pr.Default
		if n, ok := d.(json.Number); ok {
			i, _ := n.Int64()
			d = i
		}
		s, err := confgen.AsSize(d)
		if err != nil {
			return "is not a valid size"
		}
		v = int64(s)
	case model.Duration:
		s, _ := pr.Default.(string)
		d, err := confkit.ParseDuration(s)
		if err != nil {
			return "is not a valid duration"
		}
		v = int64(d)
	default:
		return ""
	}
	for _, b := range pr.Bounds {
		var fails bool
		var word string
		switch b.Rule {
		case "x-minimum":
			fails, word = v < b.Value, "below x-minimum"
		case "x-exclusive-minimum":
			fails, word = v <= b.Value, "not above x-exclusive-minimum"
		case "x-maximum":
			fails, word = v > b.Value, "above x-maximum"
		case "x-exclusive-maximum":
			fails, word = v >= b.Value, "not below x-exclusive-maximum"
		}
		if fails {
			return fmt.Sprintf("is %s %s", word, show(b.Raw))
		}
	}
	return ""
}

func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	lines := strings.Split(s, "\n")
	out := strings.TrimSpace(lines[len(lines)-1])
	if i := strings.Index(out, ": "); i >= 0 && strings.HasPrefix(out, "at ") {
		out = out[i+2:]
	}
	return out
}
