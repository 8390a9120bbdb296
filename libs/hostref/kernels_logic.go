package hostref

// Comparisons, logic, selection, casts, integer arithmetic, the shape
// operators and If: exact at every precision (casts round once, to their
// target type).

import (
	"fmt"
	"math"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// logic evaluates the operators of this file other than Cast and If;
// ok is false for any other operator.
func (ev *evaluator) logic(n *graph.Node, in []data) (out []data, ok bool, err error) {
	fail := func(format string, args ...any) ([]data, bool, error) {
		return nil, true, fmt.Errorf("node %q (%s): %s", n.Name, n.Op, fmt.Sprintf(format, args...))
	}
	y := n.Outputs[0]
	switch n.Op {
	case "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "And", "Or", "Xor":
		a, b := in[0], in[1]
		if (a.i == nil) != (b.i == nil) {
			return fail("element types %v and %v differ", n.Inputs[0].DType, n.Inputs[1].DType)
		}
		ia, ib, err := broadcastPair(n, y.Shape)
		if err != nil {
			return nil, true, err
		}
		r := make([]int64, len(ia))
		for k := range r {
			var lt, eq, gt bool
			if a.i != nil {
				x, z := a.i[ia[k]], b.i[ib[k]]
				lt, eq, gt = x < z, x == z, x > z
			} else {
				x, z := a.f[ia[k]], b.f[ib[k]]
				lt, eq, gt = x < z, x == z, x > z // all false for a NaN
			}
			if compare(n.Op, lt, eq, gt, a, b, ia[k], ib[k]) {
				r[k] = 1
			}
		}
		return []data{intData(r)}, true, nil
	case "Not":
		if in[0].i == nil {
			return fail("element type %v, want bool", n.Inputs[0].DType)
		}
		r := make([]int64, len(in[0].i))
		for k, x := range in[0].i {
			if x == 0 {
				r[k] = 1
			}
		}
		return []data{intData(r)}, true, nil
	case "Where":
		c, a, b := in[0], in[1], in[2]
		if c.i == nil || (a.i == nil) != (b.i == nil) {
			return fail("element types %v, %v, %v: want bool and two of one type", n.Inputs[0].DType, n.Inputs[1].DType, n.Inputs[2].DType)
		}
		ic, ix, iy, err := whereIndex(n)
		if err != nil {
			return nil, true, err
		}
		if a.i != nil {
			r := make([]int64, len(ic))
			for k := range r {
				r[k] = b.i[iy[k]]
				if c.i[ic[k]] != 0 {
					r[k] = a.i[ix[k]]
				}
			}
			return []data{intData(r)}, true, nil
		}
		r := make([]float64, len(ic))
		for k := range r {
			r[k] = b.f[iy[k]]
			if c.i[ic[k]] != 0 {
				r[k] = a.f[ix[k]]
			}
		}
		return []data{floatData(r)}, true, nil
	case "Shape":
		s := n.Inputs[0].Shape
		if y.NumElements() != int64(len(s)) {
			return fail("output %q has %d elements for an input of rank %d", y.Name, y.NumElements(), len(s))
		}
		return []data{intData(append([]int64{}, s...))}, true, nil
	case "Range":
		return ev.rangeNode(n, in, fail)
	case "ConstantOfShape":
		return constantOfShape(n, fail)
	}
	return nil, false, nil
}

// compare is the result of a comparison or logic operator on one pair.
func compare(op string, lt, eq, gt bool, a, b data, ka, kb int64) bool {
	switch op {
	case "Equal":
		return eq
	case "Greater":
		return gt
	case "GreaterOrEqual":
		return gt || eq
	case "Less":
		return lt
	case "LessOrEqual":
		return lt || eq
	}
	x, z := a.i[ka] != 0, b.i[kb] != 0
	switch op {
	case "And":
		return x && z
	case "Or":
		return x || z
	}
	return x != z // Xor
}

// broadcastPair returns the broadcast index maps of inputs 0 and 1 to
// the output shape, after checking that they broadcast to it.
func broadcastPair(n *graph.Node, out []int64) ([]int64, []int64, error) {
	for i := 0; i < 2; i++ {
		if !graph.Unidirectional(n.Inputs[i].Shape, out) {
			return nil, nil, fmt.Errorf("node %q (%s) input %d: shape %s does not broadcast to %s", n.Name, n.Op, i, graph.ShapeString(n.Inputs[i].Shape), graph.ShapeString(out))
		}
	}
	return graph.BroadcastIndex(n.Inputs[0].Shape, out), graph.BroadcastIndex(n.Inputs[1].Shape, out), nil
}

// whereIndex returns Where's broadcast index maps (condition, X, Y).
func whereIndex(n *graph.Node) (ic, ix, iy []int64, err error) {
	out := n.Outputs[0].Shape
	for i := 0; i < 3; i++ {
		if !graph.Unidirectional(n.Inputs[i].Shape, out) {
			return nil, nil, nil, fmt.Errorf("node %q (%s) input %d: shape %s does not broadcast to %s", n.Name, n.Op, i, graph.ShapeString(n.Inputs[i].Shape), graph.ShapeString(out))
		}
	}
	return graph.BroadcastIndex(n.Inputs[0].Shape, out), graph.BroadcastIndex(n.Inputs[1].Shape, out), graph.BroadcastIndex(n.Inputs[2].Shape, out), nil
}

// intArith is Add, Sub, Mul and Div on int32 and int64: two's
// complement wrap-around (the caller wraps int32 results), Div
// truncating toward zero; a division by zero is an error.
func (ev *evaluator) intArith(n *graph.Node, in []data) ([]data, error) {
	ia, ib, err := broadcastPair(n, n.Outputs[0].Shape)
	if err != nil {
		return nil, err
	}
	a, b := in[0].i, in[1].i
	y := make([]int64, len(ia))
	for k := range y {
		x, z := a[ia[k]], b[ib[k]]
		switch n.Op {
		case "Add":
			y[k] = x + z
		case "Sub":
			y[k] = x - z
		case "Mul":
			y[k] = x * z
		default:
			if z == 0 {
				return nil, fmt.Errorf("node %q (Div): integer division by zero (element %d of %q)", n.Name, ib[k], n.Inputs[1].Name)
			}
			y[k] = x / z
		}
	}
	return []data{intData(y)}, nil
}

// castNode casts among the float types, int32, int64 and bool as ONNX
// defines it: floats to integers truncate toward zero (a NaN or a value
// outside the target's range is an error: ONNX leaves it undefined),
// integers wrap, anything non-zero (NaN included) is true, integers to
// floats round to nearest even.
func (ev *evaluator) castNode(n *graph.Node, x data) ([]data, error) {
	a, err := attrs[graph.Cast](n)
	if err != nil {
		return nil, err
	}
	if n.Outputs[0].DType != a.To {
		return nil, fmt.Errorf("node %q (Cast): output of type %v, attribute to %v", n.Name, n.Outputs[0].DType, a.To)
	}
	to := a.To
	if isIntType(to) {
		y := make([]int64, x.length())
		if x.i != nil {
			for k, v := range x.i {
				y[k] = wrapInt(v, to)
			}
			return []data{intData(y)}, nil
		}
		for k, v := range x.f {
			switch {
			case to == onnx.Bool:
				if v != 0 {
					y[k] = 1
				}
			default:
				y[k] = castInt(v, to)
			}
		}
		return []data{intData(y)}, nil
	}
	if to != onnx.Float && to != onnx.Float16 {
		if _, fp8 := graph.FP8Format(to); !fp8 {
			return nil, fmt.Errorf("node %q (Cast): cast to %v is not supported", n.Name, to)
		}
	}
	if x.i == nil {
		return []data{floatData(ev.cast(a, x.f))}, nil
	}
	f := make([]float64, len(x.i))
	for k, v := range x.i {
		if to == onnx.Float {
			f[k] = float64(float32(v)) // one rounding, from the integer
		} else {
			f[k] = float64(v) // exact below 2^53; float16 and FP8 overflow far below
		}
	}
	if to == onnx.Float {
		return []data{floatData(f)}, nil
	}
	return []data{floatData(ev.cast(a, f))}, nil
}

// rangeNode computes Range from its three scalar operands: integers
// start + i*delta, floats accumulated (one rounding per addition, as the
// ONNX function body and onnxruntime do). The count is the output's.
func (ev *evaluator) rangeNode(n *graph.Node, in []data, fail func(string, ...any) ([]data, bool, error)) ([]data, bool, error) {
	count := n.Outputs[0].NumElements()
	for i := 0; i < 3; i++ {
		if in[i].length() != 1 || (in[i].i == nil) != (in[0].i == nil) {
			return fail("input %d: want a scalar of the type of input 0", i)
		}
	}
	if in[0].i != nil {
		y := make([]int64, count)
		for k := range y {
			y[k] = in[0].i[0] + int64(k)*in[2].i[0]
		}
		return []data{intData(y)}, true, nil
	}
	y := make([]float64, count)
	acc := in[0].f[0]
	for k := range y {
		y[k] = acc
		acc = ev.r(acc + in[2].f[0])
	}
	return []data{floatData(y)}, true, nil
}

// constantOfShape fills the output with its value: Attrs as a tensor of
// one element, or without attributes ONNX's default float 0.
func constantOfShape(n *graph.Node, fail func(string, ...any) ([]data, bool, error)) ([]data, bool, error) {
	y := n.Outputs[0]
	count := y.NumElements()
	var fill data
	switch a := n.Attrs.(type) {
	case nil:
		if y.DType != onnx.Float {
			return fail("no value for an output of type %v", y.DType)
		}
		fill = data{f: []float64{0}}
	case *onnx.Tensor:
		d, err := decode(a)
		if err != nil || d.length() != 1 || a.DType != y.DType {
			return fail("value %v%s does not fill an output of type %v", a.DType, graph.ShapeString(a.Dims), y.DType)
		}
		fill = d
	default:
		return fail("attributes %T, want a value tensor", n.Attrs)
	}
	if fill.i != nil {
		v := make([]int64, count)
		for k := range v {
			v[k] = fill.i[0]
		}
		return []data{intData(v)}, true, nil
	}
	v := make([]float64, count)
	for k := range v {
		v[k] = fill.f[0]
	}
	return []data{floatData(v)}, true, nil
}

// ifNode runs the branch the condition selects, its nodes reading the
// values of the enclosing graph, and returns copies of the branch's
// outputs.
func (ev *evaluator) ifNode(n *graph.Node, in []data) ([]data, error) {
	a, err := attrs[graph.If](n)
	if err != nil {
		return nil, err
	}
	br, name, err := takenBranch(n, a, in[0].i)
	if err != nil {
		return nil, err
	}
	if err := ev.nodes(br.Nodes); err != nil {
		return nil, fmt.Errorf("node %q (If) %s branch: %w", n.Name, name, err)
	}
	out := make([]data, len(n.Outputs))
	for k, v := range n.Outputs {
		if v == nil {
			continue
		}
		bv := br.Outputs[k]
		d, ok := ev.get(bv)
		if !ok {
			return nil, fmt.Errorf("node %q (If) %s branch: output %d %q is not computed", n.Name, name, k, bv.Name)
		}
		if bv.DType != v.DType || !sameShape(bv.Shape, v.Shape) {
			return nil, fmt.Errorf("node %q (If) %s branch: output %d %q is %v%s, the If's %v%s", n.Name, name, k, bv.Name, bv.DType, graph.ShapeString(bv.Shape), v.DType, graph.ShapeString(v.Shape))
		}
		out[k] = d.clone()
	}
	return out, nil
}

// takenBranch returns the branch an If's condition selects.
func takenBranch(n *graph.Node, a *graph.If, cond []int64) (*graph.Branch, string, error) {
	if len(cond) != 1 {
		return nil, "", fmt.Errorf("node %q (If): condition of %d elements, want one bool", n.Name, len(cond))
	}
	br, name := a.Then, "then"
	if cond[0] == 0 {
		br, name = a.Else, "else"
	}
	if br == nil {
		return nil, "", fmt.Errorf("node %q (If): no %s branch", n.Name, name)
	}
	if len(br.Outputs) < len(n.Outputs) {
		return nil, "", fmt.Errorf("node %q (If): %s branch gives %d outputs, the node has %d", n.Name, name, len(br.Outputs), len(n.Outputs))
	}
	for k, v := range br.Outputs {
		if v == nil && k < len(n.Outputs) && n.Outputs[k] != nil {
			return nil, "", fmt.Errorf("node %q (If): %s branch gives no value for output %d", n.Name, name, k)
		}
	}
	return br, name, nil
}

// castInt is a float's cast to int32 or int64: truncated toward zero; a
// NaN gives 0 and a value beyond the type's range its nearest end (ONNX
// leaves both undefined; the device does the same within int32).
func castInt(v float64, to onnx.DataType) int64 {
	lo, hi := float64(math.MinInt64), float64(math.MaxInt64) // -2^63, 2^63
	if to == onnx.Int32 {
		lo, hi = math.MinInt32, math.MaxInt32
	}
	switch {
	case v != v:
		return 0
	case v <= lo:
		return int64(lo)
	case v >= hi:
		if to == onnx.Int32 {
			return math.MaxInt32
		}
		return math.MaxInt64
	}
	return int64(v)
}
