package gocode

import (
	"fmt"

	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

// isItem reports whether o is the element table of an array, not a table
// nested in one.
func isItem(o *model.Object) bool { return len(o.Path) > 0 && o.Path[len(o.Path)-1] == "[]" }

// arrayKey is the key path of the array whose element o is.
func arrayKey(o *model.Object) string { return model.KeyPath(o.Path[:len(o.Path)-1]) }

func (g *generator) enums(f *jen.File, o *model.Object) {
	for _, pr := range o.Props {
		if pr.Kind != model.Enum {
			continue
		}
		doc := fmt.Sprintf("%s is the type of the %s key.", pr.EnumType, pr.DotPath())
		if pr.Description != "" {
			doc = fmt.Sprintf("%s is the type of the %s key: %s", pr.EnumType, pr.DotPath(), pr.Description)
		}
		f.Add(comment(doc))
		f.Type().Id(pr.EnumType).String()
		f.Line()
		f.Commentf("The values of %s.", pr.EnumType)
		f.Const().DefsFunc(func(gr *jen.Group) {
			for _, e := range pr.Enum {
				if d := pr.EnumDescriptions[e.Value]; d != "" {
					gr.Add(comment(e.Const + ": " + d))
				}
				gr.Id(e.Const).Id(pr.EnumType).Op("=").Lit(e.Value)
			}
		})
		f.Line()
	}
}

func goType(pr *model.Property) *jen.Statement {
	switch pr.Kind {
	case model.Int, model.Bool:
		if pr.Optional {
			return jen.Op("*").Add(elemType(pr.Kind))
		}
		return elemType(pr.Kind)
	case model.String, model.Number:
		return elemType(pr.Kind)
	case model.Enum:
		return jen.Id(pr.EnumType)
	case model.Size, model.Template, model.Secret:
		return kit(map[model.Kind]string{model.Size: "Size", model.Template: "Template", model.Secret: "Secret"}[pr.Kind])
	case model.Duration:
		return jen.Qual("time", "Duration")
	case model.StringList:
		return jen.Index().String()
	case model.IntList:
		return jen.Index().Int()
	case model.NumberList:
		return jen.Index().Float64()
	case model.Nested:
		return jen.Id(pr.Object.TypeName)
	case model.ObjectList:
		return jen.Index().Id(pr.Items.TypeName)
	case model.Map:
		return jen.Map(jen.String()).Add(elemType(pr.MapElem))
	}
	panic("unknown kind")
}

// elems are the Go type and the confgen converter of the values a map key
// can hold; any other kind is any, with AsAny.
var elems = map[model.Kind]struct {
	typ  func() *jen.Statement
	conv string
}{
	model.String: {jen.String, "AsString"}, model.Int: {jen.Int, "AsInt"},
	model.Number: {jen.Float64, "AsFloat"}, model.Bool: {jen.Bool, "AsBool"},
}

func elemType(k model.Kind) *jen.Statement {
	if e, ok := elems[k]; ok {
		return e.typ()
	}
	return jen.Any()
}

func elemConv(k model.Kind) *jen.Statement {
	if e, ok := elems[k]; ok {
		return kit(e.conv)
	}
	return kit("AsAny")
}

func (g *generator) structType(f *jen.File, o *model.Object) {
	switch {
	case o.TypeName == "Config":
		f.Commentf("Config is the plugin_config of %s. Load builds it; a zero Config is not valid.", g.s.Name)
	case len(o.Path) > 0 && o.Path[len(o.Path)-1] == "[]":
		f.Commentf("%s is one element of the %s array.", o.TypeName, model.KeyPath(o.Path[:len(o.Path)-1]))
	default:
		f.Commentf("%s is the %s table.", o.TypeName, o.Key())
	}
	f.Type().Id(o.TypeName).StructFunc(func(gr *jen.Group) {
		for i, pr := range o.Props {
			if i > 0 {
				gr.Line()
			}
			doc := fmt.Sprintf("%s is the %s key.", pr.GoName, pr.DotPath())
			if pr.Description != "" {
				doc = fmt.Sprintf("%s is the %s key: %s", pr.GoName, pr.DotPath(), pr.Description)
			}
			if d := defaultWords(pr); d != "" {
				doc += "\n\nDefault: " + d + "."
			}
			if pr.Deprecated {
				doc += "\n\nDeprecated: " + or(pr.DeprecatedMsg, "this key may be removed.")
			}
			gr.Add(comment(doc))
			gr.Id(pr.GoName).Add(goType(pr))
		}
		if o.TypeName == "Config" {
			gr.Line()
			gr.Id("warnings").Index().String()
		}
	})
	f.Line()
}
