package model

import (
	"encoding/json"

	"github.com/picomq/pico-connectors/runtime/confkit"
)

func compact(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func (pr *Property) hasEnum(v string) bool {
	for _, e := range pr.Enum {
		if e.Value == v {
			return true
		}
	}
	return false
}

// valueFits reports whether a JSON value can be the key's value.
func (p *parser) valueFits(pr *Property, v any) bool {
	switch pr.Kind {
	case String, Secret:
		_, ok := v.(string)
		return ok
	case Enum:
		s, ok := v.(string)
		return ok && pr.hasEnum(s)
	case Int:
		n, ok := v.(json.Number)
		if !ok {
			return false
		}
		_, err := n.Int64()
		return err == nil
	case Number:
		_, ok := v.(json.Number)
		return ok
	case Bool:
		_, ok := v.(bool)
		return ok
	case Size:
		if s, ok := v.(string); ok {
			_, err := confkit.ParseSize(s)
			return err == nil
		}
		if n, ok := v.(json.Number); ok {
			i, err := n.Int64()
			return err == nil && i >= 0
		}
		return false
	case Duration:
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, err := confkit.ParseDuration(s)
		return err == nil
	case Template:
		s, ok := v.(string)
		if !ok {
			return false
		}
		_, err := confkit.ParseTemplate(s, pr.Placeholders)
		return err == nil
	case StringList, IntList, NumberList:
		l, ok := v.([]any)
		if !ok {
			return false
		}
		for _, e := range l {
			switch pr.Kind {
			case StringList:
				if _, ok := e.(string); !ok {
					return false
				}
			case IntList:
				n, ok := e.(json.Number)
				if !ok {
					return false
				}
				if _, err := n.Int64(); err != nil {
					return false
				}
			default:
				if _, ok := e.(json.Number); !ok {
					return false
				}
			}
		}
		return true
	case Map:
		m, ok := v.(map[string]any)
		if !ok {
			return false
		}
		if pr.MapElem == AnyElem {
			return true
		}
		for _, e := range m {
			if !p.valueFits(&Property{Kind: pr.MapElem}, e) {
				return false
			}
		}
		return true
	case Nested:
		return false
	}
	return false
}
