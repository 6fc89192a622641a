package gocode

import (
	"fmt"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

// defaultName is the function that returns o with every default: Default
// for Config, Default + the type for an array's element (code that builds
// a Config appends those), and an unexported default + the type for a
// nested table.
func defaultName(o *model.Object) string {
	switch {
	case o.TypeName == "Config":
		return "Default"
	case isItem(o):
		return "Default" + o.TypeName
	}
	return "default" + o.TypeName
}

// hasDefaults reports whether o or a table nested in it has a default.
func hasDefaults(o *model.Object) bool {
	for _, pr := range o.Props {
		if pr.HasDefault || pr.Kind == model.Nested && hasDefaults(pr.Object) {
			return true
		}
	}
	return false
}

func (g *generator) defaults(f *jen.File, o *model.Object) {
	name := defaultName(o)
	var doc string
	switch {
	case o.TypeName == "Config":
		doc = "Default returns the Config of an empty plugin_config table: every key at its schema default, the others at their zero value. A Config built from it is checked with Validate."
	case isItem(o):
		doc = fmt.Sprintf("%s returns one element of the %s array with every key at its schema default.", name, arrayKey(o))
	default:
		doc = fmt.Sprintf("%s returns the %s table with every key at its schema default.", name, o.Key())
	}
	var cond []string
	for _, pr := range o.Props {
		if len(pr.DefaultIf) > 0 {
			cond = append(cond, pr.Key+" ("+defaultWords(pr)+")")
		}
	}
	if len(cond) > 0 {
		doc += " The defaults that depend on other keys are Load's: " + strings.Join(cond, ", ") + "."
	}
	f.Add(comment(wrap(doc)))
	f.Func().Id(name).Params().Id(o.TypeName).Block(
		jen.Return(jen.Id(o.TypeName).ValuesFunc(func(gr *jen.Group) {
			n := 0
			for _, pr := range o.Props {
				var v jen.Code
				switch {
				case pr.HasDefault:
					v = defaultLit(pr)
				case pr.Kind == model.Nested && hasDefaults(pr.Object):
					v = jen.Id(defaultName(pr.Object)).Call()
				default:
					continue
				}
				gr.Line().Id(pr.GoName).Op(":").Add(v)
				n++
			}
			if n > 0 {
				gr.Line()
			}
		})),
	)
	f.Line()
}
