package definition

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

// decoder fills the definition structs from a parsed TOML table, applying
// environment overrides on the way, and collects every problem instead of
// stopping at the first one.
type decoder struct {
	file     string
	env      map[string]string
	used     map[string]bool // env variables that were applied
	known    []string        // every variable name that would be applied
	problems confkit.Problems
	defined  map[string]bool   // key paths set by the file or the environment
	fromEnv  map[string]string // key path -> variable that set it
	skipEnv  map[string]bool   // key paths with no env override (type, key)
	order    map[string]int    // TOML key -> position in the file, for stable output
	// transformPrefixes are the env prefixes of each transform's own keys.
	transformPrefixes []string
}

func newDecoder(file string, env map[string]string, used map[string]bool) *decoder {
	return &decoder{
		file: file, env: env, used: used,
		defined: map[string]bool{}, fromEnv: map[string]string{}, skipEnv: map[string]bool{},
		order: map[string]int{},
	}
}

func (d *decoder) add(key, format string, args ...any) {
	d.problems = append(d.problems, confkit.Problem{File: d.file, Key: key, Message: fmt.Sprintf(format, args...)})
}

// lookup returns the override for key path key from variable name.
func (d *decoder) lookup(key, name string) (string, bool) {
	if d.skipEnv[key] {
		return "", false
	}
	d.known = append(d.known, name)
	v, ok := d.env[name]
	if ok {
		d.used[name] = true
		if !utf8.ValidString(v) {
			// The value is not shown: it may be a secret, and it is not text.
			d.add(key, "environment variable %s is not valid UTF-8 text; set it to UTF-8 or unset it", name)
			return "", false
		}
	}
	return v, ok
}

var (
	routeType      = reflect.TypeOf(Route{})
	topicsType     = reflect.TypeOf([]Topics(nil))
	transformsType = reflect.TypeOf([]map[string]any(nil))
	anyMapType     = reflect.TypeOf(map[string]any(nil))
	stringMapType  = reflect.TypeOf(map[string]string(nil))
	stringsType    = reflect.TypeOf([]string(nil))
	// secretType is the type of every secret of the runtime config and
	// the definitions, masked wherever it is shown.
	secretType = reflect.TypeOf(confkit.Secret{})
)

func joinKey(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func tomlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
	return name
}

// fieldNames lists the TOML keys of a struct type.
func fieldNames(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if n := tomlName(t.Field(i)); n != "" && n != "-" {
			out = append(out, n)
		}
	}
	return out
}

// decodeStruct fills rv from raw. path is the key path of raw ("" at the
// top) and prefix the env variable prefix of its keys.
func (d *decoder) decodeStruct(rv reflect.Value, raw map[string]any, path, prefix string) {
	t := rv.Type()
	known := fieldNames(t)
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := tomlName(f)
		if name == "" || name == "-" {
			continue
		}
		val, inFile := raw[name]
		d.field(rv.Field(i), f, val, inFile, joinKey(path, name), confgen.EnvName(prefix, name))
	}
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		if !slices.Contains(known, k) {
			where := "key"
			if path == "" {
				where = "top-level key"
			}
			d.add(joinKey(path, k), "unknown %s %q%s", where, k, confkit.DidYouMeanOrAllowed(k, known))
		}
	}
}

func (d *decoder) field(fv reflect.Value, f reflect.StructField, val any, inFile bool, key, envName string) {
	if decode := d.decoderOf(f.Type); decode != nil {
		decode(fv, val, inFile, key, envName)
		return
	}
	switch f.Type.Kind() {
	case reflect.Struct:
		sub := map[string]any{}
		if m, ok := d.table(val, inFile, key); ok {
			sub = m
		}
		d.decodeStruct(fv, sub, key, envName+"_")
	case reflect.String, reflect.Int, reflect.Bool:
		d.scalar(fv, val, inFile, key, envName, false)
	default:
		d.add(key, "internal: unsupported field type %s", f.Type)
	}
}

// decoderOf returns the method that decodes a field of type t, or nil for
// the structs and scalars that field decodes itself.
func (d *decoder) decoderOf(t reflect.Type) func(fv reflect.Value, val any, inFile bool, key, envName string) {
	switch t {
	case secretType:
		return d.secret
	case routeType:
		return d.route
	case topicsType:
		return d.topics
	case transformsType:
		return d.transforms
	case anyMapType:
		return d.anyMap
	case stringMapType:
		return d.properties
	case stringsType:
		return d.strings
	}
	return nil
}

// secret decodes a confkit.Secret as a string, kept out of problem
// messages.
func (d *decoder) secret(fv reflect.Value, val any, inFile bool, key, envName string) {
	var s string
	if d.scalar(reflect.ValueOf(&s).Elem(), val, inFile, key, envName, true) {
		fv.Set(reflect.ValueOf(confkit.NewSecret(s)))
	}
}

// anyMap decodes a table the file holds as it is (plugin_config).
func (d *decoder) anyMap(fv reflect.Value, val any, inFile bool, key, _ string) {
	if m, ok := d.table(val, inFile, key); ok {
		fv.Set(reflect.ValueOf(m))
	}
}

// table returns the file's value val of key when it is a table, with a
// problem when it is something else.
func (d *decoder) table(val any, inFile bool, key string) (map[string]any, bool) {
	if !inFile {
		return nil, false
	}
	m, ok := val.(map[string]any)
	if !ok {
		d.add(key, "expected a table, got %s", describe(val, false))
		return nil, false
	}
	d.defined[key] = true
	return m, true
}

// scalar decodes the one value of a string, int or bool field fv from its
// environment variable or else from the file, and reports whether it set
// fv. secret keeps the value out of problem messages.
func (d *decoder) scalar(fv reflect.Value, val any, inFile bool, key, envName string, secret bool) bool {
	if s, ok := d.lookup(key, envName); ok {
		return d.scalarFromEnv(fv, s, key, envName, secret)
	}
	return inFile && d.scalarFromFile(fv, val, key, secret)
}

func (d *decoder) scalarFromEnv(fv reflect.Value, s, key, envName string, secret bool) bool {
	var v any = s
	if k := fv.Kind(); k != reflect.String {
		var err error
		if v, err = confgen.EnvValue(envName, s, scalarKinds[k].env, secret); err != nil {
			d.add(key, "%v", err)
			return false
		}
	}
	setScalar(fv, v)
	d.defined[key] = true
	d.fromEnv[key] = envName
	return true
}

func (d *decoder) scalarFromFile(fv reflect.Value, val any, key string, secret bool) bool {
	if !setScalar(fv, val) {
		d.add(key, "expected %s, got %s", scalarKinds[fv.Kind()].want, describe(val, secret))
		return false
	}
	d.defined[key] = true
	return true
}

// scalarKinds are the kinds of the fields that hold one value: what the
// file's value must be (for the problem message) and how an environment
// variable's text parses (a string's is taken as it is).
var scalarKinds = map[reflect.Kind]struct {
	want string
	env  confgen.EnvKind
}{
	reflect.String: {"a string", confgen.EnvString},
	reflect.Int:    {"an integer", confgen.EnvInt},
	reflect.Bool:   {"a boolean (true or false)", confgen.EnvBool},
}

// setScalar stores v in fv when v is of fv's kind (an int64 for an int)
// and reports whether it did.
func setScalar(fv reflect.Value, v any) bool {
	rv, want := reflect.ValueOf(v), fv.Kind()
	if want == reflect.Int {
		want = reflect.Int64
	}
	if !rv.IsValid() || rv.Kind() != want {
		return false
	}
	fv.Set(rv.Convert(fv.Type()))
	return true
}

// strings decodes a list of strings: an array in the file, a
// comma-separated list or a JSON array in the environment.
func (d *decoder) strings(fv reflect.Value, val any, inFile bool, key, envName string) {
	var items []any
	if s, ok := d.lookup(key, envName); ok {
		v, err := confgen.EnvValue(envName, s, confgen.EnvList, false)
		if err != nil {
			d.add(key, "%v", err)
			return
		}
		items = v.([]any)
		d.fromEnv[key] = envName
	} else if inFile {
		l, ok := val.([]any)
		if !ok {
			d.add(key, "expected an array of strings, got %s", describe(val, false))
			return
		}
		items = l
	} else {
		return
	}
	out := make([]string, 0, len(items))
	for i, it := range items {
		s, ok := it.(string)
		if !ok {
			d.add(fmt.Sprintf("%s[%d]", key, i), "expected a string, got %s", describe(it, false))
			continue
		}
		out = append(out, s)
	}
	d.defined[key] = true
	fv.Set(reflect.ValueOf(out))
}

// route decodes topic: a string is a literal, a table a rule. Env:
// NAME (a literal, or a JSON object for a rule) and NAME_STRATEGY,
// NAME_PATH, NAME_TEMPLATE, NAME_FALLBACK for the rule's keys.
func (d *decoder) route(fv reflect.Value, val any, inFile bool, key, envName string) {
	var r Route
	if inFile {
		switch t := val.(type) {
		case string:
			r.Literal = t
			d.defined[key] = true
		case map[string]any:
			d.defined[key] = true
			var ps confkit.Problems
			r, ps = decodeRule(t)
			for _, p := range ps {
				d.add(key+"."+p.Key, "%s", p.Message)
			}
		default:
			d.add(key, "expected a topic name or a routing rule such as { strategy = \"field\", path = \"tenant\", template = \"orders.{value}\" }, got %s", describe(val, false))
		}
	}
	if s, ok := d.lookup(key, envName); ok {
		d.defined[key] = true
		d.fromEnv[key] = envName
		if strings.HasPrefix(strings.TrimSpace(s), "{") {
			var m map[string]any
			var nr Route
			if err := json.Unmarshal([]byte(s), &m); err != nil {
				d.add(key, "environment variable %s = %q is not a JSON object: %v", envName, s, err)
			} else if err := nr.UnmarshalTOML(m); err != nil {
				d.add(key, "environment variable %s = %q: %v", envName, s, err)
			} else {
				r = nr
			}
		} else {
			r = Route{Literal: s}
		}
	}
	for _, k := range routeKeys {
		name := confgen.EnvName(envName+"_", k)
		if s, ok := d.lookup(key+"."+k, name); ok {
			d.defined[key] = true
			d.fromEnv[key+"."+k] = name
			r.Literal = ""
			r.setRuleKey(k, s)
		}
	}
	fv.Set(reflect.ValueOf(r))
}

// tables accepts an array of tables, or an inline array of inline tables.
func tables(val any) ([]map[string]any, bool) {
	switch t := val.(type) {
	case []map[string]any:
		return t, true
	case []any:
		out := make([]map[string]any, 0, len(t))
		for _, e := range t {
			m, ok := e.(map[string]any)
			if !ok {
				return nil, false
			}
			out = append(out, m)
		}
		return out, true
	}
	return nil, false
}

// envNameFor returns the first variable (in sorted order) starting with
// prefix.
func (d *decoder) envNameFor(prefix string) string {
	for _, name := range slices.Sorted(maps.Keys(d.env)) {
		if strings.HasPrefix(name, prefix) {
			return name
		}
	}
	return prefix + "..."
}

// markUsed marks every variable starting with prefix as used.
func (d *decoder) markUsed(prefix string) {
	for name := range d.env {
		if strings.HasPrefix(name, prefix) {
			d.used[name] = true
		}
	}
}

// envIndexes returns the block indexes that variables prefix+"{i}_..." name.
func (d *decoder) envIndexes(prefix string) []int {
	seen := map[int]bool{}
	for name := range d.env {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		num, _, ok := strings.Cut(rest, "_")
		if !ok {
			continue
		}
		if i, err := strconv.Atoi(num); err == nil && i >= 0 && i < 1000 {
			seen[i] = true
		}
	}
	var out []int
	for i := range seen {
		out = append(out, i)
	}
	slices.Sort(out)
	return out
}

// topics decodes [[topics]]; variables NAME_{i}_FIELD override block i,
// and may add blocks after the file's last one.
func (d *decoder) topics(fv reflect.Value, val any, inFile bool, key, envName string) {
	var blocks []map[string]any
	if inFile {
		b, ok := tables(val)
		if !ok {
			d.add(key, "expected [[topics]] blocks (an array of tables), got %s", describe(val, false))
		} else {
			blocks = b
			d.defined[key] = true
		}
	}
	n := len(blocks)
	for _, i := range d.envIndexes(envName + "_") {
		if i < len(blocks) {
			continue
		}
		if i > n {
			// A gap: the blocks before i would be empty. The variables
			// of the blocks after it are reported here, not as unknown.
			for _, j := range d.envIndexes(envName + "_") {
				if j >= i {
					d.markUsed(fmt.Sprintf("%s_%d_", envName, j))
				}
			}
			d.add(fmt.Sprintf("%s[%d]", key, i), "added by environment variable %s, but nothing sets %s[%d]; variables add blocks right after the file's last one (%s[%d] here), without gaps",
				d.envNameFor(fmt.Sprintf("%s_%d_", envName, i)), key, n, key, len(blocks))
			break
		}
		n = i + 1
	}
	out := make([]Topics, n)
	for i := 0; i < n; i++ {
		raw := map[string]any{}
		if i < len(blocks) {
			raw = blocks[i]
		}
		d.decodeStruct(reflect.ValueOf(&out[i]).Elem(), raw, fmt.Sprintf("%s[%d]", key, i), fmt.Sprintf("%s_%d_", envName, i))
	}
	if n > len(blocks) {
		d.defined[key] = true
	}
	fv.Set(reflect.ValueOf(out))
}

// properties decodes a table of librdkafka settings. Values may be strings,
// numbers or booleans; they are passed on as strings. Variables: NAME as a
// JSON object merged on top, and NAME_{PROPERTY} with the property's dots
// written as underscores (linger.ms -> NAME_LINGER_MS).
func (d *decoder) properties(fv reflect.Value, val any, inFile bool, key, envName string) {
	props := map[string]string{}
	if inFile {
		m, ok := val.(map[string]any)
		if !ok {
			d.add(key, "expected a table of librdkafka settings, got %s", describe(val, false))
		} else {
			d.defined[key] = true
			for _, k := range slices.Sorted(maps.Keys(m)) {
				switch v := m[k].(type) {
				case string:
					props[k] = v
				case int64:
					props[k] = strconv.FormatInt(v, 10)
				case float64:
					props[k] = strconv.FormatFloat(v, 'f', -1, 64)
				case bool:
					props[k] = strconv.FormatBool(v)
				default:
					d.add(key+"."+quoteKey(k), "expected a string, number or boolean, got %s", describe(v, true))
				}
			}
		}
	}
	if s, ok := d.lookup(key, envName); ok {
		var m map[string]any
		if err := json.Unmarshal([]byte(s), &m); err != nil {
			d.add(key, "environment variable %s is not a JSON object of librdkafka settings such as {\"linger.ms\":\"5\"}: %v", envName, err)
		} else {
			d.defined[key] = true
			d.fromEnv[key] = envName
			for k, v := range m {
				switch t := v.(type) {
				case string:
					props[k] = t
				default:
					b, _ := json.Marshal(t)
					props[k] = string(b)
				}
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(d.env)) {
		rest, ok := strings.CutPrefix(name, envName+"_")
		if !ok || rest == "" {
			continue
		}
		prop := ""
		for k := range props {
			if confgen.EnvName("", k) == rest {
				prop = k
			}
		}
		if prop == "" {
			prop = strings.ReplaceAll(strings.ToLower(rest), "_", ".")
		}
		v, _ := d.lookup(key, name)
		props[prop] = v
		d.defined[key] = true
		d.fromEnv[key+"."+quoteKey(prop)] = name
	}
	if len(props) > 0 {
		fv.Set(reflect.ValueOf(props))
	}
}

// transforms decodes [[transforms]] blocks (each with a type key) or
// [transforms.NAME] tables (NAME is the type), into one list with "type"
// set, in file order. "enabled" (default true) may be overridden from
// NAME_{i}_ENABLED; every other key belongs to the transform's own Load.
func (d *decoder) transforms(fv reflect.Value, val any, inFile bool, key, envName string) {
	if !inFile {
		return
	}
	d.defined[key] = true
	var out []map[string]any
	if blocks, ok := tables(val); ok {
		for i, b := range blocks {
			m := maps.Clone(b)
			k := fmt.Sprintf("%s[%d]", key, i)
			if t, ok := m["type"].(string); !ok || t == "" {
				d.add(k+".type", "missing: each [[transforms]] block needs type = \"add_fields\" (or another transform)")
			}
			d.transformEnabled(m, k, fmt.Sprintf("%s_%d_ENABLED", envName, i))
			d.transformPrefixes = append(d.transformPrefixes, fmt.Sprintf("%s_%d_", envName, i))
			out = append(out, m)
		}
	} else if named, ok := val.(map[string]any); ok {
		names := slices.Sorted(maps.Keys(named))
		slices.SortStableFunc(names, func(a, b string) int { return cmp.Compare(d.order[key+"."+a], d.order[key+"."+b]) })
		for _, name := range names {
			b, ok := named[name].(map[string]any)
			k := key + "." + name
			if !ok {
				d.add(k, "expected a table [transforms.%s], got %s", name, describe(named[name], false))
				continue
			}
			m := maps.Clone(b)
			if t, ok := m["type"]; ok && t != name {
				d.add(k+".type", "type = %v contradicts the table name %q; remove type", describe(t, false), name)
			}
			m["type"] = name
			d.transformEnabled(m, k, confgen.EnvName(envName+"_", name, "enabled"))
			d.transformPrefixes = append(d.transformPrefixes, confgen.EnvName(envName+"_", name)+"_")
			out = append(out, m)
		}
	} else {
		d.add(key, "expected [[transforms]] blocks or [transforms.NAME] tables, got %s", describe(val, false))
	}
	fv.Set(reflect.ValueOf(out))
}

func (d *decoder) transformEnabled(m map[string]any, key, envName string) {
	if s, ok := d.lookup(key+".enabled", envName); ok {
		b, err := confgen.EnvValue(envName, s, confgen.EnvBool, false)
		if err != nil {
			d.add(key+".enabled", "%v", err)
			return
		}
		m["enabled"] = b
		return
	}
	if v, ok := m["enabled"]; ok {
		if _, isBool := v.(bool); !isBool {
			d.add(key+".enabled", "expected a boolean (true or false), got %s", describe(v, false))
			m["enabled"] = true
		}
	}
}

func quoteKey(k string) string {
	for _, r := range k {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-') {
			return strconv.Quote(k)
		}
	}
	return k
}

// describe names a TOML value's type, with the value unless it is secret.
func describe(v any, secret bool) string {
	var kind string
	switch v.(type) {
	case string:
		kind = "a string"
	case int64:
		kind = "an integer"
	case float64:
		kind = "a float"
	case bool:
		kind = "a boolean"
	case map[string]any:
		return "a table"
	case []map[string]any, []any:
		return "an array"
	case time.Time:
		kind = "a date-time"
	default:
		kind = fmt.Sprintf("a %T", v)
	}
	if secret {
		return kind
	}
	s := fmt.Sprintf("%v", v)
	if str, ok := v.(string); ok {
		s = strconv.Quote(str)
	}
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return kind + " (" + s + ")"
}
