package gocode

import (
	"maps"
	"slices"
	"strings"

	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

func (g *generator) tables(f *jen.File) {
	// Environment bindings.
	envLit := jen.Index().Add(kit("EnvBinding")).ValuesFunc(func(gr *jen.Group) {
		g.s.Root.Walk(func(pr *model.Property) {
			if pr.Kind == model.Nested || pr.InElement() {
				return
			}
			items := []jen.Code{jen.Id("Kind").Op(":").Add(kit(envKind(pr))), jen.Id("Path").Op(":").Add(pathLit(pr.Path)), jen.Id("Suffix").Op(":").Lit(envSuffix(pr.Path))}
			if masked(pr) {
				items = append(items, jen.Id("Secret").Op(":").True())
			}
			gr.Line().Values(items...)
		})
		gr.Line()
	})
	// Key aliases.
	type alias struct{ table, alias, key string }
	var keyAliases []alias
	var enumAliases []*model.Property
	var order []string
	g.s.Root.Walk(func(pr *model.Property) {
		order = append(order, pr.DotPath())
		for _, a := range pr.Aliases {
			keyAliases = append(keyAliases, alias{strings.Join(pr.Path[:len(pr.Path)-1], "."), a, pr.Key})
		}
		if len(pr.EnumAliases) > 0 {
			enumAliases = append(enumAliases, pr)
		}
	})
	keyAliasLit := jen.Map(jen.String()).Map(jen.String()).String().ValuesFunc(func(gr *jen.Group) {
		byTable := map[string][]alias{}
		var tables []string
		for _, a := range keyAliases {
			if _, ok := byTable[a.table]; !ok {
				tables = append(tables, a.table)
			}
			byTable[a.table] = append(byTable[a.table], a)
		}
		for _, t := range tables {
			gr.Line().Lit(t).Op(":").ValuesFunc(func(g2 *jen.Group) {
				for _, a := range byTable[t] {
					g2.Lit(a.alias).Op(":").Lit(a.key)
				}
			})
		}
		if len(tables) > 0 {
			gr.Line()
		}
	})
	enumAliasLit := jen.Map(jen.String()).Map(jen.String()).String().ValuesFunc(func(gr *jen.Group) {
		for _, pr := range enumAliases {
			gr.Line().Lit(pr.DotPath()).Op(":").ValuesFunc(func(g2 *jen.Group) {
				for _, a := range pr.EnumAliases {
					g2.Lit(a[0]).Op(":").Lit(a[1])
				}
			})
		}
		if len(enumAliases) > 0 {
			gr.Line()
		}
	})
	orderLit := jen.Index().String().ValuesFunc(func(gr *jen.Group) {
		for _, k := range order {
			gr.Lit(k)
		}
	})
	// Schema spec.
	var keyInfos []jen.Code
	g.s.Root.Walk(func(pr *model.Property) {
		if !masked(pr) && len(pr.Messages) == 0 {
			return
		}
		d := jen.Dict{}
		if masked(pr) {
			d[jen.Id("Secret")] = jen.True()
		}
		if len(pr.Messages) > 0 {
			d[jen.Id("Messages")] = messagesLit(pr.Messages)
		}
		keyInfos = append(keyInfos, jen.Line().Lit(pr.DotPath()).Op(":").Values(d))
	})
	objects := g.s.Root.Objects()
	known := jen.Map(jen.String()).Index().String().ValuesFunc(func(gr *jen.Group) {
		for _, o := range objects {
			var keys []jen.Code
			for _, pr := range o.Props {
				keys = append(keys, jen.Lit(pr.Key))
				for _, a := range pr.Aliases {
					keys = append(keys, jen.Lit(a))
				}
			}
			entry := jen.Lit(o.Key()).Op(":").Values(keys...)
			if len(objects) > 1 {
				entry = jen.Line().Add(entry)
			}
			gr.Add(entry)
		}
		if len(objects) > 1 {
			gr.Line()
		}
	})
	checkerLit := kit("NewChecker").Call(jen.Id("Name"), jen.Id("Schema"), jen.Op("&").Add(kit("SchemaSpec")).ValuesFunc(func(gr *jen.Group) {
		gr.Line().Id("Known").Op(":").Add(known)
		if len(keyInfos) > 0 {
			gr.Line().Id("Keys").Op(":").Map(jen.String()).Add(kit("KeyInfo")).Values(append(keyInfos, jen.Line())...)
		}
		gr.Line()
	}))
	f.Comment("spec is what Load needs to know of the schema.")
	f.Var().Id("spec").Op("=").Add(kit("Spec")).ValuesFunc(func(gr *jen.Group) {
		gr.Line().Id("Checker").Op(":").Add(checkerLit)
		if len(keyAliases) > 0 {
			gr.Line().Id("KeyAliases").Op(":").Add(keyAliasLit)
		}
		gr.Line().Id("Env").Op(":").Add(envLit)
		if len(enumAliases) > 0 {
			gr.Line().Id("EnumAliases").Op(":").Add(enumAliasLit)
		}
		gr.Line().Id("KeyOrder").Op(":").Add(orderLit)
		gr.Line()
	})
	f.Line()
	// Placeholders and patterns.
	g.s.Root.Walk(func(pr *model.Property) {
		if pr.Kind == model.Template && pr.Placeholders != nil {
			f.Commentf("placeholders%s are the placeholders %s accepts.", varSuffix(pr), pr.DotPath())
			f.Var().Id("placeholders" + varSuffix(pr)).Op("=").Index().String().ValuesFunc(func(gr *jen.Group) {
				for _, p := range pr.Placeholders {
					gr.Lit(p)
				}
			})
			f.Line()
		}
		if pr.PatternUnless != nil {
			name := "pattern" + varSuffix(pr)
			f.Commentf("%s is the x-pattern-unless rule of %s.", name, pr.DotPath())
			f.Var().Id(name).Op("=").Qual("regexp", "MustCompile").Call(jen.Lit(pr.PatternUnless.Pattern))
			f.Line()
		}
	})
}

// masked reports whether problems must mask the key's value: a secret, or
// an array of tables with a secret in its elements (a problem on the whole
// list, or its environment variable, would show it).
func masked(pr *model.Property) bool {
	if pr.Secret {
		return true
	}
	found := false
	if pr.Items != nil {
		pr.Items.Walk(func(e *model.Property) { found = found || e.Secret })
	}
	return found
}

// varSuffix names the package variables of a key: its Go name, prefixed
// with its struct type and "_" when nested, so it is unique in the package.
func varSuffix(pr *model.Property) string {
	if pr.Parent == nil || pr.Parent.TypeName == "Config" {
		return pr.GoName
	}
	return pr.Parent.TypeName + "_" + pr.GoName
}

func messagesLit(m map[string]string) *jen.Statement {
	keys := slices.Sorted(maps.Keys(m))
	return jen.Map(jen.String()).String().ValuesFunc(func(gr *jen.Group) {
		for _, k := range keys {
			gr.Lit(k).Op(":").Lit(m[k])
		}
	})
}

func pathLit(path []string) *jen.Statement {
	var items []jen.Code
	for _, p := range path {
		items = append(items, jen.Lit(p))
	}
	return jen.Index().String().Values(items...)
}
