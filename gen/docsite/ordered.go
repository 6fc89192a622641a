package docsite

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// omap is a JSON object that remembers its key order.
type omap struct {
	keys []string
	vals map[string]any
}

func (m *omap) get(k string) any {
	if m == nil {
		return nil
	}
	return m.vals[k]
}

func (m *omap) obj(k string) *omap {
	o, _ := m.get(k).(*omap)
	return o
}

// decodeOrdered decodes JSON into *omap, []any, string, float64, bool or nil.
func decodeOrdered(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeValue(d)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err == nil {
		return nil, fmt.Errorf("trailing data after the JSON value")
	}
	return v, nil
}

func decodeValue(d *json.Decoder) (any, error) {
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			m := &omap{vals: map[string]any{}}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				if _, dup := m.vals[k]; !dup {
					m.keys = append(m.keys, k)
				}
				m.vals[k] = v
			}
			_, err := d.Token()
			return m, err
		case '[':
			var a []any
			for d.More() {
				v, err := decodeValue(d)
				if err != nil {
					return nil, err
				}
				a = append(a, v)
			}
			_, err := d.Token()
			return a, err
		}
	}
	return t, nil
}

// plainJSON turns an ordered value back into compact JSON text.
func plainJSON(v any) string {
	var b bytes.Buffer
	writeJSON(&b, v)
	return b.String()
}

func writeJSON(b *bytes.Buffer, v any) {
	switch x := v.(type) {
	case *omap:
		b.WriteByte('{')
		for i, k := range x.keys {
			if i > 0 {
				b.WriteByte(',')
			}
			kb, _ := json.Marshal(k)
			b.Write(kb)
			b.WriteByte(':')
			writeJSON(b, x.vals[k])
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteByte(',')
			}
			writeJSON(b, e)
		}
		b.WriteByte(']')
	default:
		eb, _ := json.Marshal(x)
		b.Write(eb)
	}
}
