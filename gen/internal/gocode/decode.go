package gocode

import (
	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

func (g *generator) load(f *jen.File) {
	f.Comment("Load builds a Config from a parsed [plugin_config] table. It applies key aliases,")
	f.Comment("then the environment variables envPrefix + KEY (nested keys joined by _) read")
	f.Comment("through env (nil reads none), resolves enum aliases, checks the table against")
	f.Comment("Schema, decodes it with defaults, and checks the rules between keys. It returns")
	f.Comment("every problem at once as confkit.Problems; the problem of a value read from the")
	f.Comment("environment names the variable.")
	f.Func().Id("Load").Params(
		jen.Id("raw").Map(jen.String()).Any(),
		jen.Id("envPrefix").String(),
		jen.Id("env").Qual(pluginPath, "LookupEnv"),
	).Params(jen.Id("Config"), jen.Error()).Block(
		jen.Return(kit("Load").Call(jen.Id("raw"), jen.Id("envPrefix"), jen.Id("env"), jen.Op("&").Id("spec"), jen.Id("decodeConfig"))),
	)
	f.Line()
}

// key is the key path of pr in problems: a literal, or for the keys of an
// array's element the element's path at (such as "columns[2]") + ".key".
func key(pr *model.Property) *jen.Statement {
	if pr.InElement() {
		return jen.Id("at").Op("+").Lit("." + pr.Key)
	}
	return jen.Lit(pr.DotPath())
}

func appendProblem(p jen.Code) *jen.Statement {
	return jen.Op("*").Id("ps").Op("=").Append(jen.Op("*").Id("ps"), p)
}

func notBad(pr *model.Property) *jen.Statement {
	return jen.Op("!").Id("ps").Dot("Has").Call(key(pr))
}

func msg(pr *model.Property, rule, def string) *jen.Statement {
	if m, ok := pr.Messages[rule]; ok {
		return jen.Lit(m)
	}
	return jen.Lit(def)
}

func (g *generator) decodeFunc(f *jen.File, o *model.Object) {
	name := "decode" + o.TypeName
	f.Commentf("%s fills c from the table m (nil when absent): defaults first, then every", name)
	f.Comment("key without a problem, then the rules between keys.")
	if o.Element {
		f.Comment("at is the table's key path in problems, such as columns[2].")
	}
	params := []jen.Code{
		jen.Id("c").Op("*").Id(o.TypeName),
		jen.Id("m").Map(jen.String()).Any(),
		jen.Id("ps").Op("*").Add(kit("Problems")),
	}
	root := o == g.s.Root
	if !root {
		params = append(params, jen.Id("warnings").Op("*").Index().String())
	}
	if o.Element {
		params = append(params, jen.Id("at").String())
	}
	f.Func().Id(name).Params(params...).BlockFunc(func(gr *jen.Group) {
		if hasDefaults(o) {
			gr.Op("*").Id("c").Op("=").Id(defaultName(o)).Call()
		}
		if root && usesWarnings(o) {
			gr.Id("warnings").Op(":=").Op("&").Id("c").Dot("warnings")
		}
		if hasScalars(o) {
			d := []jen.Code{jen.Id("Table").Op(":").Id("m"), jen.Id("Problems").Op(":").Id("ps")}
			if o.Element {
				d = append(d, jen.Id("At").Op(":").Id("at").Op("+").Lit("."))
			} else if !root {
				d = append(d, jen.Id("At").Op(":").Lit(o.Key()+"."))
			}
			gr.Id("d").Op(":=").Add(kit("Decoder")).Values(d...)
		}
		for _, pr := range o.Props {
			g.decodeProp(gr, pr)
		}
		for _, pr := range o.Props {
			g.rules(gr, pr, o)
		}
	})
	f.Line()
}

// usesWarnings reports whether the decode function of o adds warnings or
// hands them on: o has a deprecated key, a table or an array of tables.
func usesWarnings(o *model.Object) bool {
	for _, pr := range o.Props {
		if pr.Deprecated || pr.Kind == model.Nested || pr.Kind == model.ObjectList {
			return true
		}
	}
	return false
}

// decodeKinds is the confgen.Kind of each kind of key that takes no
// argument from the schema.
var decodeKinds = map[model.Kind]string{
	model.String: "String", model.Secret: "Secret", model.Int: "Int", model.Number: "Float", model.Bool: "Bool",
	model.StringList: "Strings", model.IntList: "Ints", model.NumberList: "Floats", model.Size: "Size", model.Duration: "Duration",
}

// hasScalars reports whether o has a key that is not a table or an array
// of tables, which its decode function reads with a confgen.Decoder.
func hasScalars(o *model.Object) bool {
	for _, pr := range o.Props {
		if pr.Kind != model.Nested && pr.Kind != model.ObjectList {
			return true
		}
	}
	return false
}

func (g *generator) decodeProp(gr *jen.Group, pr *model.Property) {
	field := jen.Id("c").Dot(pr.GoName)
	if pr.Kind == model.Nested {
		args := []jen.Code{jen.Op("&").Add(field), kit("Table").Call(jen.Id("m"), jen.Lit(pr.Key)), jen.Id("ps"), jen.Id("warnings")}
		if pr.Object.Element {
			args = append(args, key(pr))
		}
		gr.Id("decode" + pr.Object.TypeName).Call(args...)
		return
	}
	if pr.Kind == model.ObjectList {
		at := jen.Lit(pr.DotPath() + "[")
		if pr.InElement() {
			at = jen.Id("at").Op("+").Lit("." + pr.Key + "[")
		}
		elemAt := func(i jen.Code) *jen.Statement {
			return at.Clone().Op("+").Qual("strconv", "Itoa").Call(i).Op("+").Lit("]")
		}
		loop := []jen.Code{
			jen.List(jen.Id("t"), jen.Id("_")).Op(":=").Id("e").Assert(jen.Map(jen.String()).Any()),
			jen.Id("decode"+pr.Items.TypeName).Call(jen.Op("&").Add(field.Clone()).Index(jen.Id("i")), jen.Id("t"), jen.Id("ps"), jen.Id("warnings"), elemAt(jen.Id("i"))),
		}
		list := []jen.Code{field.Clone().Op("=").Make(goType(pr), jen.Len(jen.Id("l")))}
		if u := pr.Unique; u != nil {
			// x-unique: the first element with a value keeps it; later
			// ones are problems naming it.
			var val jen.Code = field.Clone().Index(jen.Id("i")).Dot(u.GoName)
			if u.Kind == model.Enum {
				val = jen.String().Call(val)
			}
			typ := jen.String()
			if u.Kind == model.Int {
				typ = jen.Int()
			}
			list = append(list, jen.Id("seen").Op(":=").Map(typ).Int().Values())
			ukey := elemAt(jen.Id("i")).Op("+").Lit("." + u.Key)
			j := "j" // the element that has the value first, for the default message
			if _, custom := pr.Messages["x-unique"]; custom {
				j = "_"
			}
			loop = append(loop, jen.If(kit("Has").Call(jen.Id("t"), jen.Lit(u.Key)).Op("&&").Op("!").Id("ps").Dot("Has").Call(ukey.Clone())).Block(
				jen.If(jen.List(jen.Id(j), jen.Id("dup")).Op(":=").Id("seen").Index(val), jen.Id("dup")).Block(
					appendProblem(kit("NewProblem").Call(ukey.Clone(), jen.Id("t").Index(jen.Lit(u.Key)), jen.False(), jen.Lit("x-unique"),
						or2(pr, "x-unique", jen.Lit("{value} is already used by ").Op("+").Add(elemAt(jen.Id("j"))).Op("+").Lit("."+u.Key)))),
				).Else().Block(jen.Id("seen").Index(val).Op("=").Id("i")),
			))
		}
		list = append(list, jen.For(jen.List(jen.Id("i"), jen.Id("e")).Op(":=").Range().Id("l")).Block(loop...))
		gr.If(jen.List(jen.Id("v"), jen.Id("ok")).Op(":=").Id("m").Index(jen.Lit(pr.Key)), jen.Id("ok").Op("&&").Add(notBad(pr))).Block(
			jen.If(jen.List(jen.Id("l"), jen.Id("ok")).Op(":=").Id("v").Assert(jen.Index().Any()), jen.Id("ok")).Block(list...).
				Else().Block(appendProblem(kit("WrongType").Call(key(pr), jen.Id("v"), jen.Lit(masked(pr)), jen.Lit("an array of tables")))),
		)
		return
	}
	var kind jen.Code = jen.Qual(confgenPath, decodeKinds[pr.Kind])
	switch {
	case pr.Kind == model.String && pr.Trim != "":
		kind = jen.Qual(confgenPath, "Trimmed").Call(jen.Lit(pr.Trim))
	case pr.Kind == model.Enum:
		kind = jen.Qual(confgenPath, "Enum").Index(jen.Id(pr.EnumType))
	case pr.Kind == model.Map:
		kind = jen.Qual(confgenPath, "Map").Call(elemConv(pr.MapElem))
	case pr.Kind == model.Template:
		var allowed jen.Code = jen.Nil()
		if pr.Placeholders != nil {
			allowed = jen.Id("placeholders" + varSuffix(pr))
		}
		kind = jen.Qual(confgenPath, "Template").Call(allowed)
	}
	rule := "format"
	if pr.Kind == model.Template {
		rule = "x-placeholders"
	}
	if m, ok := pr.Messages[rule]; ok && (pr.Kind == model.Size || pr.Kind == model.Duration || pr.Kind == model.Template) {
		kind = jen.Qual(confgenPath, "Reworded").Call(kind, jen.Lit(rule), jen.Lit(m))
	}
	if pr.Optional && (pr.Kind == model.Int || pr.Kind == model.Bool) {
		kind = jen.Qual(confgenPath, "Optional").Call(kind)
	}
	decode := kit("Decode").Call(jen.Id("d"), jen.Lit(pr.Key), kind, jen.Op("&").Add(field))
	if len(pr.Bounds) == 0 {
		gr.Add(decode)
		return
	}
	gr.If(decode).BlockFunc(func(b *jen.Group) {
		for _, bd := range pr.Bounds {
			b.Add(g.bound(pr, bd))
		}
	})
}
