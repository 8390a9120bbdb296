package plan

import (
	"bytes"
	"encoding/json"
	"errors"
)

// A graph also travels alone: the linker stores it in the package (the
// host program's model section) so that ipu-check can evaluate the model
// on the host. Its encoding is the one Marshal gives the "graph" field of
// a plan, compact: field order as in Graph, constants in base64, HTML
// characters not escaped, no trailing newline.

// MarshalGraph encodes g canonically, compact.
func MarshalGraph(g Graph) ([]byte, error) {
	var consts [][]byte
	g.Values, consts = stubValues(g.Values)
	doc, err := encodeCompact(g)
	if err != nil {
		return nil, err
	}
	return fill(bytes.TrimSuffix(doc, []byte("\n")), constFillings(consts, `"const":"`))
}

// ReadGraph decodes and validates a graph encoded by MarshalGraph (or
// the "graph" field of a plan file, indented or not): unknown fields are
// refused and every index is checked, as Read checks a plan's graph. Its
// errors are *Error values whose path starts at "graph".
func ReadGraph(data []byte) (*Graph, error) {
	if g, ok := decodeFast(data, func(g *Graph) []Value { return g.Values }); ok {
		if err := g.Validate(); err != nil {
			return nil, err
		}
		return g, nil
	}
	// A syntax check first, so that truncated data is reported with its
	// offset rather than as the decoder's bare "unexpected EOF".
	var raw json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, errAt("", "bad JSON at byte %d: %v", se.Offset, se)
		}
		return nil, errAt("", "%v", err)
	}
	var g Graph
	if err := decodeStrict(data, &g); err != nil {
		var pe *Error
		if errors.As(err, &pe) && pe.Path != "" {
			pe.Path = "graph." + pe.Path
		}
		return nil, err
	}
	if err := g.Validate(); err != nil {
		return nil, err
	}
	return &g, nil
}

// Validate checks every index and size of g, with errors naming the
// JSON path from "graph".
func (g *Graph) Validate() error {
	return g.validate("graph")
}
