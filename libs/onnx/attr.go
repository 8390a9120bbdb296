package onnx

// Node attributes:
//
//	AttributeProto {
//		name           1  string
//		f              2  float
//		i              3  int64
//		s              4  bytes
//		t              5  TensorProto
//		g              6  GraphProto
//		floats         7  repeated float (packed or not)
//		ints           8  repeated int64 (packed or not)
//		strings        9  repeated bytes
//		tensors        10 repeated TensorProto
//		graphs         11 repeated GraphProto
//		doc_string     13 ignored
//		type           20 AttrType
//		ref_attr_name  21 string (function bodies only)
//		sparse_tensor 22, sparse_tensors 23, tp 14, type_protos 15: skipped
//	}

import (
	"encoding/binary"
	"fmt"
	"math"
	"sort"

	"google.golang.org/protobuf/encoding/protowire"
)

// AttrType is an AttributeProto.AttributeType value.
type AttrType int32

// Attribute types, numbered as in onnx.proto.
const (
	AttrUndefined     AttrType = 0
	AttrFloat         AttrType = 1
	AttrInt           AttrType = 2
	AttrString        AttrType = 3
	AttrTensor        AttrType = 4
	AttrGraph         AttrType = 5
	AttrFloats        AttrType = 6
	AttrInts          AttrType = 7
	AttrStrings       AttrType = 8
	AttrTensors       AttrType = 9
	AttrGraphs        AttrType = 10
	AttrSparseTensor  AttrType = 11
	AttrSparseTensors AttrType = 12
	AttrTypeProto     AttrType = 13
	AttrTypeProtos    AttrType = 14
)

var attrTypeNames = [...]string{
	"undefined", "float", "int", "string", "tensor", "graph", "floats", "ints",
	"strings", "tensors", "graphs", "sparse_tensor", "sparse_tensors", "type_proto", "type_protos",
}

// String returns the lower-case ONNX name of the type ("ints").
func (t AttrType) String() string {
	if t >= 0 && int(t) < len(attrTypeNames) {
		return attrTypeNames[t]
	}
	return fmt.Sprintf("attrtype(%d)", int32(t))
}

// Attr is a decoded AttributeProto. Type says which value field holds the
// attribute; when a file leaves type out (old exporters), it is inferred
// from the field present.
type Attr struct {
	Name        string
	Type        AttrType
	F           float32
	I           int64
	S           string
	T           *Tensor
	G           *Graph
	Floats      []float32
	Ints        []int64
	Strings     []string
	Tensors     []*Tensor
	Graphs      []*Graph
	RefAttrName string
}

func readAttr(d *decoder, depth int) (Attr, error) {
	d.names = attrFields
	var (
		a    Attr
		seen AttrType // type inferred from the last value field seen
	)
	err := d.each(func(f field) error {
		switch f.num {
		case 1:
			return d.str(f, "name", &a.Name)
		case 2:
			if err := d.wantType(f, "f", protowire.Fixed32Type); err != nil {
				return err
			}
			a.F, seen = math.Float32frombits(uint32(f.u)), AttrFloat
		case 3:
			if err := d.int64v(f, "i", &a.I); err != nil {
				return err
			}
			seen = AttrInt
		case 4:
			seen = AttrString
			return d.str(f, "s", &a.S)
		case 5:
			c, err := d.child(f, "t")
			if err != nil {
				return err
			}
			seen = AttrTensor
			a.T, err = readTensorAt(c)
			return err
		case 6:
			c, err := d.child(f, "g")
			if err != nil {
				return err
			}
			seen = AttrGraph
			a.G, err = readGraph(c, depth+1)
			return err
		case 7:
			seen = AttrFloats
			return d.floats(f, fmt.Sprintf("floats[%d]", len(a.Floats)), &a.Floats)
		case 8:
			seen = AttrInts
			return d.varints(f, fmt.Sprintf("ints[%d]", len(a.Ints)), &a.Ints)
		case 9:
			var s string
			if err := d.str(f, fmt.Sprintf("strings[%d]", len(a.Strings)), &s); err != nil {
				return err
			}
			seen = AttrStrings
			a.Strings = append(a.Strings, s)
		case 10:
			c, err := d.child(f, fmt.Sprintf("tensors[%d]", len(a.Tensors)))
			if err != nil {
				return err
			}
			t, err := readTensorAt(c)
			if err != nil {
				return err
			}
			seen = AttrTensors
			a.Tensors = append(a.Tensors, t)
		case 11:
			c, err := d.child(f, fmt.Sprintf("graphs[%d]", len(a.Graphs)))
			if err != nil {
				return err
			}
			g, err := readGraph(c, depth+1)
			if err != nil {
				return err
			}
			seen = AttrGraphs
			a.Graphs = append(a.Graphs, g)
		case 20:
			var v int64
			if err := d.int64v(f, "type", &v); err != nil {
				return err
			}
			a.Type = AttrType(int32(v))
		case 21:
			return d.str(f, "ref_attr_name", &a.RefAttrName)
		}
		return nil
	})
	if err != nil {
		return Attr{}, err
	}
	if a.Name == "" {
		return Attr{}, &FormatError{Off: d.base, Field: d.path, Msg: "attribute has no name"}
	}
	if a.Type == AttrUndefined {
		a.Type = seen
	}
	return a, nil
}

// floats reads one occurrence of a repeated float field, packed or not.
func (d *decoder) floats(f field, name string, dst *[]float32) error {
	switch f.typ {
	case protowire.Fixed32Type:
		*dst = append(*dst, math.Float32frombits(uint32(f.u)))
		return nil
	case protowire.BytesType:
		if len(f.bytes)%4 != 0 {
			return &FormatError{Off: f.voff, Field: d.sub(name), Msg: fmt.Sprintf("packed length %d is not a multiple of 4", len(f.bytes))}
		}
		for p := 0; p < len(f.bytes); p += 4 {
			*dst = append(*dst, math.Float32frombits(binary.LittleEndian.Uint32(f.bytes[p:])))
		}
		return nil
	}
	return d.wantType(f, name, protowire.Fixed32Type)
}

// varints reads one occurrence of a repeated int64 field, packed or not.
func (d *decoder) varints(f field, name string, dst *[]int64) error {
	switch f.typ {
	case protowire.VarintType:
		*dst = append(*dst, int64(f.u))
		return nil
	case protowire.BytesType:
		for p := 0; p < len(f.bytes); {
			v, n := protowire.ConsumeVarint(f.bytes[p:])
			if n < 0 {
				return wireError{&FormatError{Off: f.voff + p, Field: d.sub(name), Msg: wireMsg(n)}}
			}
			*dst = append(*dst, int64(v))
			p += n
		}
		return nil
	}
	return d.wantType(f, name, protowire.VarintType)
}

// Attr returns the node's attribute called name, or nil.
func (n *Node) Attr(name string) *Attr {
	for i := range n.Attrs {
		if n.Attrs[i].Name == name {
			return &n.Attrs[i]
		}
	}
	return nil
}

// typed returns the attribute called name after checking its type, or nil
// when the node does not have it.
func (n *Node) typed(name string, want AttrType) (*Attr, error) {
	a := n.Attr(name)
	if a == nil {
		return nil, nil
	}
	if a.RefAttrName != "" {
		return nil, fmt.Errorf("attribute %q refers to function attribute %q", name, a.RefAttrName)
	}
	if a.Type != want {
		return nil, fmt.Errorf("attribute %q: type %v, want %v", name, a.Type, want)
	}
	return a, nil
}

// AttrInt returns the int attribute called name, or def when absent.
func (n *Node) AttrInt(name string, def int64) (int64, error) {
	a, err := n.typed(name, AttrInt)
	if err != nil {
		return 0, err
	}
	if a == nil {
		return def, nil
	}
	return a.I, nil
}

// AttrFloat returns the float attribute called name, or def when absent.
func (n *Node) AttrFloat(name string, def float32) (float32, error) {
	a, err := n.typed(name, AttrFloat)
	if err != nil {
		return 0, err
	}
	if a == nil {
		return def, nil
	}
	return a.F, nil
}

// AttrString returns the string attribute called name, or def when
// absent.
func (n *Node) AttrString(name string, def string) (string, error) {
	a, err := n.typed(name, AttrString)
	if err != nil {
		return "", err
	}
	if a == nil {
		return def, nil
	}
	return a.S, nil
}

// AttrInts returns the ints attribute called name; ok is false when the
// node does not have it.
func (n *Node) AttrInts(name string) (v []int64, ok bool, err error) {
	a, err := n.typed(name, AttrInts)
	if a == nil {
		return nil, false, err
	}
	return a.Ints, true, nil
}

// AttrFloats returns the floats attribute called name; ok is false when
// the node does not have it.
func (n *Node) AttrFloats(name string) (v []float32, ok bool, err error) {
	a, err := n.typed(name, AttrFloats)
	if a == nil {
		return nil, false, err
	}
	return a.Floats, true, nil
}

// AttrTensor returns the tensor attribute called name, or nil when absent.
func (n *Node) AttrTensor(name string) (*Tensor, error) {
	a, err := n.typed(name, AttrTensor)
	if a == nil {
		return nil, err
	}
	return a.T, nil
}

// AttrGraph returns the graph attribute called name (an If branch, a Loop
// body), or nil when absent.
func (n *Node) AttrGraph(name string) (*Graph, error) {
	a, err := n.typed(name, AttrGraph)
	if a == nil {
		return nil, err
	}
	if a.G == nil {
		return nil, fmt.Errorf("attribute %q: no graph", name)
	}
	return a.G, nil
}

// OuterRefs returns the names the node's graph attributes read from the
// enclosing scopes (the implicit inputs of an If or a Loop): names a
// subgraph, or a graph nested in it, uses without defining them as an
// input, an initializer or a node output. Sorted, without duplicates.
func (n *Node) OuterRefs() []string {
	refs := map[string]bool{}
	for i := range n.Attrs {
		a := &n.Attrs[i]
		if a.G != nil {
			a.G.outerRefs(refs)
		}
		for _, g := range a.Graphs {
			if g != nil {
				g.outerRefs(refs)
			}
		}
	}
	out := make([]string, 0, len(refs))
	for name := range refs {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// outerRefs adds to refs the names g uses without defining them.
func (g *Graph) outerRefs(refs map[string]bool) {
	defined := map[string]bool{}
	for _, in := range g.Inputs {
		defined[in.Name] = true
	}
	for _, t := range g.Initializers {
		defined[t.Name] = true
	}
	for i := range g.Nodes {
		for _, out := range g.Nodes[i].Outputs {
			defined[out] = true
		}
	}
	use := func(name string) {
		if name != "" && !defined[name] {
			refs[name] = true
		}
	}
	for i := range g.Nodes {
		n := &g.Nodes[i]
		for _, in := range n.Inputs {
			use(in)
		}
		for _, name := range n.OuterRefs() {
			use(name)
		}
	}
	for _, out := range g.Outputs {
		use(out.Name)
	}
}
