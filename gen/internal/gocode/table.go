package gocode

import (
	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

func (g *generator) validate(f *jen.File) {
	f.Comment("Validate checks a Config built in code the way Load checks a table, with the")
	f.Comment("same rules and problems: it loads c's keys as a table, leaving out the keys")
	f.Comment("that are not set (an empty string, a nil list or pointer) unless they have a")
	f.Comment("default. It returns every problem at once as confkit.Problems.")
	f.Func().Params(jen.Id("c").Id("Config")).Id("Validate").Params().Error().Block(
		jen.Return(kit("Validate").Call(jen.Id("c").Dot("table").Call(), jen.Op("&").Id("spec"), jen.Id("decodeConfig"))),
	)
	f.Line()
}

// alwaysSet reports whether table writes pr whatever its value: a key with
// a default, or a number or boolean that is not a pointer (its zero value is
// a value).
func alwaysSet(pr *model.Property) bool {
	if pr.HasDefault {
		return true
	}
	switch pr.Kind {
	case model.Int, model.Bool:
		return !pr.Optional
	case model.Number:
		return true
	}
	return false
}

// table writes the method that returns c as a plugin_config table, the
// input of Load: secrets revealed, sizes, durations and templates as text.
func (g *generator) table(f *jen.File, o *model.Object) {
	f.Comment("table returns c as a table for Load: secrets revealed, sizes, durations and")
	f.Comment("templates as text, and without the keys that are not set.")
	f.Func().Params(jen.Id("c").Id(o.TypeName)).Id("table").Params().Map(jen.String()).Any().BlockFunc(func(gr *jen.Group) {
		var always []*model.Property
		var maybe []*model.Property
		for _, pr := range o.Props {
			if alwaysSet(pr) && pr.Kind != model.Nested && pr.Kind != model.ObjectList {
				always = append(always, pr)
			} else {
				maybe = append(maybe, pr)
			}
		}
		gr.Id("m").Op(":=").Map(jen.String()).Any().ValuesFunc(func(vg *jen.Group) {
			for _, pr := range always {
				v, _ := tableEntry(pr, func() *jen.Statement { return jen.Id("c").Dot(pr.GoName) })
				vg.Line().Lit(pr.Key).Op(":").Add(v)
			}
			if len(always) > 0 {
				vg.Line()
			}
		})
		for _, pr := range maybe {
			field := jen.Id("c").Dot(pr.GoName)
			set := jen.Lit(pr.Key)
			switch pr.Kind {
			case model.Nested:
				gr.If(jen.Id("t").Op(":=").Add(field).Dot("table").Call(), jen.Len(jen.Id("t")).Op(">").Lit(0)).Block(
					jen.Id("m").Index(set).Op("=").Id("t"))
			case model.ObjectList:
				gr.If(field.Clone().Op("!=").Nil()).Block(
					jen.Id("l").Op(":=").Make(jen.Index().Any(), jen.Len(field.Clone())),
					jen.For(jen.List(jen.Id("i"), jen.Id("e")).Op(":=").Range().Add(field.Clone())).Block(
						jen.Id("l").Index(jen.Id("i")).Op("=").Id("e").Dot("table").Call(),
					),
					jen.Id("m").Index(set).Op("=").Id("l"),
				)
			default:
				if (pr.Kind == model.Int || pr.Kind == model.Bool) && pr.Optional {
					gr.Add(kit("PutPtr")).Call(jen.Id("m"), set, field.Clone())
				} else {
					v, isSet := tableEntry(pr, field.Clone)
					gr.Add(kit("PutIf")).Call(jen.Id("m"), isSet, set, v)
				}
			}
		}
		gr.Return(jen.Id("m"))
	})
	f.Line()
}

// tableEntry is a key's value as a table holds it, and the test that the
// key is set in code (for a key without a default); field writes the
// key's field.
func tableEntry(pr *model.Property, field func() *jen.Statement) (value jen.Code, set *jen.Statement) {
	switch pr.Kind {
	case model.Size, model.Duration:
		return field().Dot("String").Call(), field().Op("!=").Lit(0)
	case model.Secret:
		return field().Dot("Reveal").Call(), field().Dot("IsSet").Call()
	case model.Template:
		return field().Dot("Source"), field().Dot("Source").Op("!=").Lit("")
	case model.Enum:
		return jen.String().Call(field()), field().Op("!=").Lit("")
	case model.String:
		return field(), field().Op("!=").Lit("")
	case model.Int, model.Bool:
		if pr.Optional {
			return jen.Op("*").Add(field()), field().Op("!=").Nil()
		}
	}
	return field(), field().Op("!=").Nil() // lists and maps
}
