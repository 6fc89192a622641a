package confgen

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

// EnvKind is how an environment variable's text is turned into a value.
type EnvKind int

// The kinds of environment value.
const (
	// EnvString keeps the text as it is (strings, sizes, durations,
	// templates, secrets).
	EnvString EnvKind = iota
	// EnvInt parses a base-10 integer.
	EnvInt
	// EnvNumber parses a finite decimal number.
	EnvNumber
	// EnvBool parses true/false, t/f, 1/0, yes/no and on/off, in any case.
	EnvBool
	// EnvList parses a comma-separated list, or a JSON array when the text
	// starts with '['.
	EnvList
	// EnvIntList is EnvList with every item parsed as an integer.
	EnvIntList
	// EnvNumberList is EnvList with every item parsed as a number.
	EnvNumberList
	// EnvObject parses a JSON object.
	EnvObject
)

// EnvName returns the variable that overrides the key at path: prefix +
// the path's keys upper-cased and joined by "_", every character other
// than A-Z, 0-9 and _ written as _ (linger.ms: LINGER_MS). It is the one
// naming rule of every PICOMQ_CONNECTORS_ variable: runtime config,
// definitions and plugin_config alike.
func EnvName(prefix string, path ...string) string {
	var b strings.Builder
	b.WriteString(prefix)
	for i, p := range path {
		if i > 0 {
			b.WriteByte('_')
		}
		for _, r := range strings.ToUpper(p) {
			if r < utf8.RuneSelf && (r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
				b.WriteRune(r)
			} else {
				b.WriteByte('_')
			}
		}
	}
	return b.String()
}

// EnvValue parses the text of variable as kind (ParseEnvValue). A bad
// value gives an error that is the whole problem message: it names the
// variable, quotes the text unless secret, and says what is allowed. It is
// the one parser of environment overrides: runtime config, definitions and
// plugin_config alike.
func EnvValue(variable, text string, kind EnvKind, secret bool) (any, error) {
	v, err := ParseEnvValue(text, kind)
	if err == nil {
		return v, nil
	}
	if secret {
		return nil, fmt.Errorf("environment variable %s = (value hidden) %s", variable, err)
	}
	return nil, fmt.Errorf("environment variable %s = %q %s", variable, text, err)
}

// ParseEnvValue turns the text of an environment variable into a value of
// the kind asked for. The error says what is allowed; it does not repeat the
// text, so callers can mask secrets.
func ParseEnvValue(text string, kind EnvKind) (any, error) {
	if !utf8.ValidString(text) {
		return nil, fmt.Errorf("is not valid UTF-8 text")
	}
	s := strings.TrimSpace(text)
	switch kind {
	case EnvInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
				return nil, fmt.Errorf("is out of range for an integer; use a whole number such as 1000")
			}
			return nil, fmt.Errorf("is not an integer; use a whole number such as 1000")
		}
		return n, nil
	case EnvNumber:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
			return nil, fmt.Errorf("is not a finite number")
		}
		return f, nil
	case EnvBool:
		switch strings.ToLower(s) {
		case "true", "1", "yes", "on", "t":
			return true, nil
		case "false", "0", "no", "off", "f":
			return false, nil
		}
		return nil, fmt.Errorf("is not a boolean; use true or false")
	case EnvIntList, EnvNumberList:
		l, err := ParseEnvValue(text, EnvList)
		if err != nil {
			return nil, err
		}
		items := l.([]any)
		for i, it := range items {
			if s, ok := it.(string); ok {
				k := EnvInt
				if kind == EnvNumberList {
					k = EnvNumber
				}
				v, err := ParseEnvValue(s, k)
				if err != nil {
					return nil, fmt.Errorf("item %d %s", i, err)
				}
				items[i] = v
			} else {
				items[i] = Normalize(it)
			}
		}
		return items, nil
	case EnvObject:
		var out map[string]any
		dec := json.NewDecoder(strings.NewReader(s))
		dec.UseNumber()
		if err := dec.Decode(&out); err != nil || out == nil {
			return nil, fmt.Errorf("is not a JSON object such as {\"name\": \"value\"}")
		}
		return jsonNumbers(out).(map[string]any), nil
	case EnvList:
		if strings.HasPrefix(s, "[") {
			var out []any
			if err := json.Unmarshal([]byte(s), &out); err != nil {
				return nil, fmt.Errorf("starts with '[' but is not a JSON array: %s", jsonErrText(err))
			}
			return out, nil
		}
		out := []any{}
		if s == "" {
			return out, nil
		}
		for _, f := range strings.Split(s, ",") {
			out = append(out, strings.TrimSpace(f))
		}
		return out, nil
	}
	return text, nil
}

// jsonNumbers turns json.Number into int64 or float64.
func jsonNumbers(v any) any {
	switch x := v.(type) {
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
		f, _ := x.Float64()
		return f
	case map[string]any:
		for k, e := range x {
			x[k] = jsonNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = jsonNumbers(e)
		}
	}
	return v
}

// EnvBinding is one key that an environment variable can override. The
// generator writes a table of them.
type EnvBinding struct {
	// Path is the key path.
	Path []string
	// Suffix is the variable name after the prefix, such as MAX_FILE_SIZE.
	Suffix string
	Kind   EnvKind
	Secret bool
}

// bindEnvAll applies every binding (see BindEnv), names[i] the variable of
// bindings[i], and returns the problems.
func bindEnvAll(doc map[string]any, bindings []EnvBinding, names []string, lookup func(string) (string, bool)) confkit.Problems {
	if lookup == nil {
		return nil
	}
	var ps confkit.Problems
	for i, b := range bindings {
		if p := BindEnv(doc, b.Path, names[i], b.Kind, b.Secret, lookup); p != nil {
			ps = append(ps, *p)
		}
	}
	return ps
}

// envNames returns the names of the variables of bindings: prefix + Suffix.
func envNames(bindings []EnvBinding, prefix string) []string {
	names := make([]string, len(bindings))
	for i, b := range bindings {
		names[i] = prefix + b.Suffix
	}
	return names
}

// prefixNames are the variable names of a Spec's bindings under one prefix.
type prefixNames struct {
	prefix string
	names  []string
}

// envNames returns the variable names of the bindings under prefix. The
// names of the last prefix are kept: a connector's definition is loaded
// again with the same prefix (a reload, a check through the API), and a
// Load then builds none.
func (s *Spec) envNames(prefix string) []string {
	if last := s.lastEnv.Load(); last != nil && last.prefix == prefix {
		return last.names
	}
	names := envNames(s.Env, prefix)
	s.lastEnv.Store(&prefixNames{prefix: prefix, names: names})
	return names
}

func jsonErrText(err error) string {
	// json errors never quote the whole input, only offsets and characters.
	return err.Error()
}

// BindEnv reads variable through lookup and, when it is set, stores its
// parsed value in doc at path, creating nested tables as needed. A bad value
// gives a Problem naming the variable; secret masks the value in it.
func BindEnv(doc map[string]any, path []string, variable string, kind EnvKind, secret bool, lookup func(string) (string, bool)) *confkit.Problem {
	if lookup == nil || len(path) == 0 {
		return nil
	}
	text, ok := lookup(variable)
	if !ok {
		return nil
	}
	key := strings.Join(path, ".")
	shown := text
	if secret {
		shown = confkit.NewSecret(text).String()
	}
	v, err := EnvValue(variable, text, kind, secret)
	if err != nil {
		return &confkit.Problem{Key: key, Value: shown, Rule: "env", Message: err.Error()}
	}
	if kind == EnvList {
		v = Normalize(v)
	}
	m := doc
	for i, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			if _, exists := m[p]; exists {
				return &confkit.Problem{Key: strings.Join(path[:i+1], "."), Value: FormatValue(m[p]), Rule: "env",
					Message: fmt.Sprintf("environment variable %s cannot be applied: %s is not a table", variable, strings.Join(path[:i+1], "."))}
			}
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
	return nil
}
