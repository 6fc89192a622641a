// Package runtimeschema reflects the runtime config and the connector
// definition file (runtime/definition) into JSON Schemas with
// invopop/jsonschema, and writes their reference tables.
package runtimeschema

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	"github.com/invopop/jsonschema"

	"github.com/picomq/pico-connectors/gen/internal/docs"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/runtime/definition"
)

// Output is what Generate produces.
type Output struct {
	RuntimeSchema   []byte
	ConnectorSchema []byte
	RuntimeDoc      []byte
	DefinitionDoc   []byte
}

func reflector() *jsonschema.Reflector {
	return &jsonschema.Reflector{
		DoNotReference: true,
		ExpandedStruct: true,
		Anonymous:      true,
		Mapper: func(t reflect.Type) *jsonschema.Schema {
			if t == reflect.TypeOf(confkit.Secret{}) {
				return &jsonschema.Schema{Type: "string"}
			}
			if t == reflect.TypeOf(definition.Route{}) {
				obj := &jsonschema.Schema{
					Type:                 "object",
					AdditionalProperties: jsonschema.FalseSchema,
					Properties:           jsonschema.NewProperties(),
				}
				obj.Properties.Set("strategy", &jsonschema.Schema{Type: "string", Enum: []any{"field", "key", "header"}, Description: "How the topic is chosen: from a payload field, the record key, or a header."})
				obj.Properties.Set("path", &jsonschema.Schema{Type: "string", Description: "The JSON field path (field) or header name (header)."})
				obj.Properties.Set("template", &jsonschema.Schema{Type: "string", Description: "Renders the topic; {value} is the routed value. Default {value}: the value is the topic name."})
				obj.Properties.Set("fallback", &jsonschema.Schema{Type: "string", Description: "Topic for records the rule cannot route."})
				obj.Required = []string{"strategy"}
				return &jsonschema.Schema{
					Description: "A literal topic name, or a routing rule (sources).",
					OneOf:       []*jsonschema.Schema{{Type: "string", Description: "A literal topic name."}, obj},
				}
			}
			return nil
		},
	}
}

// fixDescriptions replaces descriptions that invopop cut at a comma: the
// runtime's tags run a description up to the next ",default=", ",enum=" or
// ",pattern=", and the reference pages need all of it.
func fixDescriptions(s *jsonschema.Schema, t reflect.Type) {
	for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || s == nil || s.Properties == nil {
		return
	}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		p, ok := s.Properties.Get(name)
		if !ok || p == nil {
			continue
		}
		if d := tagDescription(f.Tag.Get("jsonschema")); d != "" {
			p.Description = d
		}
		if p.Items != nil {
			fixDescriptions(p.Items, f.Type)
		} else {
			fixDescriptions(p, f.Type)
		}
	}
}

func tagDescription(tag string) string {
	i := strings.Index(tag, "description=")
	if i < 0 {
		return ""
	}
	d := tag[i+len("description="):]
	for _, k := range []string{",default=", ",enum=", ",pattern=", ",required", ",minimum=", ",maximum="} {
		if j := strings.Index(d, k); j >= 0 {
			d = d[:j]
		}
	}
	return strings.ReplaceAll(d, "\\,", ",")
}

func reflectJSON(v any, id, title string) (*jsonschema.Schema, []byte, error) {
	s := reflector().Reflect(v)
	fixDescriptions(s, reflect.TypeOf(v))
	s.Version = "https://json-schema.org/draft/2020-12/schema"
	s.ID = jsonschema.ID(id)
	s.Title = title
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, nil, err
	}
	return s, append(b, '\n'), nil
}

// Generate reflects both files.
func Generate() (*Output, error) {
	rs, rb, err := reflectJSON(&definition.Runtime{}, "https://picomq.dev/schemas/runtime/runtime.json", "pico-connectors runtime config")
	if err != nil {
		return nil, fmt.Errorf("reflecting definition.Runtime: %w", err)
	}
	cs, cb, err := reflectJSON(&definition.Connector{}, "https://picomq.dev/schemas/runtime/connector.json", "pico-connectors connector definition")
	if err != nil {
		return nil, fmt.Errorf("reflecting definition.Connector: %w", err)
	}
	out := &Output{RuntimeSchema: rb, ConnectorSchema: cb}

	var b bytes.Buffer
	fmt.Fprintf(&b, "%s\n\n# Runtime config\n\nThe file given to `pico-connectors --config`. Its JSON Schema is `schemas/runtime/runtime.json`, reflected from `definition.Runtime`. Every key can be set from the environment variable shown, which wins over the file. Lists and tables take a JSON value.\n\n", docs.Marker)
	table(&b, rs, varsByKey(definition.RuntimeVariables()), "PICOMQ_CONNECTORS_")
	out.RuntimeDoc = b.Bytes()

	b = bytes.Buffer{}
	fmt.Fprintf(&b, "%s\n\n# Connector definition file\n\nOne file per connector in `connectors_dir`. Its JSON Schema is `schemas/runtime/connector.json`, reflected from `definition.Connector`. In the variable names `<TYPE>` is SINK or SOURCE, `<KEY>` the connector's key upper-cased, and `<i>` the 0-based index of a `[[topics]]` or `[[transforms]]` block (variables with a new index add a block). The keys of `[plugin_config]` are on each connector's own page, under `PICOMQ_CONNECTORS_<TYPE>_<KEY>_PLUGIN_CONFIG_`.\n\n", docs.Marker)
	table(&b, cs, varsByKey(definition.ConnectorVariables()), "PICOMQ_CONNECTORS_<TYPE>_<KEY>_")
	out.DefinitionDoc = b.Bytes()
	return out, nil
}

// varsByKey indexes the runtime's own list of variables by key, written
// the way the tables write keys (topics[i].pattern).
func varsByKey(vs []definition.Variable) map[string][]string {
	out := map[string][]string{}
	for _, v := range vs {
		k := strings.ReplaceAll(v.Key, "[{i}]", "[i]")
		k = strings.TrimSuffix(k, ".{name}")
		out[k] = append(out[k], placeholders(v.Name))
	}
	return out
}

func placeholders(name string) string {
	return strings.NewReplacer("{T}", "<TYPE>", "{KEY}", "<KEY>", "{i}", "<i>", "{NAME}", "<NAME>").Replace(name)
}

func table(b *bytes.Buffer, s *jsonschema.Schema, vars map[string][]string, prefix string) {
	fmt.Fprintf(b, "| Key | Type | Default | Meaning | Env variable |\n|---|---|---|---|---|\n")
	rows(b, s, vars, "", prefix)
	b.WriteString("\n")
}

func rows(b *bytes.Buffer, s *jsonschema.Schema, vars map[string][]string, keyPrefix, envPrefix string) {
	if s.Properties == nil {
		return
	}
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for pair := s.Properties.Oldest(); pair != nil; pair = pair.Next() {
		k, p := pair.Key, pair.Value
		key := keyPrefix + k
		env := envPrefix + strings.ToUpper(k)
		switch {
		case p.Type == "object" && p.Properties != nil && p.Properties.Len() > 0:
			rows(b, p, vars, key+".", env+"_")
		case p.Type == "array" && p.Items != nil && p.Items.Type == "object" && p.Items.Properties != nil:
			rows(b, p.Items, vars, key+"[i].", env+"_<i>_")
		default:
			envCell := docs.Code(env)
			if len(vars) > 0 {
				if names, ok := vars[key]; ok {
					var cells []string
					for _, n := range names {
						cells = append(cells, docs.Code(n))
					}
					envCell = strings.Join(cells, " or ")
				} else {
					envCell = "none"
				}
			}
			def := defaultOf(p)
			if required[k] {
				def = "required"
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", docs.Code(key), typeOf(p), def, cellText(p.Description), envCell)
		}
	}
}

func typeOf(p *jsonschema.Schema) string {
	switch {
	case len(p.OneOf) > 0:
		var ts []string
		for _, o := range p.OneOf {
			ts = append(ts, typeOf(o))
		}
		return strings.Join(ts, " or ")
	case len(p.Enum) > 0:
		var vs []string
		for _, e := range p.Enum {
			vs = append(vs, fmt.Sprint(e))
		}
		return "one of " + strings.Join(vs, ", ")
	case p.Type == "array":
		if p.Items != nil && p.Items.Type != "" {
			if p.Items.Type == "object" {
				return "list of tables"
			}
			return "list of " + p.Items.Type + "s"
		}
		return "list"
	case p.Type == "object":
		if p.AdditionalProperties != nil && p.AdditionalProperties.Type != "" {
			return "table of " + p.AdditionalProperties.Type + "s (env: JSON object)"
		}
		return "table (env: JSON object)"
	case p.Type == "":
		return "any"
	}
	return p.Type
}

func defaultOf(p *jsonschema.Schema) string {
	if p.Default == nil {
		return "none"
	}
	return cellText(fmt.Sprint(p.Default))
}

func cellText(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if s == "" {
		return " "
	}
	return strings.ReplaceAll(s, "|", "\\|")
}
