// Package codec turns a source's message payloads into values the
// transforms and routing rules can read, and back into the bytes that go on
// the wire, according to a [[topics]] block's schema.
//
//	schema      source payload            value for transforms      wire bytes
//	json        JSON text (validated)     decoded JSON (map, ...)   JSON text
//	text        UTF-8 text (validated)    string                    the text
//	raw, proto, flatbuffer  any bytes     []byte                    the bytes
//	avro        JSON text, or Avro binary decoded value (map, ...)  Avro binary
//
// For avro, a JSON payload is converted to the schema's types and encoded as
// Avro binary; any other payload must already be Avro binary that decodes
// under the schema.
package codec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/hamba/avro/v2"

	"github.com/picomq/pico-connectors/internal/jsonscan"
	"github.com/picomq/pico-connectors/sdk"
)

// Codec decodes and encodes one schema. It is safe for concurrent use.
type Codec struct {
	schema sdk.Schema
	avro   avro.Schema
	// recursive tells whether the Avro schema can contain itself: only
	// then can a payload nest deeper than the schema, and decodeAvro
	// checks its depth first.
	recursive bool
	// text is the Avro schema's JSON text, as the block gave it.
	text string
}

// Options name a block's schema and, for avro, where its Avro schema is.
type Options struct {
	// Schema is the block's schema key; empty means json.
	Schema string
	// AvroSchemaJSON is the Avro schema inline.
	AvroSchemaJSON string
	// AvroSchemaPath is a file with the Avro schema; relative paths are
	// resolved against BaseDir.
	AvroSchemaPath string
	// BaseDir resolves a relative AvroSchemaPath.
	BaseDir string
}

// Schemas lists the schema names New accepts.
var Schemas = []string{"json", "raw", "text", "proto", "flatbuffer", "avro"}

// New returns the codec of a block, or an error naming the bad key.
func New(o Options) (*Codec, error) {
	s := sdk.Schema(o.Schema)
	if s == "" {
		s = sdk.SchemaJSON
	}
	switch s {
	case sdk.SchemaJSON, sdk.SchemaRaw, sdk.SchemaText, sdk.SchemaProto, sdk.SchemaFlatBuffer:
		if o.AvroSchemaJSON != "" || o.AvroSchemaPath != "" {
			return nil, fmt.Errorf("schema %q: avro_schema_json and avro_schema_path apply only to schema = \"avro\"", s)
		}
		return &Codec{schema: s}, nil
	case sdk.SchemaAvro:
	default:
		return nil, fmt.Errorf("schema %q is not one of json, raw, text, proto, flatbuffer, avro", o.Schema)
	}
	var text string
	switch {
	case o.AvroSchemaJSON != "" && o.AvroSchemaPath != "":
		return nil, errors.New("schema \"avro\": set avro_schema_json or avro_schema_path, not both")
	case o.AvroSchemaJSON != "":
		text = o.AvroSchemaJSON
	case o.AvroSchemaPath != "":
		p := o.AvroSchemaPath
		if !filepath.IsAbs(p) && o.BaseDir != "" {
			p = filepath.Join(o.BaseDir, p)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, fmt.Errorf("avro_schema_path %q: %w", o.AvroSchemaPath, err)
		}
		text = string(b)
	default:
		return nil, errors.New("schema \"avro\" needs avro_schema_json or avro_schema_path")
	}
	as, err := avro.ParseWithCache(text, "", &avro.SchemaCache{})
	if err != nil {
		key := "avro_schema_json"
		if o.AvroSchemaPath != "" {
			key = "avro_schema_path " + fmt.Sprintf("%q", o.AvroSchemaPath)
		}
		return nil, fmt.Errorf("%s: not a valid Avro schema: %v", key, err)
	}
	return &Codec{schema: s, avro: as, recursive: recursive(as), text: text}, nil
}

// Schema returns the codec's schema.
func (c *Codec) Schema() sdk.Schema { return c.schema }

// AvroText returns the Avro schema's JSON text for avro, "" otherwise.
func (c *Codec) AvroText() string { return c.text }

// Decode turns a source payload into the value transforms and routing see.
func (c *Codec) Decode(payload []byte) (any, error) {
	switch c.schema {
	case sdk.SchemaJSON:
		return decodeJSON(payload)
	case sdk.SchemaText:
		if !utf8.Valid(payload) {
			return nil, errors.New("payload is not valid UTF-8 text")
		}
		return string(payload), nil
	case sdk.SchemaAvro:
		if looksJSON(payload) {
			v, err := decodeJSON(payload)
			if err == nil {
				return v, nil
			}
		}
		return c.decodeAvro(payload)
	default:
		return payload, nil
	}
}

// Encode turns a value (as Decode returned it, possibly transformed) into
// wire bytes.
func (c *Codec) Encode(v any) ([]byte, error) {
	switch c.schema {
	case sdk.SchemaJSON:
		return json.Marshal(v)
	case sdk.SchemaAvro:
		cv, err := Conform(c.avro, v)
		if err != nil {
			return nil, err
		}
		b, err := avro.Marshal(c.avro, cv)
		if err != nil {
			return nil, fmt.Errorf("avro: %v", err)
		}
		return b, nil
	default:
		switch t := v.(type) {
		case []byte:
			return t, nil
		case string:
			return []byte(t), nil
		case nil:
			return nil, nil
		default:
			// A transform turned bytes into a structure: write it as JSON.
			return json.Marshal(t)
		}
	}
}

// Wire checks a payload and returns its wire bytes without building a value
// when nothing needs one (no transforms, no field routing). For json, raw,
// text, proto and flatbuffer the bytes are returned unchanged.
func (c *Codec) Wire(payload []byte) ([]byte, error) {
	switch c.schema {
	case sdk.SchemaJSON:
		if !jsonscan.Valid(payload) {
			_, err := decodeJSON(payload)
			return nil, err
		}
		return payload, nil
	case sdk.SchemaText:
		if !utf8.Valid(payload) {
			return nil, errors.New("payload is not valid UTF-8 text")
		}
		return payload, nil
	case sdk.SchemaAvro:
		if looksJSON(payload) {
			if v, err := decodeJSON(payload); err == nil {
				return c.Encode(v)
			}
		}
		if _, err := c.decodeAvro(payload); err != nil {
			return nil, err
		}
		return payload, nil
	default:
		return payload, nil
	}
}

// decodeAvro decodes an Avro binary payload, refusing one that nests
// deeper than MaxAvroDepth.
func (c *Codec) decodeAvro(payload []byte) (any, error) {
	if c.recursive {
		if err := checkDepth(c.avro, payload); err != nil {
			return nil, err
		}
	}
	var v any
	if err := avro.Unmarshal(c.avro, payload, &v); err != nil {
		return nil, fmt.Errorf("payload is neither JSON nor Avro binary of the schema: %v", err)
	}
	return v, nil
}

func looksJSON(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && (b[0] == '{' || b[0] == '[')
}

func decodeJSON(b []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, fmt.Errorf("payload is not valid JSON: %v", err)
	}
	if d.More() {
		return nil, errors.New("payload is not valid JSON: data after the first value")
	}
	return v, nil
}

// ValidSinkPayload reports whether a consumed payload is valid for schema:
// JSON must parse (the same rule as encoding/json.Valid, checked without
// allocating and several times faster), text must be UTF-8; other schemas
// accept any bytes.
func ValidSinkPayload(schema sdk.Schema, payload []byte) bool {
	switch schema {
	case sdk.SchemaJSON:
		return jsonscan.Valid(payload)
	case sdk.SchemaText:
		return utf8.Valid(payload)
	}
	return true
}
