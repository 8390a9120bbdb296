package graph

// GELU written out, in the orderings exporters write:
//
//	erf:  x * 0.5 * (1 + Erf(x / sqrt(2)))            (or x * (1/sqrt(2)))
//	tanh: x * 0.5 * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
//	                                       (x^3 as Pow(x, 3) or x*x*x)
//
// where each product may be grouped and ordered any way (a tree of Mul
// nodes is read as the multiset of its factors) and each sum either way
// round, becomes Gelu(x) (Tanh set for the second). The constants must
// be the float32 (or float16) roundings of 0.5, 1, sqrt(2) or 1/sqrt(2),
// sqrt(2/pi), 0.044715 and 3; every intermediate is read only by the
// pattern, has x's shape and type, and sits in x's node list.

import (
	"fmt"
	"math"
	"slices"
)

// geluMatch collects the nodes of a pattern as the matcher walks it.
type geluMatch struct {
	u     *useInfo
	list  *[]*Node
	shape []int64
	nodes []*Node
	used  map[*Node]bool // nodes fused already
}

// node returns the producer of v when it is an op node of the pattern's
// list read only through v, of x's shape, not fused already.
func (m *geluMatch) node(v *Value, op string) *Node {
	if v == nil {
		return nil
	}
	p := v.Producer
	if p == nil || p.Op != op || m.u.list[p] != m.list || m.used[p] || m.u.sole(v) == nil ||
		!equalShapes(v.Shape, m.shape) {
		return nil
	}
	m.nodes = append(m.nodes, p)
	return p
}

// factors reads the tree of Mul nodes computing v (v's own producer
// whatever its readers, inner ones read only by the tree) as the list of
// its factors; nil when it has more than limit.
func (m *geluMatch) factors(v *Value, top bool, limit int) []*Value {
	p := v.Producer
	isMul := p != nil && p.Op == "Mul" && m.u.list[p] == m.list && !m.used[p] && equalShapes(v.Shape, m.shape)
	if isMul && !top && m.u.sole(v) == nil {
		isMul = false
	}
	if !isMul {
		return []*Value{v}
	}
	m.nodes = append(m.nodes, p)
	a := m.factors(p.Inputs[0], false, limit)
	if a == nil || len(a) >= limit {
		return nil
	}
	b := m.factors(p.Inputs[1], false, limit-len(a))
	if b == nil {
		return nil
	}
	return append(a, b...)
}

// take removes from fs one factor ok accepts, and reports whether there
// was one.
func take(fs *[]*Value, ok func(v *Value) bool) bool {
	for i, v := range *fs {
		if ok(v) {
			*fs = slices.Delete(*fs, i, i+1)
			return true
		}
	}
	return false
}

// onePlus matches 1 + f(...) for the single-input op, either operand
// order, and returns the op's input.
func (m *geluMatch) onePlus(v *Value, op string) *Value {
	add := m.node(v, "Add")
	if add == nil {
		return nil
	}
	for k := 0; k < 2; k++ {
		if constIs(add.Inputs[1-k], 1) {
			if f := m.node(add.Inputs[k], op); f != nil {
				return f.Inputs[0]
			}
		}
	}
	return nil
}

// FuseGelu fuses GELU written out into Gelu.
func FuseGelu(g *Graph) (*Graph, []Rewrite) {
	var rw []Rewrite
	used := map[*Node]bool{}
	for _, l := range nodeLists(g) {
		u := usesOf(g)
		for _, root := range slices.Clone(*l) {
			if root.Op != "Mul" || used[root] || !isFloat(root.Outputs[0].DType) {
				continue
			}
			m := &geluMatch{u: u, list: l, shape: root.Outputs[0].Shape, used: used}
			x, tanh, ok := m.match(root)
			if !ok {
				continue
			}
			for _, n := range m.nodes {
				used[n] = true
			}
			fused := &Node{Name: root.Name, Op: "Gelu", Inputs: []*Value{x}, Outputs: []*Value{root.Outputs[0]}, Attrs: &Gelu{Tanh: tanh}}
			form := "erf"
			if tanh {
				form = "tanh"
			}
			what := fuse(l, m.nodes, root, fused)
			rw = append(rw, Rewrite{Node: root.Name, What: fmt.Sprintf("fused into Gelu (%s): %s", form, what)})
		}
	}
	g.finishPass()
	return g, rw
}

// match matches root as the last product of either form, and returns x.
func (m *geluMatch) match(root *Node) (*Value, bool, bool) {
	dtype := root.Outputs[0].DType
	for _, tanh := range []bool{false, true} {
		m.nodes = m.nodes[:0]
		fs := m.factors(root.Outputs[0], true, 4)
		if len(fs) != 3 {
			return nil, false, false
		}
		var x *Value
		take(&fs, func(s *Value) bool {
			save := len(m.nodes)
			if x = m.inner(s, tanh); x == nil {
				m.nodes = m.nodes[:save]
			}
			return x != nil
		})
		if x == nil || x.DType != dtype || !equalShapes(x.Shape, m.shape) {
			continue
		}
		if take(&fs, func(v *Value) bool { return constIs(v, 0.5) && len(v.Shape) <= len(m.shape) }) &&
			take(&fs, func(v *Value) bool { return v == x }) && len(fs) == 0 {
			return x, tanh, true
		}
	}
	return nil, false, false
}

// scalar reports whether v is a constant of want that does not widen x's
// shape.
func (m *geluMatch) scalar(v *Value, want float64) bool {
	return constIs(v, want) && len(v.Shape) <= len(m.shape)
}

// inner matches 1 + Erf(x/sqrt 2) or 1 + Tanh(sqrt(2/pi)*(x +
// 0.044715*x^3)) and returns x.
func (m *geluMatch) inner(s *Value, tanh bool) *Value {
	if !tanh {
		t := m.onePlus(s, "Erf")
		if t == nil {
			return nil
		}
		if div := m.node(t, "Div"); div != nil {
			if m.scalar(div.Inputs[1], math.Sqrt2) {
				return div.Inputs[0]
			}
			return nil
		}
		mul := m.node(t, "Mul")
		for k := 0; mul != nil && k < 2; k++ {
			if m.scalar(mul.Inputs[1-k], 1/math.Sqrt2) {
				return mul.Inputs[k]
			}
		}
		return nil
	}
	u := m.onePlus(s, "Tanh")
	if u == nil || m.u.sole(u) == nil {
		return nil
	}
	fs := m.factors(u, true, 3)
	if len(fs) != 2 || !take(&fs, func(v *Value) bool { return m.scalar(v, math.Sqrt(2/math.Pi)) }) {
		return nil
	}
	add := m.node(fs[0], "Add")
	if add == nil {
		return nil
	}
	for k := 0; k < 2; k++ {
		if x := add.Inputs[k]; m.cubic(add.Inputs[1-k], x) {
			return x
		}
	}
	return nil
}

// cubic matches 0.044715 * x^3, x^3 as Pow(x, 3) or x*x*x.
func (m *geluMatch) cubic(v, x *Value) bool {
	save := len(m.nodes)
	if m.u.sole(v) == nil {
		return false
	}
	fs := m.factors(v, true, 5)
	if fs == nil || !take(&fs, func(v *Value) bool { return m.scalar(v, 0.044715) }) {
		m.nodes = m.nodes[:save]
		return false
	}
	if len(fs) == 1 {
		if pow := m.node(fs[0], "Pow"); pow != nil && pow.Inputs[0] == x && m.scalar(pow.Inputs[1], 3) {
			return true
		}
	}
	if len(fs) == 3 && fs[0] == x && fs[1] == x && fs[2] == x {
		return true
	}
	m.nodes = m.nodes[:save]
	return false
}
