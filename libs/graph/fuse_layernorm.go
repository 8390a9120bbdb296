package graph

// LayerNorm written out, as exporters decompose it:
//
//	mu  = ReduceMean(x, axes, keepdims=1)
//	d   = Sub(x, mu)
//	var = ReduceMean(Pow(d, 2), axes, keepdims=1)
//	y   = Div(d, Sqrt(Add(var, eps)))
//	[y  = Mul(y, scale)]   either operand order
//	[y  = Add(y, bias)]    either operand order
//
// becomes LayerNormalization(x, scale or ones, bias) over the axes from
// axes[0] on. The match is exact: both reductions over the same trailing
// axes with keepdims, the exponent a constant exactly 2, eps a constant
// with one element that does not widen the variance's shape, scale and
// bias of the normalized shape (or broadcasting to it), every
// intermediate read only by the pattern, every node in one node list, one
// float type throughout. Anything else is left as it is.

import (
	"fmt"
	"math"
	"slices"

	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
)

// constScalar returns the value of a constant of a float type holding
// one element.
func constScalar(v *Value) (float64, bool) {
	if v == nil || v.Const == nil || v.NumElements() != 1 || !isFloat(v.DType) {
		return 0, false
	}
	f, err := DecodeFloats(v.Const)
	if err != nil || len(f) != 1 {
		return 0, false
	}
	return f[0], true
}

// constIs reports whether v is a one-element float constant holding
// want rounded to its type (float32, or float16).
func constIs(v *Value, want float64) bool {
	f, ok := constScalar(v)
	if !ok {
		return false
	}
	if v.DType == onnx.Float16 {
		return f == numfmt.F16ToF64(numfmt.F64ToF16(want))
	}
	return f == float64(float32(want))
}

// other returns the operand of a two-input node that is not v (nil when
// v is neither, or both).
func other(n *Node, v *Value) *Value {
	switch {
	case len(n.Inputs) != 2 || n.Inputs[0] == n.Inputs[1]:
		return nil
	case n.Inputs[0] == v:
		return n.Inputs[1]
	case n.Inputs[1] == v:
		return n.Inputs[0]
	}
	return nil
}

// lnMatch is a matched LayerNorm.
type lnMatch struct {
	nodes       []*Node
	root        *Node
	x           *Value
	scale, bias *Value
	axis        int
	eps         float32
}

// FuseLayerNorm fuses LayerNorm written out into LayerNormalization.
func FuseLayerNorm(g *Graph) (*Graph, []Rewrite) {
	var rw []Rewrite
	names := valueNames(g)
	for _, l := range nodeLists(g) {
		u := usesOf(g)
		for _, n := range slices.Clone(*l) {
			m, ok := matchLayerNorm(n, u)
			if !ok {
				continue
			}
			scale := m.scale
			norm := m.x.Shape[m.axis:]
			if scale == nil {
				scale = onesValue(g, names, m.root.Name+"/scale", m.x.DType, norm)
			}
			fused := &Node{Name: m.root.Name, Op: "LayerNormalization", Inputs: []*Value{m.x, scale, m.bias},
				Outputs: []*Value{m.root.Outputs[0]}, Attrs: &LayerNorm{Axis: m.axis, Epsilon: m.eps}}
			what := fuse(l, m.nodes, m.root, fused)
			rw = append(rw, Rewrite{Node: m.root.Name, What: fmt.Sprintf("fused into LayerNormalization (axis %d, epsilon %g): %s", m.axis, m.eps, what)})
			u = usesOf(g)
		}
	}
	g.finishPass()
	return g, rw
}

// matchLayerNorm matches the pattern from its first ReduceMean.
func matchLayerNorm(m1 *Node, u *useInfo) (*lnMatch, bool) {
	l := u.list[m1]
	if l == nil {
		return nil, false // removed by an earlier fusion
	}
	inList := func(n *Node) bool { return n != nil && u.list[n] == l }
	a1, ok := m1.Attrs.(*Reduce)
	if m1.Op != "ReduceMean" || !ok || !a1.KeepDims || len(a1.Axes) == 0 {
		return nil, false
	}
	x := m1.Inputs[0]
	r := len(x.Shape)
	for i, ax := range a1.Axes {
		if ax != r-len(a1.Axes)+i {
			return nil, false // not the trailing axes
		}
	}
	if !isFloat(x.DType) {
		return nil, false
	}
	same := func(n *Node, op string) bool {
		return inList(n) && n.Op == op && n.Outputs[0].DType == x.DType
	}
	sub := u.sole(m1.Outputs[0])
	if !same(sub, "Sub") || sub.Inputs[0] != x || sub.Inputs[1] != m1.Outputs[0] || !equalShapes(sub.Outputs[0].Shape, x.Shape) {
		return nil, false
	}
	d := sub.Outputs[0]
	if u.pinned[d] || len(u.readers[d]) != 2 {
		return nil, false
	}
	var pow, div *Node
	for _, n := range u.readers[d] {
		switch {
		case n.Op == "Pow" && n.Inputs[0] == d:
			pow = n
		case n.Op == "Div" && n.Inputs[0] == d:
			div = n
		}
	}
	if !same(pow, "Pow") || !same(div, "Div") || !constIs(pow.Inputs[1], 2) || !equalShapes(pow.Outputs[0].Shape, x.Shape) {
		return nil, false
	}
	m2 := u.sole(pow.Outputs[0])
	if !same(m2, "ReduceMean") || m2.Inputs[0] != pow.Outputs[0] {
		return nil, false
	}
	if a2, ok := m2.Attrs.(*Reduce); !ok || !a2.KeepDims || !slices.Equal(a2.Axes, a1.Axes) {
		return nil, false
	}
	variance := m2.Outputs[0]
	add := u.sole(variance)
	if !same(add, "Add") {
		return nil, false
	}
	epsV := other(add, variance)
	eps, ok := constScalar(epsV)
	if !ok || !equalShapes(add.Outputs[0].Shape, variance.Shape) || math.IsNaN(eps) {
		return nil, false
	}
	sqrt := u.sole(add.Outputs[0])
	if !same(sqrt, "Sqrt") || u.sole(sqrt.Outputs[0]) != div || div.Inputs[1] != sqrt.Outputs[0] {
		return nil, false
	}
	m := &lnMatch{nodes: []*Node{m1, sub, pow, m2, add, sqrt, div}, root: div, x: x, axis: a1.Axes[0], eps: float32(eps)}
	m.affine(u, inList)
	return m, true
}

// affine extends a match over the Mul by a scale and the Add of a bias
// that follow it, when they fit.
func (m *lnMatch) affine(u *useInfo, inList func(*Node) bool) {
	norm := m.x.Shape[m.axis:]
	fits := func(n *Node, op string) *Value {
		if !inList(n) || n.Op != op || n.Outputs[0].DType != m.x.DType {
			return nil
		}
		v := other(n, m.root.Outputs[0])
		if v == nil || v.DType != m.x.DType || !Unidirectional(v.Shape, norm) {
			return nil
		}
		return v
	}
	next := u.sole(m.root.Outputs[0])
	if s := fits(next, "Mul"); s != nil {
		m.scale, m.root = s, next
		m.nodes = append(m.nodes, next)
		next = u.sole(next.Outputs[0])
	}
	if b := fits(next, "Add"); b != nil {
		m.bias, m.root = b, next
		m.nodes = append(m.nodes, next)
	}
}

// valueNames returns the names the graph's values hold.
func valueNames(g *Graph) map[string]bool {
	names := map[string]bool{}
	for _, v := range g.Values {
		names[v.Name] = true
	}
	return names
}

// onesValue adds a constant of ones to g, named after name (made
// unique).
func onesValue(g *Graph, names map[string]bool, name string, d onnx.DataType, shape []int64) *Value {
	base := name
	for i := 2; names[name]; i++ {
		name = fmt.Sprintf("%s_%d", base, i)
	}
	names[name] = true
	n := NumElements(shape)
	var t *onnx.Tensor
	if d == onnx.Float16 {
		raw := make([]byte, 2*n)
		for i := int64(0); i < n; i++ {
			raw[2*i+1] = 0x3C
		}
		t = &onnx.Tensor{Name: name, DType: d, Dims: copyShape(shape), Raw: raw}
	} else {
		f := make([]float32, n)
		for i := range f {
			f[i] = 1
		}
		t = onnx.NewFloat32(name, shape, f)
	}
	v := &Value{Name: name, DType: d, Shape: copyShape(shape), Const: t, Index: len(g.Values)}
	g.Values = append(g.Values, v)
	return v
}
