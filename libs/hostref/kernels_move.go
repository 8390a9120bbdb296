package hostref

// Data movement: every output element is one input element, exactly, of
// any element type. Each operator is an index map (for every output
// element, the input and element it comes from), which the error
// bounds apply to the inputs' errors too.

import (
	"fmt"

	"ipu.local/libs/graph"
	"ipu.local/libs/onnx"
)

// isMove reports whether op is a data-movement operator.
func isMove(op string) bool {
	switch op {
	case "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose",
		"Gather", "Concat", "Slice", "Split", "Expand", "Tile":
		return true
	}
	return false
}

// moveMap says where the elements of one output come from: element k
// is element idx[k] of input src[k] (input 0 when src is nil).
type moveMap struct {
	src []int
	idx []int64
}

// take applies a map to the inputs' elements (one slice per input).
func take[T any](ins [][]T, m moveMap) []T {
	y := make([]T, len(m.idx))
	for k, j := range m.idx {
		s := 0
		if m.src != nil {
			s = m.src[k]
		}
		y[k] = ins[s][j]
	}
	return y
}

// move evaluates a data-movement node.
func (ev *evaluator) move(n *graph.Node, in []data) ([]data, error) {
	maps, err := ev.moveMaps(n)
	if err != nil {
		return nil, err
	}
	ints := in[0].i != nil
	fs := make([][]float64, len(in))
	is := make([][]int64, len(in))
	for i, d := range in {
		if n.Inputs[i] != nil && (d.i != nil) != ints && !(n.Op == "Gather" && i == 1) {
			return nil, fmt.Errorf("node %q (%s) input %d: element type %v differs from %v", n.Name, n.Op, i, n.Inputs[i].DType, n.Inputs[0].DType)
		}
		fs[i], is[i] = d.f, d.i
	}
	out := make([]data, len(maps))
	for k, m := range maps {
		if ints {
			out[k] = intData(take(is, m))
		} else {
			out[k] = floatData(take(fs, m))
		}
	}
	return out, nil
}

// moveMaps returns the index map of each output of a data-movement
// node (outputs the model omits get an empty map). The maps depend on
// values only for Gather (its indices).
func (ev *evaluator) moveMaps(n *graph.Node) ([]moveMap, error) {
	x := n.Inputs[0]
	if x == nil {
		return nil, fmt.Errorf("node %q (%s): input 0 is missing", n.Name, n.Op)
	}
	xs := x.Shape
	fail := func(format string, args ...any) ([]moveMap, error) {
		return nil, fmt.Errorf("node %q (%s): %s", n.Name, n.Op, fmt.Sprintf(format, args...))
	}
	out := n.Outputs[0]
	single := func(idx []int64) ([]moveMap, error) {
		if int64(len(idx)) != out.NumElements() {
			return fail("the input gives %d elements, output %q has %d", len(idx), out.Name, out.NumElements())
		}
		return []moveMap{{idx: idx}}, nil
	}
	switch n.Op {
	case "Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze":
		if x.NumElements() != out.NumElements() {
			return fail("%d input elements, output %q has %d", x.NumElements(), out.Name, out.NumElements())
		}
		return single(seq(out.NumElements()))
	case "Transpose":
		a, err := attrs[graph.Transpose](n)
		if err != nil {
			return nil, err
		}
		if !isPerm(a.Perm, len(xs)) {
			return fail("perm %v is not a permutation of %d axes", a.Perm, len(xs))
		}
		return single(transpose(xs, a.Perm, seq(x.NumElements())))
	case "Expand":
		a, err := attrs[graph.Expand](n)
		if err != nil {
			return nil, err
		}
		if !graph.Unidirectional(xs, a.Shape) || !sameShape(a.Shape, out.Shape) {
			return fail("shape %s does not broadcast to %s", graph.ShapeString(xs), graph.ShapeString(out.Shape))
		}
		return single(graph.BroadcastIndex(xs, out.Shape))
	case "Tile":
		a, err := attrs[graph.Tile](n)
		if err != nil {
			return nil, err
		}
		if len(a.Repeats) != len(xs) || len(out.Shape) != len(xs) {
			return fail("repeats %v for an input of rank %d", a.Repeats, len(xs))
		}
		st := graph.Strides(xs)
		for ax := range xs {
			if a.Repeats[ax] < 0 || out.Shape[ax] != xs[ax]*a.Repeats[ax] {
				return fail("repeats %v do not give shape %s", a.Repeats, graph.ShapeString(out.Shape))
			}
		}
		return single(axisSum(out.Shape, func(ax int, c int64) int64 { return (c % xs[ax]) * st[ax] }))
	case "Slice":
		return ev.sliceMap(n, fail, single)
	case "Split":
		a, err := attrs[graph.Split](n)
		if err != nil {
			return nil, err
		}
		if a.Axis < 0 || a.Axis >= len(xs) || len(a.Sizes) < len(n.Outputs) {
			return fail("axis %d, %d sizes for %d outputs and an input of rank %d", a.Axis, len(a.Sizes), len(n.Outputs), len(xs))
		}
		st := graph.Strides(xs)
		maps := make([]moveMap, len(n.Outputs))
		var start int64
		for k, y := range n.Outputs {
			s := a.Sizes[k]
			if s < 0 || start+s > xs[a.Axis] {
				return fail("sizes %v overrun axis %d of dimension %d", a.Sizes, a.Axis, xs[a.Axis])
			}
			if y != nil {
				want := append([]int64{}, xs...)
				want[a.Axis] = s
				if !sameShape(want, y.Shape) {
					return fail("output %d %q has shape %s, want %s", k, y.Name, graph.ShapeString(y.Shape), graph.ShapeString(want))
				}
				base := start
				maps[k].idx = axisSum(y.Shape, func(ax int, c int64) int64 {
					if ax == a.Axis {
						return (base + c) * st[ax]
					}
					return c * st[ax]
				})
			}
			start += s
		}
		return maps, nil
	case "Concat":
		return concatMap(n, fail)
	case "Gather":
		return ev.gatherMap(n, fail, single)
	}
	return fail("not a data-movement operator")
}

// seq returns 0, 1, ..., n-1.
func seq(n int64) []int64 {
	v := make([]int64, n)
	for i := range v {
		v[i] = int64(i)
	}
	return v
}

func sameShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func isPerm(perm []int, rank int) bool {
	if len(perm) != rank {
		return false
	}
	seen := make([]bool, rank)
	for _, p := range perm {
		if p < 0 || p >= rank || seen[p] {
			return false
		}
		seen[p] = true
	}
	return true
}

// axisSum returns, for each element of a tensor of shape out in
// row-major order, the sum over axes of off(axis, coordinate).
func axisSum(out []int64, off func(ax int, c int64) int64) []int64 {
	n := graph.NumElements(out)
	idx := make([]int64, n)
	if n == 0 {
		return idx
	}
	table := make([][]int64, len(out))
	var cur int64
	for ax, d := range out {
		table[ax] = make([]int64, d)
		for c := range table[ax] {
			table[ax][c] = off(ax, int64(c))
		}
		cur += table[ax][0]
	}
	coord := make([]int64, len(out))
	for e := range idx {
		idx[e] = cur
		for ax := len(out) - 1; ax >= 0; ax-- {
			cur -= table[ax][coord[ax]]
			coord[ax]++
			if coord[ax] < out[ax] {
				cur += table[ax][coord[ax]]
				break
			}
			coord[ax] = 0
			cur += table[ax][0]
		}
	}
	return idx
}

// sliceMap: along each sliced axis, coordinate c reads start + c*step
// (steps of either sign); other axes are taken whole.
func (ev *evaluator) sliceMap(n *graph.Node, fail func(string, ...any) ([]moveMap, error), single func([]int64) ([]moveMap, error)) ([]moveMap, error) {
	a, err := attrs[graph.Slice](n)
	if err != nil {
		return nil, err
	}
	xs, out := n.Inputs[0].Shape, n.Outputs[0].Shape
	k := len(a.Axes)
	if len(a.Starts) != k || len(a.Ends) != k || len(a.Steps) != k || len(out) != len(xs) {
		return fail("%d axes, %d starts, %d ends, %d steps for rank %d", k, len(a.Starts), len(a.Ends), len(a.Steps), len(xs))
	}
	start := make([]int64, len(xs))
	step := make([]int64, len(xs))
	want := append([]int64{}, xs...)
	for i := range step {
		step[i] = 1
	}
	for j, ax := range a.Axes {
		if ax < 0 || ax >= len(xs) || a.Steps[j] == 0 {
			return fail("axis %d with step %d for rank %d", ax, a.Steps[j], len(xs))
		}
		start[ax], step[ax] = a.Starts[j], a.Steps[j]
		want[ax] = sliceCount(a.Starts[j], a.Ends[j], a.Steps[j])
		if want[ax] > 0 {
			last := start[ax] + (want[ax]-1)*step[ax]
			if start[ax] < 0 || start[ax] >= xs[ax] || last < 0 || last >= xs[ax] {
				return fail("axis %d of dimension %d: start %d, end %d, step %d leave it", ax, xs[ax], a.Starts[j], a.Ends[j], a.Steps[j])
			}
		}
	}
	if !sameShape(want, out) {
		return fail("the slice gives shape %s, output %q has %s", graph.ShapeString(want), n.Outputs[0].Name, graph.ShapeString(out))
	}
	st := graph.Strides(xs)
	return single(axisSum(out, func(ax int, c int64) int64 { return (start[ax] + c*step[ax]) * st[ax] }))
}

// sliceCount is ceil((end-start)/step), at least 0.
func sliceCount(start, end, step int64) int64 {
	switch {
	case step > 0 && end > start:
		return (end - start + step - 1) / step
	case step < 0 && start > end:
		return (start - end - step - 1) / -step
	}
	return 0
}

// concatMap: the output is, for each index of the axes before Axis, the
// inputs' blocks one after the other.
func concatMap(n *graph.Node, fail func(string, ...any) ([]moveMap, error)) ([]moveMap, error) {
	a, err := attrs[graph.Concat](n)
	if err != nil {
		return nil, err
	}
	out := n.Outputs[0].Shape
	if a.Axis < 0 || a.Axis >= len(out) {
		return fail("axis %d for rank %d", a.Axis, len(out))
	}
	var sum int64
	for i, v := range n.Inputs {
		if v == nil || len(v.Shape) != len(out) {
			return fail("input %d is missing or of another rank", i)
		}
		for ax := range out {
			if ax != a.Axis && v.Shape[ax] != out[ax] {
				return fail("input %d has shape %s, output %s", i, graph.ShapeString(v.Shape), graph.ShapeString(out))
			}
		}
		sum += v.Shape[a.Axis]
	}
	if sum != out[a.Axis] {
		return fail("axis %d sums to %d, output has %d", a.Axis, sum, out[a.Axis])
	}
	outer := graph.NumElements(out[:a.Axis])
	m := moveMap{src: make([]int, 0, graph.NumElements(out)), idx: make([]int64, 0, graph.NumElements(out))}
	for o := int64(0); o < outer; o++ {
		for i, v := range n.Inputs {
			chunk := graph.NumElements(v.Shape[a.Axis:])
			for j := int64(0); j < chunk; j++ {
				m.src = append(m.src, i)
				m.idx = append(m.idx, o*chunk+j)
			}
		}
	}
	return []moveMap{m}, nil
}

// gatherMap: output[outer, j..., inner] = data[outer, indices[j...],
// inner], a negative index counting from the end of the axis.
func (ev *evaluator) gatherMap(n *graph.Node, fail func(string, ...any) ([]moveMap, error), single func([]int64) ([]moveMap, error)) ([]moveMap, error) {
	a, err := attrs[graph.Gather](n)
	if err != nil {
		return nil, err
	}
	data, iv := n.Inputs[0], n.Inputs[1]
	if iv == nil {
		return fail("input 1 is missing")
	}
	indices := ev.ints[iv.Index]
	if (iv.DType != onnx.Int32 && iv.DType != onnx.Int64) || indices == nil {
		return fail("indices %q of element type %v, want int32 or int64", iv.Name, iv.DType)
	}
	if a.Axis < 0 || a.Axis >= len(data.Shape) {
		return fail("axis %d for rank %d", a.Axis, len(data.Shape))
	}
	d := data.Shape[a.Axis]
	outer := graph.NumElements(data.Shape[:a.Axis])
	inner := graph.NumElements(data.Shape[a.Axis+1:])
	idx := make([]int64, 0, outer*int64(len(indices))*inner)
	for o := int64(0); o < outer; o++ {
		for _, j := range indices {
			if j < -d || j >= d {
				return fail("index %d of %q out of range [%d,%d]", j, iv.Name, -d, d-1)
			}
			if j < 0 {
				j += d
			}
			base := (o*d + j) * inner
			for i := int64(0); i < inner; i++ {
				idx = append(idx, base+i)
			}
		}
	}
	return single(idx)
}
