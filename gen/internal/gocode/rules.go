package gocode

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
)

// or2 uses the schema's message for rule when there is one, else def.
func or2(pr *model.Property, rule string, def jen.Code) jen.Code {
	if m, ok := pr.Messages[rule]; ok {
		return jen.Lit(m)
	}
	return def
}

func (g *generator) bound(pr *model.Property, b model.Bound) jen.Code {
	var op, words string
	switch b.Rule {
	case "x-minimum":
		op, words = "<", "must be at least "
	case "x-exclusive-minimum":
		op, words = "<=", "must be above "
	case "x-maximum":
		op, words = ">", "must be at most "
	case "x-exclusive-maximum":
		op, words = ">=", "must be below "
	}
	var lit jen.Code
	if pr.Kind == model.Size {
		lit = sizeLit(b.Value)
	} else {
		lit = durationLit(time.Duration(b.Value))
	}
	return jen.Id("d").Dot("Bound").Call(jen.Lit(pr.Key), jen.Id("c").Dot(pr.GoName).Op(op).Add(lit), jen.Lit(b.Rule),
		msg(pr, b.Rule, words+b.Raw+", got {value}"))
}

func condExpr(c model.Cond) *jen.Statement {
	if c.Present != nil {
		has := kit("Has").Call(jen.Id("m"), jen.Lit(c.Key))
		if *c.Present {
			return has
		}
		return jen.Op("!").Add(has)
	}
	field := jen.Id("c").Dot(c.Prop.GoName)
	if c.Prop.Optional {
		return jen.Parens(field.Clone().Op("!=").Nil().Op("&&").Op("*").Add(field).Op("==").Add(condLit(c)))
	}
	return field.Op("==").Add(condLit(c))
}

// condLit is the value an equals condition compares with: an enum's
// constant, or a literal.
func condLit(c model.Cond) jen.Code {
	sib := c.Prop
	switch v := c.Equals.(type) {
	case string:
		if sib.Kind == model.Enum {
			for _, e := range sib.Enum {
				if e.Value == v {
					return jen.Id(e.Const)
				}
			}
		}
		return jen.Lit(v)
	case bool:
		return jen.Lit(v)
	case json.Number:
		if sib.Kind == model.Int {
			n, _ := v.Int64()
			return jen.Lit(int(n))
		}
		x, _ := v.Float64()
		return jen.Lit(x)
	}
	return jen.Nil()
}

// notCondExpr is the negation of condExpr, written as a person would:
// !Has for present, Has for absent, != for equals, !( ... ) around an
// optional's nil check.
func notCondExpr(c model.Cond) *jen.Statement {
	if c.Present != nil {
		has := kit("Has").Call(jen.Id("m"), jen.Lit(c.Key))
		if *c.Present {
			return jen.Op("!").Add(has)
		}
		return has
	}
	if c.Prop.Optional {
		return jen.Op("!").Add(condExpr(c))
	}
	return jen.Id("c").Dot(c.Prop.GoName).Op("!=").Add(condLit(c))
}

func (g *generator) rules(gr *jen.Group, pr *model.Property, o *model.Object) {
	var table jen.Code = jen.Lit(o.Key())
	if o.Element {
		table = jen.Id("at")
	}
	// Emitted last to first, so that the first entry that holds wins.
	for i := len(pr.DefaultIf) - 1; i >= 0; i-- {
		d := pr.DefaultIf[i]
		gr.If(jen.Op("!").Add(kit("Has")).Call(jen.Id("m"), jen.Lit(pr.Key)).Op("&&").Add(condExpr(d.When))).Block(
			jen.Id("c").Dot(pr.GoName).Op("=").Add(valueLit(pr, d.Value)),
		)
	}
	if pr.RequiredIf != nil {
		def := "is required when " + CondWords(*pr.RequiredIf)
		gr.If(condExpr(*pr.RequiredIf).Op("&&").Op("!").Add(kit("Has")).Call(jen.Id("m"), jen.Lit(pr.Key)).Op("&&").Add(notBad(pr))).Block(
			appendProblem(kit("NewProblem").Call(key(pr), jen.Nil(), jen.False(), jen.Lit("x-required-if"), msg(pr, "x-required-if", def))),
		)
	}
	if pr.BothOrNeither != "" {
		// Emit a pair once: from the key that comes first in the table, or
		// from this key when the other one does not name it back.
		other := findProp(o, pr.BothOrNeither)
		first := other == nil || other.BothOrNeither != pr.Key || indexOf(o, pr) < indexOf(o, other)
		if first {
			m := pr.Messages["x-both-or-neither"]
			if m == "" && other != nil {
				m = other.Messages["x-both-or-neither"]
			}
			gr.If(jen.Id("p").Op(":=").Add(kit("BothOrNeither")).Call(jen.Id("m"), table, jen.Lit(pr.Key), jen.Lit(pr.BothOrNeither), jen.Lit(m)), jen.Id("p").Op("!=").Nil()).Block(
				appendProblem(jen.Op("*").Id("p")),
			)
		}
	}
	if pr.PatternUnless != nil {
		var val jen.Code = jen.Id("c").Dot(pr.GoName)
		switch pr.Kind {
		case model.Enum:
			val = jen.String().Call(val)
		case model.Secret:
			val = jen.Id("c").Dot(pr.GoName).Dot("Reveal").Call()
		}
		gr.If(notCondExpr(pr.PatternUnless.Unless).Op("&&").Add(kit("Has")).Call(jen.Id("m"), jen.Lit(pr.Key)).Op("&&").Add(notBad(pr)).Op("&&").Op("!").Id("pattern" + varSuffix(pr)).Dot("MatchString").Call(val)).Block(
			appendProblem(kit("NewProblem").Call(key(pr), jen.Id("m").Index(jen.Lit(pr.Key)), jen.Lit(pr.Secret), jen.Lit("x-pattern-unless"),
				msg(pr, "x-pattern-unless", fmt.Sprintf("{value} does not match %s (required unless %s)", pr.PatternUnless.Pattern, CondWords(pr.PatternUnless.Unless))))),
		)
	}
	if pr.Deprecated {
		w := " is deprecated"
		if pr.DeprecatedMsg != "" {
			w += ": " + pr.DeprecatedMsg
		}
		var text jen.Code = jen.Lit(pr.DotPath() + w)
		if pr.InElement() {
			text = key(pr).Op("+").Lit(w)
		}
		gr.If(kit("Has").Call(jen.Id("m"), jen.Lit(pr.Key))).Block(
			jen.Op("*").Id("warnings").Op("=").Append(jen.Op("*").Id("warnings"), text),
		)
	}
}

func findProp(o *model.Object, k string) *model.Property {
	for _, pr := range o.Props {
		if pr.Key == k {
			return pr
		}
	}
	return nil
}

func indexOf(o *model.Object, pr *model.Property) int {
	for i, p := range o.Props {
		if p == pr {
			return i
		}
	}
	return -1
}
