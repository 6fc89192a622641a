package model

import (
	"github.com/picomq/pico-connectors/gen/internal/jsonx"
)

func (p *parser) cond(n *jsonx.Node, ptr string) (Cond, bool) {
	if !n.IsObject() {
		p.fail(ptr, "a condition is {\"key\": K, \"equals\": V} or {\"key\": K, \"present\": true}")
		return Cond{}, false
	}
	k, ok := n.Get("key").String()
	if !ok || k == "" {
		p.fail(ptr+"/key", "a condition needs the key of a sibling property")
		return Cond{}, false
	}
	c := Cond{Key: k}
	if pr := n.Get("present"); pr != nil {
		b, ok := pr.Bool()
		if !ok {
			p.fail(ptr+"/present", "present must be true or false")
			return Cond{}, false
		}
		c.Present = &b
	}
	if eq := n.Get("equals"); eq != nil {
		c.Equals = eq.Interface()
		if c.Present != nil {
			p.fail(ptr, "use either equals or present, not both")
			return Cond{}, false
		}
	}
	if c.Present == nil && c.Equals == nil {
		p.fail(ptr, "a condition needs equals or present")
		return Cond{}, false
	}
	return c, true
}

// resolveConds links each condition to its sibling property and checks
// that the compared value fits.
func (p *parser) resolveConds(o *Object) {
	byKey := map[string]*Property{}
	for _, pr := range o.Props {
		byKey[pr.Key] = pr
	}
	link := func(c *Cond, ptr string) {
		sib := byKey[c.Key]
		if sib == nil {
			p.fail(ptr, "condition names %q, which is not a key of the same table", c.Key)
			return
		}
		c.Prop = sib
		if c.Equals != nil {
			switch sib.Kind {
			case String, Enum, Int, Number, Bool:
				if !p.valueFits(sib, c.Equals) {
					p.fail(ptr, "equals %s does not fit key %q", compact(c.Equals), c.Key)
				}
			default:
				p.fail(ptr, "equals compares only string, enum, integer, number and boolean keys; %q is none", c.Key)
			}
		}
	}
	for _, pr := range o.Props {
		if pr.RequiredIf != nil {
			link(pr.RequiredIf, pr.Pointer+"/x-required-if")
		}
		for i := range pr.DefaultIf {
			link(&pr.DefaultIf[i].When, pr.Pointer+"/x-default-if")
		}
		if pr.PatternUnless != nil {
			link(&pr.PatternUnless.Unless, pr.Pointer+"/x-pattern-unless/unless")
		}
		if pr.BothOrNeither != "" && byKey[pr.BothOrNeither] == nil {
			p.fail(pr.Pointer+"/x-both-or-neither", "x-both-or-neither names %q, which is not a key of the same table", pr.BothOrNeither)
		}
	}
}
