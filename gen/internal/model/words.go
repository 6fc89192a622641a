package model

import (
	"math/big"

	"github.com/picomq/pico-connectors/gen/internal/jsonx"
)

// constraintWords describes standard constraints for the docs.
func constraintWords(n *jsonx.Node, pr *Property) []string {
	var out []string
	num := func(k, words string, unit ...string) {
		if v, ok := n.Get(k).Number(); ok {
			r, _ := new(big.Rat).SetString(string(v))
			s := string(v)
			if r != nil {
				s = r.RatString()
			}
			w := words + " " + s
			if len(unit) == 2 {
				if s == "1" {
					w += " " + unit[0]
				} else {
					w += " " + unit[1]
				}
			}
			out = append(out, w)
		}
	}
	num("minimum", "at least")
	num("exclusiveMinimum", "above")
	num("maximum", "at most")
	num("exclusiveMaximum", "below")
	num("minLength", "at least", "character", "characters")
	num("maxLength", "at most", "character", "characters")
	num("minItems", "at least", "item", "items")
	num("maxItems", "at most", "item", "items")
	num("minProperties", "at least", "entry", "entries")
	num("maxProperties", "at most", "entry", "entries")
	if s, ok := n.Get("pattern").String(); ok {
		out = append(out, "matches `"+s+"`")
	}
	for _, b := range pr.Bounds {
		switch b.Rule {
		case "x-minimum":
			out = append(out, "at least "+b.Raw)
		case "x-exclusive-minimum":
			out = append(out, "above "+b.Raw)
		case "x-maximum":
			out = append(out, "at most "+b.Raw)
		case "x-exclusive-maximum":
			out = append(out, "below "+b.Raw)
		}
	}
	return out
}
