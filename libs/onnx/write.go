package onnx

// Writing models: the toolchain generates its test models (scripts/
// genmodels) rather than keeping opaque binaries whose origin nobody can
// reproduce. The encoding follows the reading side's field list (model.go,
// attr.go, tensor.go) and is canonical: fields in field-number order,
// repeated numbers packed, graph contents in the order they were added.
// For models that need nothing else it gives the same bytes as the
// writer that produced the conformance models (onnx's proto3 encoding).

import (
	"encoding/binary"
	"math"

	"google.golang.org/protobuf/encoding/protowire"
)

// ModelBuilder assembles a model with a single graph over the default
// operator set. Add calls append in order; Marshal encodes. The builder
// checks nothing that graph.Build checks: it writes what it is given, so
// that tests can also write broken models.
type ModelBuilder struct {
	// IRVersion is the model's ir_version; NewModel sets the lowest one
	// that can carry its opset (and at least 4, so that initializers need
	// not be listed as inputs).
	IRVersion int64
	// Opset is the version of the default operator set.
	Opset int64
	// Producer is the producer_name, left out when empty.
	Producer string
	// GraphName is the graph's name; NewModel sets "main" (onnx's checker
	// wants one).
	GraphName string

	nodes     []Node
	inits     []*Tensor
	inputs    []ValueInfo
	outputs   []ValueInfo
	valueInfo []ValueInfo
}

// NewModel returns an empty model importing version opset of the default
// operator set.
func NewModel(opset int64) *ModelBuilder {
	return &ModelBuilder{IRVersion: IRVersionFor(opset), Opset: opset, GraphName: "main"}
}

// IRVersionFor returns the ir_version that onnx releases pair with an
// opset of the default domain (opset 21: IR 10), never below 4.
func IRVersionFor(opset int64) int64 {
	switch {
	case opset >= 21:
		return 10
	case opset >= 19:
		return 9
	case opset >= 15:
		return 8
	case opset >= 12:
		return 7
	case opset >= 11:
		return 6
	case opset >= 10:
		return 5
	}
	return 4
}

// shapeDims turns a static shape into dims; a negative entry is a
// dimension of unknown size.
func shapeDims(shape []int64) []Dim {
	dims := make([]Dim, len(shape))
	for i, d := range shape {
		dims[i] = Dim{Value: d}
		if d < 0 {
			dims[i].Value = -1
		}
	}
	return dims
}

func tensorInfo(name string, dtype DataType, shape []int64) ValueInfo {
	return ValueInfo{Name: name, DType: dtype, HasShape: true, Shape: shapeDims(shape)}
}

// AddInput declares a graph input of the given type and shape (empty for
// a scalar; a negative dimension is unknown).
func (b *ModelBuilder) AddInput(name string, dtype DataType, shape []int64) {
	b.inputs = append(b.inputs, tensorInfo(name, dtype, shape))
}

// AddOutput declares a graph output, as AddInput.
func (b *ModelBuilder) AddOutput(name string, dtype DataType, shape []int64) {
	b.outputs = append(b.outputs, tensorInfo(name, dtype, shape))
}

// AddValueInfo declares the type and shape of an intermediate value, as
// AddInput.
func (b *ModelBuilder) AddValueInfo(name string, dtype DataType, shape []int64) {
	b.valueInfo = append(b.valueInfo, tensorInfo(name, dtype, shape))
}

// AddInputInfo declares a graph input from a full ValueInfo: symbolic
// dimensions (Param), no shape at all (HasShape false) or a type that is
// not a tensor (NotTensor: written without a tensor_type).
func (b *ModelBuilder) AddInputInfo(vi ValueInfo) {
	b.inputs = append(b.inputs, vi)
}

// AddOutputInfo declares a graph output from a full ValueInfo.
func (b *ModelBuilder) AddOutputInfo(vi ValueInfo) {
	b.outputs = append(b.outputs, vi)
}

// AddInitializer adds a constant tensor, named by t.Name. The model keeps
// t: do not change it before Marshal.
func (b *ModelBuilder) AddInitializer(t *Tensor) {
	b.inits = append(b.inits, t)
}

// AddNode appends a node of the default domain. An empty string among
// inputs marks an omitted optional input.
func (b *ModelBuilder) AddNode(op, name string, inputs, outputs []string, attrs ...Attr) {
	b.nodes = append(b.nodes, Node{
		Name:    name,
		OpType:  op,
		Inputs:  append([]string(nil), inputs...),
		Outputs: append([]string(nil), outputs...),
		Attrs:   append([]Attr(nil), attrs...),
	})
}

// Attribute constructors. (The AttrType constants already own the names
// AttrInt, AttrFloat, ..., hence IntAttr, FloatAttr, ...)

// IntAttr returns an int attribute.
func IntAttr(name string, v int64) Attr { return Attr{Name: name, Type: AttrInt, I: v} }

// FloatAttr returns a float attribute.
func FloatAttr(name string, v float32) Attr { return Attr{Name: name, Type: AttrFloat, F: v} }

// StringAttr returns a string attribute.
func StringAttr(name, v string) Attr { return Attr{Name: name, Type: AttrString, S: v} }

// IntsAttr returns an ints attribute.
func IntsAttr(name string, v ...int64) Attr {
	return Attr{Name: name, Type: AttrInts, Ints: append([]int64{}, v...)}
}

// FloatsAttr returns a floats attribute.
func FloatsAttr(name string, v ...float32) Attr {
	return Attr{Name: name, Type: AttrFloats, Floats: append([]float32{}, v...)}
}

// TensorAttr returns a tensor attribute (Constant's value).
func TensorAttr(name string, t *Tensor) Attr { return Attr{Name: name, Type: AttrTensor, T: t} }

// GraphAttr returns a graph attribute (an If branch): g's nodes may read
// the names of the enclosing graph.
func GraphAttr(name string, g *Graph) Attr { return Attr{Name: name, Type: AttrGraph, G: g} }

// Marshal encodes the model as a ModelProto. The same builder contents
// always give the same bytes.
func (b *ModelBuilder) Marshal() []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, uint64(b.IRVersion))
	if b.Producer != "" {
		m = appendString(m, 2, b.Producer)
	}
	m = appendMessage(m, 7, b.encodeGraph())
	var opset []byte
	opset = appendString(opset, 1, "")
	opset = protowire.AppendTag(opset, 2, protowire.VarintType)
	opset = protowire.AppendVarint(opset, uint64(b.Opset))
	return appendMessage(m, 8, opset)
}

func (b *ModelBuilder) encodeGraph() []byte {
	return encodeGraph(&Graph{Name: b.GraphName, Nodes: b.nodes, Initializers: b.inits,
		Inputs: b.inputs, Outputs: b.outputs, ValueInfo: b.valueInfo})
}

// encodeGraph writes a GraphProto: nodes, name, initializers, inputs,
// outputs, value infos (field-number order).
func encodeGraph(gr *Graph) []byte {
	var g []byte
	for i := range gr.Nodes {
		g = appendMessage(g, 1, encodeNode(&gr.Nodes[i]))
	}
	if gr.Name != "" {
		g = appendString(g, 2, gr.Name)
	}
	for _, t := range gr.Initializers {
		g = appendMessage(g, 5, EncodeTensor(t))
	}
	for _, l := range []struct {
		num   protowire.Number
		infos []ValueInfo
	}{{11, gr.Inputs}, {12, gr.Outputs}, {13, gr.ValueInfo}} {
		for i := range l.infos {
			g = appendMessage(g, l.num, encodeValueInfo(&l.infos[i]))
		}
	}
	return g
}

func encodeNode(n *Node) []byte {
	var b []byte
	for _, in := range n.Inputs {
		b = appendString(b, 1, in)
	}
	for _, out := range n.Outputs {
		b = appendString(b, 2, out)
	}
	if n.Name != "" {
		b = appendString(b, 3, n.Name)
	}
	b = appendString(b, 4, n.OpType)
	for i := range n.Attrs {
		b = appendMessage(b, 5, encodeAttr(&n.Attrs[i]))
	}
	if n.Domain != "" {
		b = appendString(b, 7, n.Domain)
	}
	return b
}

// encodeAttr writes the value field that a.Type names, and only that one.
func encodeAttr(a *Attr) []byte {
	b := appendString(nil, 1, a.Name)
	switch a.Type {
	case AttrFloat:
		b = protowire.AppendTag(b, 2, protowire.Fixed32Type)
		b = protowire.AppendFixed32(b, math.Float32bits(a.F))
	case AttrInt:
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(a.I))
	case AttrString:
		b = appendString(b, 4, a.S)
	case AttrTensor:
		var t []byte
		if a.T != nil {
			t = EncodeTensor(a.T)
		}
		b = appendMessage(b, 5, t)
	case AttrFloats:
		packed := make([]byte, 0, 4*len(a.Floats))
		for _, f := range a.Floats {
			packed = binary.LittleEndian.AppendUint32(packed, math.Float32bits(f))
		}
		b = appendMessage(b, 7, packed)
	case AttrInts:
		var packed []byte
		for _, v := range a.Ints {
			packed = protowire.AppendVarint(packed, uint64(v))
		}
		b = appendMessage(b, 8, packed)
	case AttrStrings:
		for _, s := range a.Strings {
			b = appendString(b, 9, s)
		}
	case AttrGraph:
		var g []byte
		if a.G != nil {
			g = encodeGraph(a.G)
		}
		b = appendMessage(b, 6, g)
	case AttrGraphs:
		for _, g := range a.Graphs {
			b = appendMessage(b, 11, encodeGraph(g))
		}
	}
	if a.Type != AttrUndefined {
		b = protowire.AppendTag(b, 20, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(a.Type))
	}
	return b
}

func encodeValueInfo(vi *ValueInfo) []byte {
	b := appendString(nil, 1, vi.Name)
	if vi.NotTensor {
		// An empty TypeProto: a value of some type that is not a tensor.
		return appendMessage(b, 2, nil)
	}
	var tt []byte
	tt = protowire.AppendTag(tt, 1, protowire.VarintType)
	tt = protowire.AppendVarint(tt, uint64(vi.DType))
	if vi.HasShape {
		var shape []byte
		for _, d := range vi.Shape {
			var dim []byte
			switch {
			case d.Value >= 0:
				dim = protowire.AppendTag(dim, 1, protowire.VarintType)
				dim = protowire.AppendVarint(dim, uint64(d.Value))
			case d.Param != "":
				dim = appendString(dim, 2, d.Param)
			}
			shape = appendMessage(shape, 1, dim)
		}
		tt = appendMessage(tt, 2, shape)
	}
	return appendMessage(b, 2, appendMessage(nil, 1, tt))
}

func appendString(b []byte, num protowire.Number, s string) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendString(b, s)
}

func appendMessage(b []byte, num protowire.Number, msg []byte) []byte {
	b = protowire.AppendTag(b, num, protowire.BytesType)
	return protowire.AppendBytes(b, msg)
}
