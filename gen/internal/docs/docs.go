// Package docs writes a schema's reference page: the Configuration table
// with env variables, the rules in words, and a complete example block.
package docs

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/picomq/pico-connectors/gen/internal/gocode"
	"github.com/picomq/pico-connectors/gen/internal/model"
)

// Marker starts every generated page.
const Marker = "<!-- " + gocode.Header + " -->"

// Connector renders generated/docs/<name>.md.
func Connector(s *model.Schema) []byte {
	var b bytes.Buffer
	w := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	w("%s\n\n# %s\n\n", Marker, text(s.Name))
	if s.Description != "" {
		w("%s\n\n", paragraph(s.Description))
	}
	kind := strings.ToUpper(s.Kind[:1]) + s.Kind[1:]
	w("| | |\n|---|---|\n| Type | %s |\n| Path | %s |\n| Config package | %s |\n| Schema | %s |\n\n",
		kind, Code(s.Path), Code("generated/"+s.Package), Code("schemas/"+s.Name+".json"))

	prefix, block, where := envPrefix(s)
	w("## Configuration\n\n")
	arrays := ""
	if hasKind(s, model.ObjectList) {
		arrays = ", lists of tables a JSON array of objects"
	}
	w("All keys go under %s. Every key can be set from the environment variable shown, %s; the variable wins over the file. Lists take comma-separated values or a JSON array, tables a JSON object%s.\n\n", Code(block), where, arrays)
	w("| Key | Type | Default | Meaning | Env variable |\n|---|---|---|---|---|\n")
	var lists []*model.Property
	walkTable(s.Root, func(pr *model.Property) {
		if pr.Kind == model.ObjectList {
			lists = append(lists, pr)
		}
		w("| %s | %s | %s | %s | %s |\n", Code(pr.DotPath()), cell(typeWords(pr)), cell(defaultCell(pr)), cell(meaning(pr)), Code(prefix+gocode.EnvSuffix(pr.Path)))
	})
	w("\n")
	for len(lists) > 0 {
		pr := lists[0]
		lists = lists[1:]
		w("### %s\n\n", text(pr.DotPath()+"[]"))
		w("Each element of %s is a table with these keys", prose(pr.DotPath()))
		if !pr.InElement() {
			w("; its environment variable sets the whole list as a JSON array of objects, such as %s", prose(exampleJSON(pr)))
		}
		w(".\n\n| Key | Type | Default | Meaning |\n|---|---|---|---|\n")
		var inner []*model.Property
		walkTable(pr.Items, func(e *model.Property) {
			if e.Kind == model.ObjectList {
				inner = append(inner, e)
			}
			w("| %s | %s | %s | %s |\n", Code(e.DotPath()), cell(typeWords(e)), cell(defaultCell(e)), cell(meaning(e)))
		})
		w("\n")
		lists = append(inner, lists...)
	}

	rules := Rules(s)
	if len(rules) > 0 {
		w("## Rules\n\n")
		for _, r := range rules {
			w("- %s\n", r)
		}
		w("\n")
	}
	w("## Example\n\n```toml\n%s```\n", Example(s, block))
	return b.Bytes()
}

// walkTable calls f for every key of the table o and its nested tables, but
// not for the keys of array elements (they have a table of their own).
func walkTable(o *model.Object, f func(*model.Property)) {
	for _, pr := range o.Props {
		if pr.Kind == model.Nested {
			walkTable(pr.Object, f)
			continue
		}
		f(pr)
	}
}

func meaning(pr *model.Property) string {
	m := pr.Description
	if pr.Deprecated {
		m = "Deprecated" + strings.TrimSuffix(": "+pr.DeprecatedMsg, ": ") + ". " + m
	}
	if len(pr.EnumDescriptions) > 0 {
		var vs []string
		for _, e := range pr.Enum {
			if d := pr.EnumDescriptions[e.Value]; d != "" {
				vs = append(vs, Code(e.Value)+": "+strings.TrimSuffix(d, "."))
			}
		}
		m += " Values: " + strings.Join(vs, "; ") + "."
	}
	if len(pr.Aliases) > 0 {
		m += " Also accepted as " + list(pr.Aliases) + "."
	}
	return m
}

// exampleJSON is the first example of an array of tables as JSON, or one
// element with its required keys.
func exampleJSON(pr *model.Property) string {
	if len(pr.Examples) > 0 {
		return jsonText(pr.Examples[0])
	}
	elem := map[string]any{}
	for _, e := range pr.Items.Props {
		if e.Required {
			v, _ := exampleValue(e)
			elem[e.Key] = json.RawMessage(tomlToJSON(v))
		}
	}
	return jsonText([]any{elem})
}

// tomlToJSON turns the simple TOML values exampleValue writes into JSON.
func tomlToJSON(v string) string {
	if json.Valid([]byte(v)) {
		return v
	}
	return jsonText(v)
}

func envPrefix(s *model.Schema) (prefix, block, where string) {
	switch s.Kind {
	case "sink":
		return "PICOMQ_CONNECTORS_SINK_<KEY>_PLUGIN_CONFIG_", "[plugin_config]", "where `<KEY>` is the connector's key upper-cased"
	case "source":
		return "PICOMQ_CONNECTORS_SOURCE_<KEY>_PLUGIN_CONFIG_", "[plugin_config]", "where `<KEY>` is the connector's key upper-cased"
	}
	return "PICOMQ_CONNECTORS_<TYPE>_<KEY>_TRANSFORMS_<i>_", "[[transforms]]", "where `<TYPE>` is SINK or SOURCE, `<KEY>` the connector's key upper-cased and `<i>` the block's index from 0 (for a `[transforms." + s.Name + "]` table, `<i>` is " + Code(strings.ToUpper(s.Name)) + ")"
}

// scalarWords names the scalar kinds, of a key or of a table's values.
var scalarWords = map[model.Kind]string{model.String: "string", model.Int: "integer", model.Number: "number", model.Bool: "boolean"}

func typeWords(pr *model.Property) string {
	if w, ok := scalarWords[pr.Kind]; ok {
		return w
	}
	switch pr.Kind {
	case model.Secret:
		return "string, secret"
	case model.Enum:
		var vs []string
		for _, e := range pr.Enum {
			if e.Value == "" {
				vs = append(vs, `""`)
				continue
			}
			vs = append(vs, e.Value)
		}
		return "one of " + strings.Join(vs, ", ")
	case model.Size:
		return "size"
	case model.Duration:
		return "duration"
	case model.Template:
		return "template"
	case model.StringList:
		return "list of strings"
	case model.IntList:
		return "list of integers"
	case model.NumberList:
		return "list of numbers"
	case model.ObjectList:
		return "list of tables, see " + Code(pr.DotPath()+"[]")
	case model.Map:
		if w, ok := scalarWords[pr.MapElem]; ok {
			return "table of " + w + "s"
		}
	}
	return "table"
}

func defaultCell(pr *model.Property) string {
	if pr.Required {
		return "required"
	}
	if d := gocode.DefaultWords(pr); d != "" {
		return d
	}
	return "none"
}

// Rules lists the checks beyond the table in words, with the schema's
// own messages.
func Rules(s *model.Schema) []string {
	var out []string
	s.Root.Walk(func(pr *model.Property) {
		k := prose(pr.DotPath())
		said := map[string]bool{}
		quote := func(rule string) string {
			if m, ok := pr.Messages[rule]; ok && !said[m] {
				said[m] = true
				return " Message: " + prose(m) + "."
			}
			return ""
		}
		if pr.Required {
			out = append(out, k+" is required."+quote("required"))
		}
		if len(pr.Words) > 0 {
			msgs := ""
			for _, r := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength", "pattern", "x-minimum", "x-exclusive-minimum", "x-maximum", "x-exclusive-maximum"} {
				msgs += quote(r)
			}
			out = append(out, k+": "+strings.ReplaceAll(cell(strings.Join(pr.Words, ", ")), "\\|", "|")+"."+msgs)
		}
		if pr.RequiredIf != nil {
			out = append(out, k+" is required when "+condCode(*pr.RequiredIf)+"."+quote("x-required-if"))
		}
		if pr.Unique != nil {
			out = append(out, fmt.Sprintf("%s: no two elements have the same %s.%s", k, prose(pr.Unique.Key), quote("x-unique")))
		}
		if pr.BothOrNeither != "" {
			out = append(out, k+" and "+prose(pr.BothOrNeither)+" are set together or not at all."+quote("x-both-or-neither"))
		}
		for _, d := range pr.DefaultIf {
			out = append(out, fmt.Sprintf("%s defaults to %s when %s.", k, prose(jsonText(d.Value)), condCode(d.When)))
		}
		if pr.PatternUnless != nil {
			out = append(out, fmt.Sprintf("%s must match %s unless %s.%s", k, prose(pr.PatternUnless.Pattern), condCode(pr.PatternUnless.Unless), quote("x-pattern-unless")))
		}
		for _, a := range pr.Aliases {
			out = append(out, fmt.Sprintf("%s is accepted as an alias of %s; setting both is an error.", prose(a), k))
		}
		if len(pr.EnumAliases) > 0 {
			var as []string
			for _, a := range pr.EnumAliases {
				as = append(as, prose(a[0])+" means "+prose(a[1]))
			}
			out = append(out, k+": "+strings.Join(as, ", ")+".")
		}
		if pr.Kind == model.Template {
			if pr.Placeholders != nil {
				var ps []string
				for _, p := range pr.Placeholders {
					ps = append(ps, prose("{"+p+"}"))
				}
				colon := ""
				if slices.ContainsFunc(pr.Placeholders, func(p string) bool { return strings.Contains(p, ":") }) {
					colon = " `{name:...}` takes any text but braces after the colon."
				}
				out = append(out, k+" accepts the placeholders "+strings.Join(ps, ", ")+"; `[n]` is an integer index, negative from the end."+colon+" `..` segments and a leading `/` are rejected.")
			}
		}
		if pr.Trim != "" {
			out = append(out, fmt.Sprintf("%s: leading and trailing %s are trimmed.", k, prose(pr.Trim)))
		}
		if pr.Secret {
			out = append(out, k+" is a secret: it is masked as `****` in the API, logs and error messages.")
		}
		if pr.Deprecated {
			out = append(out, k+" is deprecated"+strings.TrimSuffix(": "+pr.DeprecatedMsg, ": ")+".")
		}
	})
	if hasKind(s, model.Size) {
		out = append(out, "Sizes take binary (KiB, MiB, GiB, TiB) and decimal (KB, MB, GB, TB) units, or a plain byte count.")
	}
	if hasKind(s, model.Duration) {
		out = append(out, "Durations use Go syntax: `100ms`, `1s`, `1m30s`.")
	}
	if s.Root.Closed {
		out = append(out, "Unknown keys are rejected, with a suggestion when one is close.")
	}
	return out
}

func hasKind(s *model.Schema, k model.Kind) bool {
	found := false
	s.Root.Walk(func(pr *model.Property) { found = found || pr.Kind == k })
	return found
}

func condCode(c model.Cond) string {
	if c.Present != nil {
		if *c.Present {
			return prose(c.Key) + " is set"
		}
		return prose(c.Key) + " is not set"
	}
	return prose(c.Key) + " is " + prose(jsonText(c.Equals))
}

// prose writes s as a code span outside tables, where | needs no escape.
func prose(s string) string {
	return strings.ReplaceAll(Code(s), "\\|", "|")
}

func jsonText(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func list(xs []string) string {
	var out []string
	for _, x := range xs {
		out = append(out, Code(x))
	}
	return strings.Join(out, ", ")
}

var backticks = regexp.MustCompile("`+")

// Code writes s as a Markdown code span, safe for backticks and pipes in a
// table.
func Code(s string) string {
	s = oneLine(s)
	longest := 0
	for _, m := range backticks.FindAllString(s, -1) {
		longest = max(longest, len(m))
	}
	fence := strings.Repeat("`", longest+1)
	pad := ""
	if strings.HasPrefix(s, "`") || strings.HasSuffix(s, "`") {
		pad = " "
	}
	return fence + pad + strings.ReplaceAll(s, "|", "\\|") + pad + fence
}

func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	return strings.Join(strings.Fields(s), " ")
}

// cell makes text safe inside a table cell.
func cell(s string) string {
	s = oneLine(s)
	s = strings.ReplaceAll(s, "|", "\\|")
	if s == "" {
		return " "
	}
	return s
}

func text(s string) string { return strings.ReplaceAll(oneLine(s), "<", "&lt;") }

func paragraph(s string) string {
	return strings.TrimSpace(strings.ToValidUTF8(s, "\uFFFD"))
}

// Example writes a complete TOML example of the table.
func Example(s *model.Schema, block string) string {
	var b strings.Builder
	if block == "[[transforms]]" {
		b.WriteString("[[transforms]]\ntype = " + tomlString(s.Name) + "\n")
	} else {
		b.WriteString(block + "\n")
	}
	writeObject(&b, s.Root, strings.Trim(block, "[]"))
	return b.String()
}

func writeObject(b *strings.Builder, o *model.Object, table string) {
	var nested, lists []*model.Property
	for _, pr := range o.Props {
		if pr.Kind == model.Nested {
			nested = append(nested, pr)
			continue
		}
		if pr.Kind == model.ObjectList {
			lists = append(lists, pr)
			continue
		}
		v, ok := exampleValue(pr)
		line := tomlKey(pr.Key) + " = " + v
		if !ok {
			line = "# " + line
		}
		b.WriteString(line + "\n")
	}
	for _, pr := range nested {
		t := table + "." + tomlKey(pr.Key)
		b.WriteString("\n[" + t + "]\n")
		writeObject(b, pr.Object, t)
	}
	for _, pr := range lists {
		t := table + "." + tomlKey(pr.Key)
		var elems []any
		if len(pr.Examples) > 0 {
			elems, _ = pr.Examples[0].([]any)
		}
		if len(elems) == 0 {
			b.WriteString("\n[[" + t + "]]\n")
			writeObject(b, pr.Items, t)
			continue
		}
		for _, e := range elems {
			b.WriteString("\n[[" + t + "]]\n")
			writeElement(b, pr.Items, e)
		}
	}
}

// writeElement writes one example element of an array of tables: its
// values in schema order, then any other keys.
func writeElement(b *strings.Builder, o *model.Object, e any) {
	m, ok := e.(map[string]any)
	if !ok {
		b.WriteString("# " + tomlValue(e) + "\n")
		return
	}
	done := map[string]bool{}
	for _, pr := range o.Props {
		if v, ok := m[pr.Key]; ok {
			b.WriteString(tomlKey(pr.Key) + " = " + tomlValue(v) + "\n")
			done[pr.Key] = true
		}
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if !done[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.WriteString(tomlKey(k) + " = " + tomlValue(m[k]) + "\n")
	}
}

// exampleValue returns the first example, else the default, else a
// placeholder (ok false: the line is written as a comment).
func exampleValue(pr *model.Property) (string, bool) {
	if len(pr.Examples) > 0 {
		return tomlValue(pr.Examples[0]), true
	}
	if pr.HasDefault {
		return tomlValue(pr.Default), true
	}
	switch pr.Kind {
	case model.Int, model.Number:
		return "1", false
	case model.Bool:
		return "true", false
	case model.Enum:
		return tomlString(pr.Enum[0].Value), true
	case model.StringList:
		return `["example"]`, true
	case model.IntList, model.NumberList:
		return "[1]", true
	case model.Map:
		return "{}", true
	case model.Size:
		return `"8MiB"`, false
	case model.Duration:
		return `"1s"`, false
	}
	if pr.Required {
		return tomlString("..."), true
	}
	return tomlString(""), false
}

func tomlValue(v any) string {
	switch x := v.(type) {
	case string:
		return tomlString(x)
	case bool:
		if x {
			return "true"
		}
		return "false"
	case json.Number:
		return string(x)
	case []any:
		var parts []string
		for _, e := range x {
			parts = append(parts, tomlValue(e))
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, tomlKey(k)+" = "+tomlValue(x[k]))
		}
		return "{ " + strings.Join(parts, ", ") + " }"
	case nil:
		return `""`
	}
	return fmt.Sprint(v)
}

var bareKey = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func tomlKey(k string) string {
	if bareKey.MatchString(k) {
		return k
	}
	return tomlString(k)
}

func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\t':
			b.WriteString(`\t`)
		case r < 0x20 || r == 0x7f || r == utf8.RuneError:
			fmt.Fprintf(&b, `\u%04X`, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}
