package gocode

import (
	"encoding/json"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"time"

	"github.com/dave/jennifer/jen"

	"github.com/picomq/pico-connectors/gen/internal/model"
	"github.com/picomq/pico-connectors/runtime/confkit"
	"github.com/picomq/pico-connectors/sdk/confgen"
)

func defaultLit(pr *model.Property) jen.Code { return valueLit(pr, pr.Default) }

// valueLit writes a JSON value as a Go literal of the key's type. The
// model has checked that it fits.
func valueLit(pr *model.Property, v any) jen.Code {
	switch pr.Kind {
	case model.String:
		return jen.Lit(v.(string))
	case model.Secret:
		return kit("NewSecret").Call(jen.Lit(v.(string)))
	case model.Enum:
		for _, e := range pr.Enum {
			if e.Value == v.(string) {
				return jen.Id(e.Const)
			}
		}
	case model.Int:
		n, _ := v.(json.Number).Int64()
		if pr.Optional {
			return kit("Ptr").Call(jen.Lit(int(n)))
		}
		return jen.Lit(int(n))
	case model.Number:
		x, _ := v.(json.Number).Float64()
		return jen.Lit(x)
	case model.Bool:
		if pr.Optional {
			return kit("Ptr").Call(jen.Lit(v.(bool)))
		}
		return jen.Lit(v.(bool))
	case model.Size:
		s, _ := confgen.AsSize(normalizeNumber(v))
		return sizeLit(int64(s))
	case model.Duration:
		d, _ := confkit.ParseDuration(v.(string))
		return durationLit(d)
	case model.Template:
		t, _ := confkit.ParseTemplate(v.(string), pr.Placeholders)
		return templateLit(t)
	case model.StringList, model.IntList, model.NumberList:
		var items []jen.Code
		for _, e := range v.([]any) {
			switch pr.Kind {
			case model.StringList:
				items = append(items, jen.Lit(e.(string)))
			case model.IntList:
				n, _ := e.(json.Number).Int64()
				items = append(items, jen.Lit(int(n)))
			default:
				x, _ := e.(json.Number).Float64()
				items = append(items, jen.Lit(x))
			}
		}
		return goType(pr).Values(items...)
	case model.Map:
		m := v.(map[string]any)
		keys := slices.Sorted(maps.Keys(m))
		return goType(pr).ValuesFunc(func(gr *jen.Group) {
			for _, k := range keys {
				gr.Lit(k).Op(":").Add(anyLit(m[k], pr.MapElem))
			}
		})
	}
	return jen.Nil()
}

func normalizeNumber(v any) any {
	if n, ok := v.(json.Number); ok {
		i, _ := n.Int64()
		return i
	}
	return v
}

func anyLit(v any, elem model.Kind) jen.Code {
	switch x := v.(type) {
	case string:
		return jen.Lit(x)
	case bool:
		return jen.Lit(x)
	case json.Number:
		if elem == model.Number {
			f, _ := x.Float64()
			return jen.Lit(f)
		}
		if i, err := x.Int64(); err == nil {
			if elem == model.Int {
				return jen.Lit(int(i))
			}
			return jen.Lit(i)
		}
		f, _ := x.Float64()
		return jen.Lit(f)
	case nil:
		return jen.Nil()
	case []any:
		return jen.Index().Any().ValuesFunc(func(gr *jen.Group) {
			for _, e := range x {
				gr.Add(anyLit(e, model.AnyElem))
			}
		})
	case map[string]any:
		keys := slices.Sorted(maps.Keys(x))
		return jen.Map(jen.String()).Any().ValuesFunc(func(gr *jen.Group) {
			for _, k := range keys {
				gr.Lit(k).Op(":").Add(anyLit(x[k], model.AnyElem))
			}
		})
	}
	return jen.Nil()
}

var sizeRE = regexp.MustCompile(`^(\d+)([A-Za-z]+)$`)

func sizeLit(n int64) jen.Code {
	s := confkit.Size(n).String()
	m := sizeRE.FindStringSubmatch(s)
	if m == nil || m[2] == "B" {
		if n == 0 {
			return jen.Lit(0)
		}
		return kit("Size").Call(jen.Lit(int(n)))
	}
	k, _ := strconv.ParseInt(m[1], 10, 64)
	if k == 1 {
		return kit(m[2])
	}
	return jen.Lit(int(k)).Op("*").Add(kit(m[2]))
}

func durationLit(d time.Duration) jen.Code {
	if d == 0 {
		return jen.Lit(0)
	}
	units := []struct {
		name string
		d    time.Duration
	}{{"Hour", time.Hour}, {"Minute", time.Minute}, {"Second", time.Second}, {"Millisecond", time.Millisecond}, {"Microsecond", time.Microsecond}, {"Nanosecond", time.Nanosecond}}
	for _, u := range units {
		if d%u.d == 0 {
			k := int64(d / u.d)
			if k == 1 {
				return jen.Qual("time", u.name)
			}
			return jen.Lit(int(k)).Op("*").Qual("time", u.name)
		}
	}
	return jen.Qual("time", "Duration").Call(jen.Lit(int64(d)))
}

func templateLit(t confkit.Template) jen.Code {
	return kit("Template").Values(jen.Dict{
		jen.Id("Source"): jen.Lit(t.Source),
		jen.Id("Parts"): jen.Index().Add(kit("TemplatePart")).ValuesFunc(func(gr *jen.Group) {
			for _, p := range t.Parts {
				d := jen.Dict{}
				if p.Name == "" {
					d[jen.Id("Text")] = jen.Lit(p.Text)
				} else {
					d[jen.Id("Name")] = jen.Lit(p.Name)
					if p.HasArg {
						d[jen.Id("Arg")] = jen.Lit(p.Arg)
						d[jen.Id("HasArg")] = jen.True()
					}
				}
				gr.Values(d)
			}
		}),
	})
}
