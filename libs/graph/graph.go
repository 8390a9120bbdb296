// Package graph is the compiler's intermediate form of an ONNX model: a
// topologically ordered list of operator nodes over tensors whose element
// types and shapes are all static and known.
//
// Build checks a decoded model against the operator subset the toolchain
// compiles and resolves every ONNX opset difference while doing so, so
// that later phases (planner, code generator, host reference) see one
// meaning per operator:
//
//   - attributes are parsed into one struct per operator (Gemm, Cast,
//     Softmax, ...), defaults filled in, axes made non-negative;
//   - operands ONNX passes as constant inputs (Reshape's shape, Reduce*
//     axes, Clip bounds) are folded into those structs, so Node.Inputs
//     holds only the data inputs;
//   - initializers and Constant nodes become constant values carrying
//     their data; Constant nodes do not appear in Graph.Nodes;
//   - legacy (opset < 7) broadcasting is accepted where it means what
//     numpy broadcasting means, and refused otherwise.
package graph

import (
	"container/heap"
	"fmt"
	"strings"

	"ipu.local/libs/onnx"
)

// Value is a tensor of the graph: a graph input, a constant, or a node
// output.
type Value struct {
	Name  string
	DType onnx.DataType
	Shape []int64
	// Const holds the data of initializers and Constant outputs; nil for
	// graph inputs and node outputs.
	Const *onnx.Tensor
	// Producer is the node computing the value; nil for graph inputs and
	// constants.
	Producer *Node
	// Index is the value's position in Graph.Values.
	Index int
}

// NumElements returns the value's element count.
func (v *Value) NumElements() int64 { return NumElements(v.Shape) }

// Node is one operator application.
type Node struct {
	Name string // the model's node name, or its first output's name when empty
	Op   string // ONNX op_type
	// Inputs are the data inputs in ONNX order; an omitted optional input
	// is nil. Constant operands are folded into Attrs (see the package doc).
	Inputs []*Value
	// Outputs in ONNX order, as many as the model lists (LayerNormalization
	// may list one to three); an omitted optional output is nil. Outputs[0]
	// is always present.
	Outputs []*Value
	// Attrs is the operator's parsed attributes: *Gemm, *Transpose, *Cast,
	// *Clip, *Softmax (Softmax, LogSoftmax), *LayerNorm, *Gelu, *Reduce
	// (ReduceMean, ReduceSum), *Flatten, *Reshape; nil for operators
	// without attributes.
	Attrs any
	// Index is the node's position in Graph.Nodes.
	Index int
}

// Graph is a built model.
type Graph struct {
	Name  string
	Opset int64 // version of the default operator set
	// Inputs are the values fed at run time, in model order. Inputs that
	// an initializer backs (IR version 3 models list them) are constants
	// and not listed here.
	Inputs  []*Value
	Outputs []*Value
	Nodes   []*Node  // topological order
	Values  []*Value // inputs, then constants and node outputs in order of first use
}

// Gemm is Y = Alpha * A' * B' + Beta * C, A' = transpose(A) if TransA.
// C (Inputs[2]) may be nil, and broadcasts unidirectionally to [M,N].
type Gemm struct {
	Alpha, Beta    float32
	TransA, TransB bool
}

// Transpose permutes axes: output axis i is input axis Perm[i].
type Transpose struct {
	Perm []int
}

// Cast converts to To; Saturate selects what an FP8 overflow gives
// (ONNX saturate attribute, opset 19 and later; true before).
type Cast struct {
	To       onnx.DataType
	Saturate bool
}

// Clip is Y = min(max(X, Min), Max). Absent bounds are the extremes of the
// input's type (as onnxruntime does: Inf clips to the largest finite
// value).
type Clip struct {
	Min, Max float64
}

// Softmax holds the axis of Softmax and LogSoftmax. With Coerce2D (opset
// < 13) the input is viewed as a matrix [prod(d[:Axis]), prod(d[Axis:])]
// and normalized along its rows; otherwise along the single axis Axis.
type Softmax struct {
	Axis     int
	Coerce2D bool
}

// LayerNorm normalizes over axes Axis..rank-1:
// Y = (X - mean) / sqrt(var + Epsilon) * Scale + Bias (Inputs: X, Scale,
// Bias or nil). The optional outputs Mean and InvStdDev have X's shape with
// the normalized axes set to 1, and type float.
type LayerNorm struct {
	Axis    int
	Epsilon float32
}

// Gelu is x*Phi(x) with the exact normal CDF, or its tanh approximation
// when Tanh is set.
type Gelu struct {
	Tanh bool
}

// Reduce lists the reduced axes, sorted; empty means the node is an
// identity (noop_with_empty_axes). Without an axes operand ONNX reduces
// every axis, and Axes lists them all.
type Reduce struct {
	Axes     []int
	KeepDims bool
}

// Flatten reshapes to [prod(d[:Axis]), prod(d[Axis:])].
type Flatten struct {
	Axis int
}

// Reshape holds the resolved output shape (0 and -1 already applied).
type Reshape struct {
	Shape []int64
}

// String returns a canonical multi-line dump of the graph, for tests and
// debugging.
func (g *Graph) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "graph %q opset %d\n", g.Name, g.Opset)
	for _, v := range g.Inputs {
		fmt.Fprintf(&b, "input %s\n", valueString(v))
	}
	for _, v := range g.Values {
		if v.Const != nil {
			fmt.Fprintf(&b, "const %s\n", valueString(v))
		}
	}
	for _, n := range g.Nodes {
		fmt.Fprintf(&b, "node %q %s", n.Name, n.Op)
		if n.Attrs != nil {
			fmt.Fprintf(&b, " %s", strings.TrimPrefix(fmt.Sprintf("%+v", n.Attrs), "&"))
		}
		b.WriteString(" (")
		for i, v := range n.Inputs {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("-")
			} else {
				b.WriteString(v.Name)
			}
		}
		b.WriteString(") -> ")
		for i, v := range n.Outputs {
			if i > 0 {
				b.WriteString(", ")
			}
			if v == nil {
				b.WriteString("-")
			} else {
				b.WriteString(valueString(v))
			}
		}
		b.WriteByte('\n')
	}
	for _, v := range g.Outputs {
		fmt.Fprintf(&b, "output %s\n", v.Name)
	}
	return b.String()
}

func valueString(v *Value) string {
	return fmt.Sprintf("%s %v%s", v.Name, v.DType, ShapeString(v.Shape))
}

// source says where a name of the model comes from.
type source struct {
	input *onnx.ValueInfo
	init  *onnx.Tensor
	node  int // index in the model's node list, or -1
}

// builder holds the state of one Build.
type builder struct {
	m       *onnx.Model
	opset   int64
	g       *Graph
	sources map[string]source
	values  map[string]*Value
	// consts holds the constant tensors by name: initializers and the
	// outputs of Constant nodes built so far.
	consts map[string]*onnx.Tensor
}

// Build checks m against the supported operators and types and returns
// its graph.
func Build(m *onnx.Model) (*Graph, error) {
	if m == nil || m.Graph == nil {
		return nil, fmt.Errorf("model has no graph")
	}
	b := &builder{
		m:       m,
		opset:   m.Opset(""),
		g:       &Graph{Name: m.Graph.Name, Opset: m.Opset("")},
		sources: map[string]source{},
		values:  map[string]*Value{},
		consts:  map[string]*onnx.Tensor{},
	}
	if err := b.collectSources(); err != nil {
		return nil, err
	}
	if err := b.inputs(); err != nil {
		return nil, err
	}
	order, err := b.topoOrder()
	if err != nil {
		return nil, err
	}
	for _, i := range order {
		if err := b.node(&m.Graph.Nodes[i], i); err != nil {
			return nil, err
		}
	}
	if err := b.outputs(); err != nil {
		return nil, err
	}
	if err := b.checkValueInfo(); err != nil {
		return nil, err
	}
	return b.g, nil
}

// nodeName is a node's name for messages and for Node.Name.
func nodeName(n *onnx.Node) string {
	if n.Name != "" || len(n.Outputs) == 0 {
		return n.Name
	}
	return n.Outputs[0]
}

func (b *builder) collectSources() error {
	mg := b.m.Graph
	for i := range mg.Initializers {
		t := mg.Initializers[i]
		if _, dup := b.sources[t.Name]; dup {
			return fmt.Errorf("initializer %q: name defined twice", t.Name)
		}
		b.sources[t.Name] = source{init: t, node: -1}
		b.consts[t.Name] = t
	}
	for i := range mg.Inputs {
		in := &mg.Inputs[i]
		if s, ok := b.sources[in.Name]; ok {
			if s.init != nil && s.input == nil {
				// IR version 3: initializers are listed as inputs too.
				s.input = in
				b.sources[in.Name] = s
				continue
			}
			return fmt.Errorf("input %q: name defined twice", in.Name)
		}
		b.sources[in.Name] = source{input: in, node: -1}
	}
	for i := range mg.Nodes {
		n := &mg.Nodes[i]
		for _, out := range n.Outputs {
			if out == "" {
				continue
			}
			if _, dup := b.sources[out]; dup {
				return fmt.Errorf("node %q (%s) output %q: name defined twice", nodeName(n), printable(n.OpType), out)
			}
			b.sources[out] = source{node: i}
		}
	}
	return nil
}

// runtimeTypes are the element types a graph input or computed tensor may
// have.
func runtimeType(d onnx.DataType) bool {
	switch d {
	case onnx.Float, onnx.Float16, onnx.Float8E4M3FN, onnx.Float8E4M3FNUZ, onnx.Float8E5M2, onnx.Float8E5M2FNUZ:
		return true
	}
	return false
}

func (b *builder) inputs() error {
	for i := range b.m.Graph.Inputs {
		in := &b.m.Graph.Inputs[i]
		if b.sources[in.Name].init != nil {
			continue
		}
		if in.NotTensor {
			return fmt.Errorf("input %q: not a tensor", in.Name)
		}
		if !runtimeType(in.DType) {
			return fmt.Errorf("input %q: element type %v is not supported", in.Name, in.DType)
		}
		if !in.HasShape {
			return fmt.Errorf("input %q: no shape; graph inputs need static shapes", in.Name)
		}
		shape := make([]int64, len(in.Shape))
		for k, d := range in.Shape {
			switch {
			case d.Param != "":
				return fmt.Errorf("input %q: dimension %d is symbolic (%q); graph inputs need static shapes", in.Name, k, d.Param)
			case d.Value < 0:
				return fmt.Errorf("input %q: dimension %d is unknown; graph inputs need static shapes", in.Name, k)
			}
			shape[k] = d.Value
		}
		if _, err := checkedElements(shape); err != nil {
			return fmt.Errorf("input %q: %w", in.Name, err)
		}
		v := b.newValue(in.Name, in.DType, shape)
		b.g.Inputs = append(b.g.Inputs, v)
	}
	return nil
}

func (b *builder) newValue(name string, d onnx.DataType, shape []int64) *Value {
	v := &Value{Name: name, DType: d, Shape: shape, Index: len(b.g.Values)}
	b.g.Values = append(b.g.Values, v)
	b.values[name] = v
	return v
}

// nodeHeap orders ready nodes by their index in the model, so that a
// model already in topological order keeps its order.
type nodeHeap []int

func (h nodeHeap) Len() int           { return len(h) }
func (h nodeHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h nodeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *nodeHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *nodeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// topoOrder returns the model's node indices in topological order, or an
// error naming an undefined input or a node on a cycle.
func (b *builder) topoOrder() ([]int, error) {
	nodes := b.m.Graph.Nodes
	pending := make([]int, len(nodes))
	users := make([][]int, len(nodes))
	for i := range nodes {
		n := &nodes[i]
		for k, in := range n.Inputs {
			if in == "" {
				continue
			}
			s, ok := b.sources[in]
			if !ok {
				return nil, fmt.Errorf("node %q (%s) input %d: %q is not defined by any node, input or initializer", nodeName(n), printable(n.OpType), k, in)
			}
			if s.node >= 0 {
				if s.node == i {
					return nil, fmt.Errorf("node %q (%s) input %d: %q is the node's own output", nodeName(n), printable(n.OpType), k, in)
				}
				pending[i]++
				users[s.node] = append(users[s.node], i)
			}
		}
	}
	h := &nodeHeap{}
	for i := range nodes {
		if pending[i] == 0 {
			*h = append(*h, i)
		}
	}
	heap.Init(h)
	order := make([]int, 0, len(nodes))
	for h.Len() > 0 {
		i := heap.Pop(h).(int)
		order = append(order, i)
		for _, u := range users[i] {
			pending[u]--
			if pending[u] == 0 {
				heap.Push(h, u)
			}
		}
	}
	if len(order) < len(nodes) {
		for i := range nodes {
			if pending[i] > 0 {
				return nil, fmt.Errorf("node %q (%s): on a cycle", nodeName(&nodes[i]), printable(nodes[i].OpType))
			}
		}
	}
	return order, nil
}

// constValue returns the value of a constant tensor, creating it on first
// use.
func (b *builder) constValue(name string, t *onnx.Tensor) (*Value, error) {
	if v, ok := b.values[name]; ok {
		return v, nil
	}
	if !runtimeType(t.DType) {
		return nil, fmt.Errorf("constant %q: element type %v is not supported as data", name, t.DType)
	}
	if _, err := checkedElements(t.Dims); err != nil {
		return nil, fmt.Errorf("constant %q: %w", name, err)
	}
	v := b.newValue(name, t.DType, append([]int64{}, t.Dims...))
	v.Const = t
	return v, nil
}

// lookup resolves a data input name to its value.
func (b *builder) lookup(name string) (*Value, error) {
	if v, ok := b.values[name]; ok {
		return v, nil
	}
	if t, ok := b.consts[name]; ok {
		return b.constValue(name, t)
	}
	// Nodes run in topological order, so a missing value is an input
	// whose producer failed to define it (an omitted optional output).
	return nil, fmt.Errorf("%q has no value", name)
}

func (b *builder) outputs() error {
	for _, out := range b.m.Graph.Outputs {
		v, err := b.lookup(out.Name)
		if err != nil {
			if _, ok := b.sources[out.Name]; !ok {
				return fmt.Errorf("output %q: not defined by any node, input or initializer", out.Name)
			}
			return fmt.Errorf("output %q: %w", out.Name, err)
		}
		if err := checkDeclared("output", &out, v); err != nil {
			return err
		}
		b.g.Outputs = append(b.g.Outputs, v)
	}
	if len(b.g.Outputs) == 0 {
		return fmt.Errorf("graph has no outputs")
	}
	return nil
}

func (b *builder) checkValueInfo() error {
	for _, vi := range b.m.Graph.ValueInfo {
		if v, ok := b.values[vi.Name]; ok {
			if err := checkDeclared("value_info", &vi, v); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkDeclared compares a value's inferred type and shape with what the
// model declares, where it declares them.
func checkDeclared(what string, vi *onnx.ValueInfo, v *Value) error {
	if vi.NotTensor {
		return fmt.Errorf("%s %q: declared as a non-tensor type", what, vi.Name)
	}
	if vi.DType != onnx.Undefined && vi.DType != v.DType {
		return fmt.Errorf("%s %q: element type %v, model declares %v", what, vi.Name, v.DType, vi.DType)
	}
	if !vi.HasShape {
		return nil
	}
	mismatch := len(vi.Shape) != len(v.Shape)
	for i := 0; !mismatch && i < len(vi.Shape); i++ {
		mismatch = vi.Shape[i].Value >= 0 && vi.Shape[i].Value != v.Shape[i]
	}
	if mismatch {
		dims := make([]string, len(vi.Shape))
		for i, d := range vi.Shape {
			dims[i] = d.String()
		}
		return fmt.Errorf("%s %q: shape %s, model declares [%s]", what, vi.Name, ShapeString(v.Shape), strings.Join(dims, ","))
	}
	return nil
}
