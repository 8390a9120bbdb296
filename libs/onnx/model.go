package onnx

// The model side of the format, as far as this package reads it (field
// numbers from onnx.proto; unlisted fields are skipped):
//
//	ModelProto {
//		ir_version     1  int64
//		producer_name  2  string
//		graph          7  GraphProto
//		opset_import   8  repeated OperatorSetIdProto { domain 1 string; version 2 int64 }
//	}
//	GraphProto {
//		node        1  repeated NodeProto
//		name        2  string
//		initializer 5  repeated TensorProto
//		doc_string  10 ignored
//		input       11 repeated ValueInfoProto
//		output      12 repeated ValueInfoProto
//		value_info  13 repeated ValueInfoProto
//	}
//	NodeProto {
//		input 1, output 2  repeated string
//		name 3, op_type 4  string
//		attribute       5  repeated AttributeProto (see attr.go)
//		domain          7  string
//	}
//	ValueInfoProto { name 1 string; type 2 TypeProto }
//	TypeProto { tensor_type 1 { elem_type 1 int32; shape 2 TensorShapeProto } }
//	TensorShapeProto { dim 1 repeated { dim_value 1 int64; dim_param 2 string } }

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Supported versions of the default operator set ("" or "ai.onnx").
const (
	MinOpset = 6
	MaxOpset = 21
)

// maxGraphDepth bounds the nesting of graphs inside graph attributes, so
// that a hostile file cannot exhaust the stack.
const maxGraphDepth = 32

// Model is a decoded ModelProto.
type Model struct {
	IRVersion int64
	// Opsets maps an operator set domain to its version. The default
	// domain is stored under "" whether the file says "" or "ai.onnx".
	Opsets   map[string]int64
	Producer string
	Graph    *Graph
}

// Opset returns the imported version of domain ("" or "ai.onnx" for the
// default domain), or 0 when the model does not import it.
func (m *Model) Opset(domain string) int64 {
	if domain == "ai.onnx" {
		domain = ""
	}
	return m.Opsets[domain]
}

// OpsetDomains returns the imported domains in sorted order.
func (m *Model) OpsetDomains() []string {
	d := make([]string, 0, len(m.Opsets))
	for k := range m.Opsets {
		d = append(d, k)
	}
	sort.Strings(d)
	return d
}

// Graph is a decoded GraphProto.
type Graph struct {
	Name         string
	Nodes        []Node
	Initializers []*Tensor
	Inputs       []ValueInfo
	Outputs      []ValueInfo
	ValueInfo    []ValueInfo
}

// Node is a decoded NodeProto.
type Node struct {
	Name    string
	OpType  string
	Domain  string
	Inputs  []string // "" marks an omitted optional input
	Outputs []string
	Attrs   []Attr
}

// ValueInfo is a decoded ValueInfoProto. Only tensor types are described;
// any other type (sequence, map, optional, sparse tensor) leaves DType
// Undefined and NotTensor set.
type ValueInfo struct {
	Name      string
	DType     DataType
	NotTensor bool
	HasShape  bool  // false: rank unknown
	Shape     []Dim // valid when HasShape; empty for a scalar
}

// Dim is one dimension of a tensor shape: a number, a symbolic name, or
// neither (Value -1, Param "").
type Dim struct {
	Value int64 // -1 when not a fixed number
	Param string
}

// String returns the number, the parameter name, or "?".
func (d Dim) String() string {
	switch {
	case d.Value >= 0:
		return fmt.Sprint(d.Value)
	case d.Param != "":
		return d.Param
	}
	return "?"
}

// Fingerprint returns the hex SHA-256 of a model file's bytes: the content
// hash that artifacts record to name the model they were made from.
func Fingerprint(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// NotModelError reports a file that is not a decodable ONNX model at all:
// not a protobuf message, truncated, or without a graph.
type NotModelError struct {
	Err error
}

func (e *NotModelError) Error() string { return "not an ONNX model: " + e.Err.Error() }
func (e *NotModelError) Unwrap() error { return e.Err }

// wireError marks a FormatError that comes from malformed protobuf framing
// (as opposed to well-formed protobuf with content this package rejects).
type wireError struct{ *FormatError }

func (e wireError) Unwrap() error { return e.FormatError }

// decoder walks one message. base is the offset of msg in the file and
// path the field path of msg ("graph.node[3]"), both for errors.
type decoder struct {
	msg   []byte
	base  int
	path  string
	names map[protowire.Number]string // field names of the message type, for errors
}

// Field names of the message types, for framing errors.
var (
	modelFields = map[protowire.Number]string{1: "ir_version", 2: "producer_name", 7: "graph", 8: "opset_import"}
	opsetFields = map[protowire.Number]string{1: "domain", 2: "version"}
	graphFields = map[protowire.Number]string{1: "node", 2: "name", 5: "initializer", 10: "doc_string", 11: "input", 12: "output", 13: "value_info"}
	nodeFields  = map[protowire.Number]string{1: "input", 2: "output", 3: "name", 4: "op_type", 5: "attribute", 7: "domain"}
	attrFields  = map[protowire.Number]string{1: "name", 2: "f", 3: "i", 4: "s", 5: "t", 6: "g", 7: "floats", 8: "ints", 9: "strings", 10: "tensors", 11: "graphs", 20: "type", 21: "ref_attr_name"}
	valueFields = map[protowire.Number]string{1: "name", 2: "type"}
	typeFields  = map[protowire.Number]string{1: "tensor_type"}
	ttypeFields = map[protowire.Number]string{1: "elem_type", 2: "shape"}
	shapeFields = map[protowire.Number]string{1: "dim"}
	dimFields   = map[protowire.Number]string{1: "dim_value", 2: "dim_param"}
)

// fieldName names field num of the message for errors: its name, or its
// number for fields this package does not read.
func (d *decoder) fieldName(num protowire.Number) string {
	if name, ok := d.names[num]; ok {
		return d.sub(name)
	}
	return d.sub(fmt.Sprint(int32(num)))
}

// field is one decoded field occurrence.
type field struct {
	num   protowire.Number
	typ   protowire.Type
	off   int    // offset of the tag in the file
	voff  int    // offset of the value (bytes: of the payload) in the file
	bytes []byte // BytesType payload
	u     uint64 // varint, fixed32 or fixed64 value
}

func (d *decoder) sub(name string) string {
	if d.path == "" {
		return name
	}
	return d.path + "." + name
}

// each calls fn for every field of the message, in file order.
func (d *decoder) each(fn func(f field) error) error {
	for off := 0; off < len(d.msg); {
		num, typ, n := protowire.ConsumeTag(d.msg[off:])
		if n < 0 {
			return wireError{&FormatError{Off: d.base + off, Field: d.path, Msg: "bad field tag: " + wireMsg(n)}}
		}
		f := field{num: num, typ: typ, off: d.base + off, voff: d.base + off + n}
		off += n
		rest := d.msg[off:]
		switch typ {
		case protowire.VarintType:
			f.u, n = protowire.ConsumeVarint(rest)
		case protowire.Fixed32Type:
			var v uint32
			v, n = protowire.ConsumeFixed32(rest)
			f.u = uint64(v)
		case protowire.Fixed64Type:
			f.u, n = protowire.ConsumeFixed64(rest)
		case protowire.BytesType:
			f.bytes, n = protowire.ConsumeBytes(rest)
			if n >= 0 {
				f.voff += n - len(f.bytes)
			} else if size, m := protowire.ConsumeVarint(rest); m > 0 && size > uint64(len(rest)-m) {
				return wireError{&FormatError{Off: f.voff, Field: d.fieldName(num),
					Msg: fmt.Sprintf("length %d runs past the end of the data (%d bytes left): truncated?", size, len(rest)-m)}}
			}
		default:
			n = protowire.ConsumeFieldValue(num, typ, rest)
		}
		if n < 0 {
			return wireError{&FormatError{Off: f.voff, Field: d.fieldName(num), Msg: wireMsg(n)}}
		}
		off += n
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

func (d *decoder) wantType(f field, name string, typ protowire.Type) error {
	if f.typ != typ {
		return &FormatError{Off: f.off, Field: d.sub(name), Msg: fmt.Sprintf("unexpected wire type %d", f.typ)}
	}
	return nil
}

func (d *decoder) str(f field, name string, dst *string) error {
	if err := d.wantType(f, name, protowire.BytesType); err != nil {
		return err
	}
	*dst = string(f.bytes)
	return nil
}

func (d *decoder) int64v(f field, name string, dst *int64) error {
	if err := d.wantType(f, name, protowire.VarintType); err != nil {
		return err
	}
	*dst = int64(f.u)
	return nil
}

func (d *decoder) child(f field, name string) (*decoder, error) {
	if err := d.wantType(f, name, protowire.BytesType); err != nil {
		return nil, err
	}
	return &decoder{msg: f.bytes, base: f.voff, path: d.sub(name)}, nil
}

// ReadModel decodes a serialized ModelProto and checks that it imports a
// supported version of the default operator set. Its tensors share
// data's bytes, as in ReadTensor; those whose data lies in other files
// (Tensor.External) have none until LoadExternal.
func ReadModel(data []byte) (*Model, error) {
	m := &Model{Opsets: map[string]int64{}}
	d := &decoder{msg: data, names: modelFields}
	var (
		sawIR    bool
		graphOff = -1
		opsetN   int
	)
	err := d.each(func(f field) error {
		switch f.num {
		case 1:
			sawIR = true
			return d.int64v(f, "ir_version", &m.IRVersion)
		case 2:
			return d.str(f, "producer_name", &m.Producer)
		case 7:
			c, err := d.child(f, "graph")
			if err != nil {
				return err
			}
			if graphOff >= 0 {
				return &FormatError{Off: f.off, Field: "graph", Msg: fmt.Sprintf("second graph (first at byte 0x%x)", graphOff)}
			}
			graphOff = f.off
			m.Graph, err = readGraph(c, 0)
			return err
		case 8:
			c, err := d.child(f, fmt.Sprintf("opset_import[%d]", opsetN))
			if err != nil {
				return err
			}
			opsetN++
			return readOpset(c, f.off, m)
		}
		return nil
	})
	if err != nil {
		var we wireError
		if errors.As(err, &we) {
			return nil, &NotModelError{Err: we.FormatError}
		}
		return nil, err
	}
	switch {
	case !sawIR:
		return nil, &NotModelError{Err: errors.New("no ir_version")}
	case m.Graph == nil:
		return nil, &NotModelError{Err: errors.New("no graph")}
	}
	v, ok := m.Opsets[""]
	if !ok {
		return nil, &FormatError{Off: 0, Field: "opset_import", Msg: "no version of the default operator set (ai.onnx)"}
	}
	if v < MinOpset || v > MaxOpset {
		return nil, fmt.Errorf("unsupported opset %d of the default domain (ai.onnx): supported are %d to %d", v, MinOpset, MaxOpset)
	}
	return m, nil
}

// ReadModelFile reads and decodes an ONNX model file, and the data of
// its tensors that lie in other files beside it (LoadExternal).
func ReadModelFile(path string) (*Model, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := ReadModel(data)
	if err == nil {
		err = m.LoadExternal(filepath.Dir(path))
	}
	if err != nil {
		return nil, fmt.Errorf("model %s: %w", path, err)
	}
	return m, nil
}

func readOpset(d *decoder, off int, m *Model) error {
	d.names = opsetFields
	var (
		domain  string
		version int64
	)
	err := d.each(func(f field) error {
		switch f.num {
		case 1:
			return d.str(f, "domain", &domain)
		case 2:
			return d.int64v(f, "version", &version)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if domain == "ai.onnx" {
		domain = ""
	}
	if _, dup := m.Opsets[domain]; dup {
		name := domain
		if name == "" {
			name = "ai.onnx"
		}
		return &FormatError{Off: off, Field: d.path, Msg: fmt.Sprintf("domain %q imported twice", name)}
	}
	m.Opsets[domain] = version
	return nil
}

func readGraph(d *decoder, depth int) (*Graph, error) {
	if depth > maxGraphDepth {
		return nil, &FormatError{Off: d.base, Field: d.path, Msg: fmt.Sprintf("graphs nested deeper than %d", maxGraphDepth)}
	}
	d.names = graphFields
	g := &Graph{}
	err := d.each(func(f field) error {
		switch f.num {
		case 1:
			c, err := d.child(f, fmt.Sprintf("node[%d]", len(g.Nodes)))
			if err != nil {
				return err
			}
			n, err := readNode(c, depth)
			if err != nil {
				return err
			}
			g.Nodes = append(g.Nodes, n)
		case 2:
			return d.str(f, "name", &g.Name)
		case 5:
			c, err := d.child(f, fmt.Sprintf("initializer[%d]", len(g.Initializers)))
			if err != nil {
				return err
			}
			t, err := readTensorAt(c)
			if err != nil {
				return err
			}
			g.Initializers = append(g.Initializers, t)
		case 11, 12, 13:
			list := map[protowire.Number]*[]ValueInfo{11: &g.Inputs, 12: &g.Outputs, 13: &g.ValueInfo}[f.num]
			name := map[protowire.Number]string{11: "input", 12: "output", 13: "value_info"}[f.num]
			c, err := d.child(f, fmt.Sprintf("%s[%d]", name, len(*list)))
			if err != nil {
				return err
			}
			vi, err := readValueInfo(c)
			if err != nil {
				return err
			}
			*list = append(*list, vi)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return g, nil
}

// readTensorAt decodes a TensorProto nested in the model, moving the
// offsets and field names of its errors to the model's frame.
func readTensorAt(d *decoder) (*Tensor, error) {
	t, err := readTensor(d.msg)
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			out := &FormatError{Off: d.base + fe.Off, Field: d.path, Msg: fe.Msg}
			if fe.Field != "" {
				out.Field += "." + fe.Field
			}
			if m, ok := strings.CutPrefix(fe.Msg, "bad field tag: "); ok && wireCode(m) != 0 {
				out.Msg = "bad field tag: " + wireMsg(wireCode(m))
				return nil, wireError{out}
			}
			if code := wireCode(fe.Msg); code != 0 {
				out.Msg = wireMsg(code)
				return nil, wireError{out}
			}
			return nil, out
		}
		return nil, fmt.Errorf("%s: %w", d.path, err)
	}
	return t, nil
}

// wireCode returns the protowire error code whose message msg is, or 0
// when msg is not a protowire error (so a tensor error is about content,
// not framing).
func wireCode(msg string) int {
	for code := -1; code >= -6; code-- {
		if msg == protowire.ParseError(code).Error() {
			return code
		}
	}
	return 0
}

// wireMsg describes a protowire error code. protowire's own messages carry
// a "proto:" prefix with a non-breaking space, meant to be unmatchable.
func wireMsg(code int) string {
	switch code {
	case -1:
		return "unexpected EOF"
	case -2:
		return "invalid field number"
	case -3:
		return "varint overflows 64 bits"
	case -4:
		return "reserved wire type"
	case -5:
		return "unexpected end-group marker"
	case -6:
		return "groups nested too deeply"
	}
	return fmt.Sprintf("protobuf error %d", code)
}

func readNode(d *decoder, depth int) (Node, error) {
	d.names = nodeFields
	var n Node
	err := d.each(func(f field) error {
		switch f.num {
		case 1, 2:
			var s string
			name := "input"
			list := &n.Inputs
			if f.num == 2 {
				name, list = "output", &n.Outputs
			}
			if err := d.str(f, fmt.Sprintf("%s[%d]", name, len(*list)), &s); err != nil {
				return err
			}
			*list = append(*list, s)
		case 3:
			return d.str(f, "name", &n.Name)
		case 4:
			return d.str(f, "op_type", &n.OpType)
		case 5:
			c, err := d.child(f, fmt.Sprintf("attribute[%d]", len(n.Attrs)))
			if err != nil {
				return err
			}
			a, err := readAttr(c, depth)
			if err != nil {
				return err
			}
			for i := range n.Attrs {
				if n.Attrs[i].Name == a.Name {
					return &FormatError{Off: f.off, Field: c.path, Msg: fmt.Sprintf("attribute %q repeats attribute[%d]", a.Name, i)}
				}
			}
			n.Attrs = append(n.Attrs, a)
		case 7:
			return d.str(f, "domain", &n.Domain)
		}
		return nil
	})
	if err != nil {
		return Node{}, err
	}
	if n.OpType == "" {
		return Node{}, &FormatError{Off: d.base, Field: d.path, Msg: "node has no op_type"}
	}
	return n, nil
}

func readValueInfo(d *decoder) (ValueInfo, error) {
	d.names = valueFields
	vi := ValueInfo{NotTensor: true}
	sawType := false
	err := d.each(func(f field) error {
		switch f.num {
		case 1:
			return d.str(f, "name", &vi.Name)
		case 2:
			c, err := d.child(f, "type")
			if err != nil {
				return err
			}
			sawType = true
			return readType(c, &vi)
		}
		return nil
	})
	if err != nil {
		return ValueInfo{}, err
	}
	if !sawType {
		// A value without a type is not known to be a tensor; leave it
		// for the graph builder to reject where a type is needed.
		vi.NotTensor = false
	}
	return vi, nil
}

func readType(d *decoder, vi *ValueInfo) error {
	d.names = typeFields
	return d.each(func(f field) error {
		if f.num != 1 {
			return nil // sequence_type, map_type, ...: not a tensor
		}
		c, err := d.child(f, "tensor_type")
		if err != nil {
			return err
		}
		vi.NotTensor = false
		c.names = ttypeFields
		return c.each(func(f field) error {
			switch f.num {
			case 1:
				var v int64
				if err := c.int64v(f, "elem_type", &v); err != nil {
					return err
				}
				vi.DType = DataType(int32(v))
			case 2:
				s, err := c.child(f, "shape")
				if err != nil {
					return err
				}
				vi.HasShape = true
				vi.Shape = vi.Shape[:0]
				s.names = shapeFields
				return s.each(func(f field) error {
					if f.num != 1 {
						return nil
					}
					dd, err := s.child(f, fmt.Sprintf("dim[%d]", len(vi.Shape)))
					if err != nil {
						return err
					}
					dim, err := readDim(dd)
					if err != nil {
						return err
					}
					vi.Shape = append(vi.Shape, dim)
					return nil
				})
			}
			return nil
		})
	})
}

func readDim(d *decoder) (Dim, error) {
	d.names = dimFields
	dim := Dim{Value: -1}
	err := d.each(func(f field) error {
		switch f.num {
		case 1:
			var v int64
			if err := d.int64v(f, "dim_value", &v); err != nil {
				return err
			}
			if v < 0 {
				return &FormatError{Off: f.voff, Field: d.sub("dim_value"), Msg: fmt.Sprintf("negative dimension %d", v)}
			}
			dim.Value, dim.Param = v, ""
		case 2:
			var p string
			if err := d.str(f, "dim_param", &p); err != nil {
				return err
			}
			dim.Value, dim.Param = -1, p
		}
		return nil
	})
	return dim, err
}
