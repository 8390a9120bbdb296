package graph

// The graph's encoding in a plan (and in a package's model section):
// values by index, constants' raw bytes, nodes with their parsed
// attributes. Encode and Decode are inverses; Decode checks what it
// rebuilds as Build checks a model.

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"

	"ipu.local/formats/plan"
	"ipu.local/libs/onnx"
)

// Encode serializes g for a plan: values by index, constants' raw
// bytes, nodes with their parsed attributes. The plan's constants share
// g's bytes (the 12-layer encoder's are 162 MB): neither side may change
// them.
func Encode(g *Graph) plan.Graph {
	pg := plan.Graph{Name: g.Name, Opset: g.Opset, Inputs: []int{}, Outputs: []int{}, Downcast: slices.Clone(g.Downcast)}
	for _, v := range g.Inputs {
		pg.Inputs = append(pg.Inputs, v.Index)
	}
	for _, v := range g.Outputs {
		pg.Outputs = append(pg.Outputs, v.Index)
	}
	for _, v := range g.Values {
		pv := plan.Value{Name: v.Name, DType: v.DType.String(), Shape: append([]int64{}, v.Shape...)}
		if v.Const != nil {
			pv.Const = v.Const.Raw // shared: no pass changes a constant's bytes
			if pv.Const == nil {
				pv.Const = []byte{}
			}
		}
		pg.Values = append(pg.Values, pv)
	}
	idx := func(vs []*Value) []int {
		out := make([]int, len(vs))
		for i, v := range vs {
			out[i] = -1
			if v != nil {
				out[i] = v.Index
			}
		}
		return out
	}
	encodeNodes(&pg, g.Nodes, idx)
	return pg
}

// encodeNodes appends nodes to pg.Nodes and returns their positions. An
// If's branch nodes come just before it, then branch first, and its
// attributes list them: then_nodes and else_nodes (positions in
// pg.Nodes), then_outputs and else_outputs (value indices).
func encodeNodes(pg *plan.Graph, nodes []*Node, idx func([]*Value) []int) []int64 {
	var at []int64
	for _, n := range nodes {
		attrs := encodeAttrs(n.Attrs)
		if a, ok := n.Attrs.(*If); ok {
			thenNodes := encodeNodes(pg, a.Then.Nodes, idx)
			elseNodes := encodeNodes(pg, a.Else.Nodes, idx)
			attrs = []plan.Attr{
				{Name: "else_nodes", Ints: elseNodes}, {Name: "else_outputs", Ints: int64s(idx(a.Else.Outputs))},
				{Name: "then_nodes", Ints: thenNodes}, {Name: "then_outputs", Ints: int64s(idx(a.Then.Outputs))},
			}
		}
		at = append(at, int64(len(pg.Nodes)))
		pg.Nodes = append(pg.Nodes, plan.Node{Name: n.Name, Op: n.Op, Inputs: idx(n.Inputs), Outputs: idx(n.Outputs), Attrs: attrs, If: n.If, Side: n.Side.String()})
	}
	if at == nil {
		at = []int64{}
	}
	return at
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func int64s(v []int) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

func encodeAttrs(a any) []plan.Attr {
	i := func(name string, v ...int64) plan.Attr { return plan.Attr{Name: name, Ints: append([]int64{}, v...)} }
	f := func(name string, v ...float64) plan.Attr { return plan.Attr{Name: name, Floats: v} }
	var out []plan.Attr
	switch a := a.(type) {
	case *Gemm:
		out = []plan.Attr{f("alpha", float64(a.Alpha)), f("beta", float64(a.Beta)), i("trans_a", b2i(a.TransA)), i("trans_b", b2i(a.TransB))}
	case *Transpose:
		out = []plan.Attr{i("perm", int64s(a.Perm)...)}
	case *Cast:
		out = []plan.Attr{i("saturate", b2i(a.Saturate)), i("to", int64(a.To))}
	case *Clip:
		out = []plan.Attr{f("max", a.Max), f("min", a.Min)}
	case *Softmax:
		out = []plan.Attr{i("axis", int64(a.Axis)), i("coerce_2d", b2i(a.Coerce2D))}
	case *LayerNorm:
		out = []plan.Attr{i("axis", int64(a.Axis)), f("epsilon", float64(a.Epsilon))}
	case *Gelu:
		out = []plan.Attr{i("tanh", b2i(a.Tanh))}
	case *Reduce:
		out = []plan.Attr{i("axes", int64s(a.Axes)...), i("keepdims", b2i(a.KeepDims))}
	case *Flatten:
		out = []plan.Attr{i("axis", int64(a.Axis))}
	case *Reshape:
		out = []plan.Attr{i("shape", a.Shape...)}
	case *Gather:
		out = []plan.Attr{i("axis", int64(a.Axis))}
	case *Concat:
		out = []plan.Attr{i("axis", int64(a.Axis))}
	case *Slice:
		out = []plan.Attr{i("axes", int64s(a.Axes)...), i("ends", a.Ends...), i("starts", a.Starts...), i("steps", a.Steps...)}
	case *Split:
		out = []plan.Attr{i("axis", int64(a.Axis)), i("sizes", a.Sizes...)}
	case *Squeeze:
		out = []plan.Attr{i("axes", int64s(a.Axes)...)}
	case *Unsqueeze:
		out = []plan.Attr{i("axes", int64s(a.Axes)...)}
	case *Expand:
		out = []plan.Attr{i("shape", a.Shape...)}
	case *Tile:
		out = []plan.Attr{i("repeats", a.Repeats...)}
	case *LeakyRelu:
		out = []plan.Attr{f("alpha", float64(a.Alpha))}
	case *Elu:
		out = []plan.Attr{f("alpha", float64(a.Alpha))}
	case *Selu:
		out = []plan.Attr{f("alpha", float64(a.Alpha)), f("gamma", float64(a.Gamma))}
	case *HardSigmoid:
		out = []plan.Attr{f("alpha", float64(a.Alpha)), f("beta", float64(a.Beta))}
	}
	sort.Slice(out, func(x, y int) bool { return out[x].Name < out[y].Name })
	return out
}

// Decode is the inverse of Encode: it rebuilds the graph a plan
// (or a package's model section) carries, then checks it as Build
// checks a model (Check: element types, shapes, attributes, every
// node's inferred outputs), so that evaluators may trust it as they trust
// a built one. pg need not have been validated. The graph's constants
// share pg's bytes, as in Encode. A hostile graph gives an error naming
// the JSON path, node or value at fault ("graph.nodes[3] ("MatMul_0"):
// ..."), never a panic.
func Decode(pg *plan.Graph) (*Graph, error) {
	if pg == nil {
		return nil, errors.New("graph: missing")
	}
	if err := pg.Validate(); err != nil {
		return nil, err
	}
	g := &Graph{Name: pg.Name, Opset: pg.Opset, Downcast: slices.Clone(pg.Downcast)}
	for i, pv := range pg.Values {
		d, ok := dataType(pv.DType)
		if !ok {
			return nil, fmt.Errorf("graph.values[%d] (%q): unknown element type %q", i, pv.Name, pv.DType)
		}
		v := &Value{Name: pv.Name, DType: d, Shape: append([]int64{}, pv.Shape...), Index: i}
		if pv.Const != nil {
			v.Const = &onnx.Tensor{Name: pv.Name, DType: d, Dims: append([]int64{}, pv.Shape...), Raw: pv.Const} // shared, as in Encode
		}
		g.Values = append(g.Values, v)
	}
	value := func(i int) *Value {
		if i < 0 {
			return nil
		}
		return g.Values[i]
	}
	for _, i := range pg.Inputs {
		g.Inputs = append(g.Inputs, g.Values[i])
	}
	for _, i := range pg.Outputs {
		g.Outputs = append(g.Outputs, g.Values[i])
	}
	nodes := make([]*Node, len(pg.Nodes))
	owned := make([]bool, len(pg.Nodes)) // listed by an If as a branch node
	for i, pn := range pg.Nodes {
		n := &Node{Name: pn.Name, Op: pn.Op, Index: i, If: pn.If}
		side, ok := ParseSide(pn.Side)
		switch {
		case !ok:
			return nil, fmt.Errorf("graph.nodes[%d] (%q): unknown side %q (then, else or select)", i, pn.Name, pn.Side)
		case (side == Outer) != (pn.If == ""):
			return nil, fmt.Errorf("graph.nodes[%d] (%q): side %q and if %q: a tagged node names both", i, pn.Name, pn.Side, pn.If)
		case side == Select && (pn.Op != "Where" || len(pn.Inputs) != 3):
			return nil, fmt.Errorf("graph.nodes[%d] (%q): a select is a Where of 3 inputs, not %s of %d", i, pn.Name, pn.Op, len(pn.Inputs))
		}
		n.Side = side
		for _, k := range pn.Inputs {
			n.Inputs = append(n.Inputs, value(k))
		}
		for _, k := range pn.Outputs {
			v := value(k)
			if v != nil {
				v.Producer = n
			}
			n.Outputs = append(n.Outputs, v)
		}
		attrs, err := decodeAttrs(pn.Op, pn.Attrs)
		if err == nil {
			if refs, ok := attrs.(*ifRefs); ok {
				attrs, err = refs.resolve(i, nodes, owned, value, len(g.Values))
			}
		}
		if err != nil {
			return nil, fmt.Errorf("graph.nodes[%d] (%q): %w", i, pn.Name, err)
		}
		n.Attrs = attrs
		nodes[i] = n
	}
	for i, n := range nodes {
		if !owned[i] {
			n.Index = len(g.Nodes)
			g.Nodes = append(g.Nodes, n)
		}
	}
	if err := Check(g); err != nil {
		var ce *CheckError
		if errors.As(err, &ce) && (ce.Node >= 0 || ce.Value >= 0) {
			return nil, fmt.Errorf("graph.%w", err) // "graph.nodes[3] (...)"
		}
		return nil, fmt.Errorf("graph: %w", err)
	}
	return g, nil
}

// dataType maps an element type's name to its ONNX number.
func dataType(name string) (onnx.DataType, bool) {
	for d := onnx.Float; d <= onnx.Float8E5M2FNUZ; d++ {
		if d.String() == name {
			return d, true
		}
	}
	return onnx.Undefined, false
}

// attrReader takes a node's encoded attributes by name, each once, and
// says which one is wrong.
type attrReader struct {
	attrs []plan.Attr
	used  []bool
	err   error
}

func (r *attrReader) fail(name, format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("attribute %q: %s", name, fmt.Sprintf(format, args...))
	}
}

// get returns the attribute called name, or nil after recording an error.
func (r *attrReader) get(name string) *plan.Attr {
	for i := range r.attrs {
		if r.attrs[i].Name == name {
			r.used[i] = true
			return &r.attrs[i]
		}
	}
	r.fail(name, "missing")
	return nil
}

// ints returns a list of integers (possibly empty).
func (r *attrReader) ints(name string) []int64 {
	a := r.get(name)
	if a == nil {
		return nil
	}
	if len(a.Floats) > 0 {
		r.fail(name, "floats, want integers")
	}
	return a.Ints
}

// int returns one integer in [lo, hi].
func (r *attrReader) int(name string, lo, hi int64) int64 {
	v := r.ints(name)
	if r.err != nil {
		return 0
	}
	if len(v) != 1 {
		r.fail(name, "%d integers, want 1", len(v))
		return 0
	}
	if v[0] < lo || v[0] > hi {
		r.fail(name, "%d out of range [%d, %d]", v[0], lo, hi)
		return 0
	}
	return v[0]
}

func (r *attrReader) bool(name string) bool { return r.int(name, 0, 1) == 1 }

// axes returns a list of integers that fit an int (axes, a permutation).
func (r *attrReader) axes(name string) []int {
	v := r.ints(name)
	if r.err != nil || len(v) == 0 {
		return nil
	}
	out := make([]int, len(v))
	for i, x := range v {
		if x < 0 || x > MaxElements {
			r.fail(name, "entry %d is %d", i, x)
			return nil
		}
		out[i] = int(x)
	}
	return out
}

// float returns one float.
func (r *attrReader) float(name string) float64 {
	a := r.get(name)
	if a == nil {
		return 0
	}
	if len(a.Ints) > 0 || len(a.Floats) != 1 {
		r.fail(name, "%d integers and %d floats, want one float", len(a.Ints), len(a.Floats))
		return 0
	}
	return a.Floats[0]
}

// float32 returns one float that a float32 holds exactly.
func (r *attrReader) float32(name string) float32 {
	f := r.float(name)
	if r.err == nil && float64(float32(f)) != f && !math.IsNaN(f) {
		r.fail(name, "%v is not a float32 value", f)
	}
	return float32(f)
}

// done reports the first error, or an attribute nobody asked for.
func (r *attrReader) done() error {
	if r.err != nil {
		return r.err
	}
	for i, used := range r.used {
		if !used {
			return fmt.Errorf("attribute %q: not an attribute of the operator", r.attrs[i].Name)
		}
	}
	return nil
}

// decodeAttrs is the inverse of encodeAttrs: the parsed attributes struct
// of an operator, nil for operators without attributes.
func decodeAttrs(op string, attrs []plan.Attr) (any, error) {
	r := &attrReader{attrs: attrs, used: make([]bool, len(attrs))}
	var a any
	switch op {
	case "Gemm":
		a = &Gemm{Alpha: r.float32("alpha"), Beta: r.float32("beta"), TransA: r.bool("trans_a"), TransB: r.bool("trans_b")}
	case "Transpose":
		perm := r.axes("perm")
		if perm == nil {
			perm = []int{}
		}
		a = &Transpose{Perm: perm}
	case "Cast":
		a = &Cast{Saturate: r.bool("saturate"), To: onnx.DataType(r.int("to", math.MinInt32, math.MaxInt32))}
	case "Clip":
		a = &Clip{Max: r.float("max"), Min: r.float("min")}
	case "Softmax", "LogSoftmax":
		a = &Softmax{Axis: int(r.int("axis", 0, plan.MaxRank)), Coerce2D: r.bool("coerce_2d")}
	case "LayerNormalization":
		a = &LayerNorm{Axis: int(r.int("axis", 0, plan.MaxRank)), Epsilon: r.float32("epsilon")}
	case "Gelu":
		a = &Gelu{Tanh: r.bool("tanh")}
	case "ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin":
		a = &Reduce{Axes: r.axes("axes"), KeepDims: r.bool("keepdims")}
	case "Flatten":
		a = &Flatten{Axis: int(r.int("axis", 0, plan.MaxRank))}
	case "Reshape":
		shape := r.ints("shape")
		a = &Reshape{Shape: append([]int64{}, shape...)}
	case "Gather":
		a = &Gather{Axis: int(r.int("axis", 0, plan.MaxRank))}
	case "Concat":
		a = &Concat{Axis: int(r.int("axis", 0, plan.MaxRank))}
	case "Slice":
		a = &Slice{Axes: nonNil(r.axes("axes")), Ends: r.list("ends"), Starts: r.list("starts"), Steps: r.list("steps")}
	case "Split":
		a = &Split{Axis: int(r.int("axis", 0, plan.MaxRank)), Sizes: r.list("sizes")}
	case "Squeeze":
		a = &Squeeze{Axes: nonNil(r.axes("axes"))}
	case "Unsqueeze":
		a = &Unsqueeze{Axes: nonNil(r.axes("axes"))}
	case "Expand":
		a = &Expand{Shape: r.list("shape")}
	case "Tile":
		a = &Tile{Repeats: r.list("repeats")}
	case "LeakyRelu":
		a = &LeakyRelu{Alpha: r.float32("alpha")}
	case "Elu":
		a = &Elu{Alpha: r.float32("alpha")}
	case "Selu":
		a = &Selu{Alpha: r.float32("alpha"), Gamma: r.float32("gamma")}
	case "HardSigmoid":
		a = &HardSigmoid{Alpha: r.float32("alpha"), Beta: r.float32("beta")}
	case "If":
		a = &ifRefs{thenNodes: r.ints("then_nodes"), thenOutputs: r.ints("then_outputs"),
			elseNodes: r.ints("else_nodes"), elseOutputs: r.ints("else_outputs")}
	}
	if err := r.done(); err != nil {
		return nil, err
	}
	return a, nil
}

// list returns a list of integers, never nil.
func (r *attrReader) list(name string) []int64 { return append([]int64{}, r.ints(name)...) }

func nonNil(v []int) []int {
	if v == nil {
		return []int{}
	}
	return v
}

// ifRefs is an If's encoded attributes: its branches' nodes (positions
// in the plan's node list) and outputs (value indices).
type ifRefs struct {
	thenNodes, thenOutputs, elseNodes, elseOutputs []int64
}

// resolve builds the If's branches from the nodes before it (at), each
// of which may belong to one branch only.
func (r *ifRefs) resolve(at int, nodes []*Node, owned []bool, value func(int) *Value, nv int) (*If, error) {
	branch := func(name string, idx, outs []int64) (*Branch, error) {
		br := &Branch{Nodes: []*Node{}, Outputs: []*Value{}}
		for _, k := range idx {
			if k < 0 || k >= int64(at) {
				return nil, fmt.Errorf("attribute %q: node %d is not before the If", name+"_nodes", k)
			}
			if owned[k] {
				return nil, fmt.Errorf("attribute %q: node %d belongs to another branch", name+"_nodes", k)
			}
			owned[k] = true
			n := nodes[k]
			n.Index = len(br.Nodes)
			br.Nodes = append(br.Nodes, n)
		}
		for _, k := range outs {
			if k < 0 || k >= int64(nv) {
				return nil, fmt.Errorf("attribute %q: value %d out of range [0, %d)", name+"_outputs", k, nv)
			}
			br.Outputs = append(br.Outputs, value(int(k)))
		}
		return br, nil
	}
	th, err := branch("then", r.thenNodes, r.thenOutputs)
	if err != nil {
		return nil, err
	}
	el, err := branch("else", r.elseNodes, r.elseOutputs)
	if err != nil {
		return nil, err
	}
	return &If{Then: th, Else: el}, nil
}
