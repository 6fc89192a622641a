package definition

import (
	"reflect"
	"strings"

	"github.com/picomq/pico-connectors/sdk/confgen"
)

// Variable documents one environment override.
type Variable struct {
	// Name is the variable, with {T} (SINK or SOURCE), {KEY} (the
	// connector's key, upper case), {i} (a [[topics]] block, 0-based) and
	// {NAME} (a property) where they vary.
	Name string
	// Key is the key it overrides, such as topics[{i}].linger_time.
	Key string
	// Type is string, integer, boolean, string or table (a routing rule),
	// or table (JSON object) for properties.
	Type string
	// Description is the key's description.
	Description string
}

// RuntimeVariables lists the overrides of the runtime config.
func RuntimeVariables() []Variable {
	return variables(reflect.TypeOf(Runtime{}), "", EnvPrefix)
}

// ConnectorVariables lists the overrides of a definition file, except
// plugin_config (PICOMQ_CONNECTORS_{T}_{KEY}_PLUGIN_CONFIG_{FIELD}, listed
// by each connector's reference) and transforms
// ({T}_{KEY}_TRANSFORMS_{i}_{FIELD}, or _TRANSFORMS_{NAME}_{FIELD}).
func ConnectorVariables() []Variable {
	return variables(reflect.TypeOf(Connector{}), "", EnvPrefix+"{T}_{KEY}_")
}

func variables(t reflect.Type, path, prefix string) []Variable {
	var out []Variable
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name := tomlName(f)
		if name == "" || name == "-" || (t == reflect.TypeOf(Connector{}) && (name == "type" || name == "key" || name == "plugin_config" || name == "transforms")) {
			continue
		}
		key, env := joinKey(path, name), confgen.EnvName(prefix, name)
		desc := description(f)
		switch {
		case f.Type == topicsType:
			out = append(out, variables(reflect.TypeOf(Topics{}), key+"[{i}]", env+"_{i}_")...)
		case f.Type == routeType:
			out = append(out, Variable{env, key, "string or JSON object", "A literal topic name, or a routing rule as JSON."})
			for _, k := range routeKeys {
				out = append(out, Variable{confgen.EnvName(env+"_", k), key + "." + k, "string", "Routing rule: " + k + "."})
			}
		case f.Type == stringMapType:
			out = append(out, Variable{env, key, "JSON object", desc + " Merged over the file's table."},
				Variable{env + "_{NAME}", key + ".{name}", "string", "One setting; dots in its name written as _ (linger.ms: _LINGER_MS)."})
		case f.Type == stringsType:
			out = append(out, Variable{env, key, "comma-separated list or JSON array", desc})
		case f.Type == secretType:
			out = append(out, Variable{env, key, "string", desc})
		case f.Type.Kind() == reflect.Struct:
			out = append(out, variables(f.Type, key, env+"_")...)
		default:
			typ := map[reflect.Kind]string{reflect.String: "string", reflect.Int: "integer", reflect.Bool: "boolean"}[f.Type.Kind()]
			out = append(out, Variable{env, key, typ, desc})
		}
	}
	return out
}

func description(f reflect.StructField) string {
	tag := f.Tag.Get("jsonschema")
	i := strings.Index(tag, "description=")
	if i < 0 {
		return ""
	}
	d := tag[i+len("description="):]
	// The description runs to the next ",key=" of the tag.
	for _, k := range []string{",default=", ",enum=", ",pattern="} {
		if j := strings.Index(d, k); j >= 0 {
			d = d[:j]
		}
	}
	return d
}
