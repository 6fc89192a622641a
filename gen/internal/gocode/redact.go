package gocode

import (
	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

func (g *generator) redacted(f *jen.File, o *model.Object) {
	recv := jen.Id("c").Id(o.TypeName)
	if o.TypeName == "Config" {
		f.Comment("Redacted returns the configuration for display, keyed by the schema's key names,")
		f.Comment("with every secret masked and sizes, durations and templates as text.")
		f.Func().Params(recv).Id("Redacted").Params().Map(jen.String()).Any().Block(g.redactedBody(o)...)
	} else {
		f.Commentf("redacted is Redacted for the %s table.", o.Key())
		f.Func().Params(recv).Id("redacted").Params().Map(jen.String()).Any().Block(g.redactedBody(o)...)
	}
	f.Line()
}

func (g *generator) redactedBody(o *model.Object) []jen.Code {
	return []jen.Code{jen.Return(jen.Map(jen.String()).Any().ValuesFunc(func(gr *jen.Group) {
		for _, pr := range o.Props {
			field := jen.Id("c").Dot(pr.GoName)
			var v jen.Code
			switch pr.Kind {
			case model.Size, model.Duration, model.Secret:
				v = field.Dot("String").Call()
			case model.Template:
				v = field.Dot("Source")
			case model.Enum:
				v = jen.String().Call(field)
			case model.Nested:
				v = field.Dot("redacted").Call()
			case model.ObjectList:
				v = jen.Func().Params().Index().Map(jen.String()).Any().Block(
					jen.If(field.Clone().Op("==").Nil()).Block(jen.Return(jen.Nil())),
					jen.Id("out").Op(":=").Make(jen.Index().Map(jen.String()).Any(), jen.Len(field.Clone())),
					jen.For(jen.List(jen.Id("i"), jen.Id("e")).Op(":=").Range().Add(field.Clone())).Block(
						jen.Id("out").Index(jen.Id("i")).Op("=").Id("e").Dot("redacted").Call(),
					),
					jen.Return(jen.Id("out")),
				).Call()
			case model.Int, model.Bool:
				if pr.Optional {
					v = kit("PtrValue").Call(field)
				} else {
					v = field
				}
			case model.StringList, model.IntList, model.NumberList, model.Map:
				v = jen.Qual("slices", "Clone").Call(field)
				if pr.Kind == model.Map {
					v = jen.Qual("maps", "Clone").Call(field)
				}
			default:
				v = field
			}
			gr.Line().Lit(pr.Key).Op(":").Add(v)
		}
		if len(o.Props) > 0 {
			gr.Line()
		}
	}))}
}
