// Package lint checks connector schemas for the mistakes the generator
// cannot see: a key whose name looks secret but is not marked x-secret, a
// key or enum value without a description, and a default that fails its
// own key's rules.
//
// picogen lint runs it on every schema, and picogen gen runs it before
// generating (see Files).
package lint

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/picomq/pico-connectors/runtime/confkit"
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
	// Invalid: the file is not a JSON object.
	Invalid Rule = "invalid"
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
	sort.Strings(m)
	return Files(m...)
}

// Schema lints one schema document; file names it in findings.
func Schema(file string, doc []byte) Findings {
	l := linter{file: file}
	d := json.NewDecoder(bytes.NewReader(doc))
	d.UseNumber()
	var root map[string]any
	if err := d.Decode(&root); err != nil || root == nil {
		msg := "not a JSON object"
		if err != nil {
			msg = "not valid JSON: " + err.Error()
		}
		return Findings{{File: file, Rule: Invalid, Message: msg}}
	}
	l.root = root
	if str(root["description"]) == "" && str(root["title"]) == "" {
		l.add("", "", MissingDescription, "the schema has no description (it is the connector's summary in the catalog)")
	}
	l.object("", "", root)
	sort.SliceStable(l.out, func(i, j int) bool { return l.out[i].Pointer < l.out[j].Pointer })
	return l.out
}

type linter struct {
	file string
	root map[string]any
	out  Findings
}

func (l *linter) add(ptr, key string, rule Rule, format string, args ...any) {
	l.out = append(l.out, Finding{File: l.file, Pointer: ptr, Key: key, Rule: rule, Message: fmt.Sprintf(format, args...)})
}

func (l *linter) object(ptr, path string, s map[string]any) {
	props, _ := s["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, name := range names {
		ps, ok := props[name].(map[string]any)
		if !ok {
			continue
		}
		key := name
		if path != "" {
			key = path + "." + name
		}
		l.key(ptr+"/properties/"+escape(name), key, name, ps)
	}
}

func (l *linter) key(ptr, key, name string, s map[string]any) {
	s = l.resolve(s)
	if str(s["description"]) == "" {
		l.add(ptr, key, MissingDescription, "no description: it is the Meaning column of the reference page")
	}
	if _, marked := s["x-secret"]; !marked && LooksSecret(name) && isStringish(s) {
		l.add(ptr, key, SecretNotMarked, `the name looks like a secret but the key is not marked "x-secret": true `+
			`(its value would show in logs and the API); add "x-secret": false if it is not one`)
	}
	if enum, ok := s["enum"].([]any); ok {
		l.enum(ptr, key, s, enum)
	}
	if def, ok := s["default"]; ok {
		if msg := l.checkDefault(s, def); msg != "" {
			l.add(ptr, key, BadDefault, "default %s %s", show(def), msg)
		}
	}
	if _, ok := s["properties"].(map[string]any); ok {
		l.object(ptr, key, s)
	}
	if items, ok := s["items"].(map[string]any); ok {
		if _, ok := items["properties"]; ok {
			l.object(ptr+"/items", key+"[]", l.resolve(items))
		}
		if enum, ok := items["enum"].([]any); ok {
			// A list's values are described on the list.
			withParent := map[string]any{}
			for k, v := range items {
				withParent[k] = v
			}
			withParent["description"] = str(s["description"]) + " " + str(items["description"])
			l.enum(ptr, key, withParent, enum)
		}
	}
}

// enum checks that every enum value is described: named as a word in the
// key's description (the dialect's way: "json_lines, json_array or raw."),
// or given its own text in x-enum-descriptions (value → text).
func (l *linter) enum(ptr, key string, s map[string]any, values []any) {
	descs := map[string]string{}
	if m, ok := s["x-enum-descriptions"].(map[string]any); ok {
		for k, v := range m {
			descs[k] = str(v)
		}
	}
	text := str(s["description"])
	var missing []string
	for _, v := range values {
		vs := fmt.Sprint(v)
		if strings.TrimSpace(descs[vs]) != "" || mentions(text, vs) {
			continue
		}
		missing = append(missing, vs)
	}
	if len(missing) > 0 {
		l.add(ptr, key, EnumUndescribed, "enum value(s) %s are not described: name each value in the description "+
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

// checkDefault returns why def fails the rules of s, or "".
func (l *linter) checkDefault(s map[string]any, def any) string {
	// The JSON Schema rules, with the custom formats of the x-types.
	sub := map[string]any{}
	for k, v := range s {
		if k == "default" || k == "examples" {
			continue
		}
		sub[k] = v
	}
	if defs, ok := l.root["$defs"]; ok {
		sub["$defs"] = defs
	}
	sub["$schema"] = "https://json-schema.org/draft/2020-12/schema"
	if f := formatOf(s); f != "" {
		sub["format"] = f
	}
	b, err := json.Marshal(sub)
	if err != nil {
		return ""
	}
	compiled, err := confkit.CompileSchema("default", b)
	if err != nil {
		return "cannot be checked: the key's schema does not compile: " + err.Error()
	}
	if err := compiled.Validate(def); err != nil {
		return "fails the key's rules: " + lastLine(err.Error())
	}
	// A template's placeholders must be among x-placeholders.
	if str(s["x-type"]) == "template" {
		if text, ok := def.(string); ok {
			var allowed []string
			if ps, ok := s["x-placeholders"].([]any); ok {
				for _, p := range ps {
					allowed = append(allowed, str(p))
				}
			}
			if _, err := confkit.ParseTemplate(text, allowed); err != nil {
				return "is not a valid template for this key: " + err.Error()
			}
		}
	}
	// The x- bounds, which JSON Schema does not know.
	return xBounds(s, def)
}

func formatOf(s map[string]any) string {
	switch str(s["x-type"]) {
	case "size":
		return confkit.FormatSize
	case "duration":
		return confkit.FormatDuration
	case "template":
		return confkit.FormatTemplate
	}
	return ""
}

// xBounds checks the x-minimum / x-maximum family against a size or
// duration default.
func xBounds(s map[string]any, def any) string {
	xt := str(s["x-type"])
	if xt != "size" && xt != "duration" {
		return ""
	}
	v, ok := magnitude(def, xt)
	if !ok {
		return fmt.Sprintf("is not a valid %s", xt)
	}
	checks := []struct {
		kw   string
		fail func(v, b float64) bool
		word string
	}{
		{"x-minimum", func(v, b float64) bool { return v < b }, "below x-minimum"},
		{"x-exclusive-minimum", func(v, b float64) bool { return v <= b }, "not above x-exclusive-minimum"},
		{"x-maximum", func(v, b float64) bool { return v > b }, "above x-maximum"},
		{"x-exclusive-maximum", func(v, b float64) bool { return v >= b }, "not below x-exclusive-maximum"},
	}
	for _, c := range checks {
		bv, has := s[c.kw]
		if !has {
			continue
		}
		b, ok := magnitude(bv, xt)
		if !ok {
			return fmt.Sprintf("cannot be checked: %s %s is not a valid %s", c.kw, show(bv), xt)
		}
		if c.fail(v, b) {
			return fmt.Sprintf("is %s %s", c.word, show(bv))
		}
	}
	return ""
}

func magnitude(v any, xt string) (float64, bool) {
	switch x := v.(type) {
	case json.Number:
		f, err := x.Float64()
		return f, err == nil
	case float64:
		return x, true
	case string:
		if xt == "size" {
			n, err := confkit.ParseSize(x)
			return float64(n), err == nil
		}
		d, err := confkit.ParseDuration(x)
		return float64(d), err == nil
	}
	return 0, false
}

// resolve follows a local $ref ("#/$defs/name").
func (l *linter) resolve(s map[string]any) map[string]any {
	ref := str(s["$ref"])
	if !strings.HasPrefix(ref, "#/") {
		return s
	}
	var cur any = l.root
	for _, part := range strings.Split(ref[2:], "/") {
		m, ok := cur.(map[string]any)
		if !ok {
			return s
		}
		cur = m[strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")]
	}
	target, ok := cur.(map[string]any)
	if !ok {
		return s
	}
	merged := map[string]any{}
	for k, v := range target {
		merged[k] = v
	}
	for k, v := range s {
		if k != "$ref" {
			merged[k] = v
		}
	}
	return merged
}

// isStringish reports whether a key can hold a string (secrets are
// strings); a boolean or number named like a secret is left alone.
func isStringish(s map[string]any) bool {
	switch t := s["type"].(type) {
	case nil:
		return true
	case string:
		return t == "string"
	case []any:
		for _, x := range t {
			if x == "string" {
				return true
			}
		}
	}
	return false
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

func escape(name string) string {
	return strings.ReplaceAll(strings.ReplaceAll(name, "~", "~0"), "/", "~1")
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
