package lower

// Data movement by a static element map: Concat, Split, Slice, Expand,
// Tile and Gather with constant indices. Every output element copies one
// input element known at compile time; layout.MapRuns gives the runs,
// which become exchange transfers and copy kernels as for a re-layout.

import (
	"encoding/binary"
	"fmt"

	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// elemMap is one input's part of one output: the output box it fills
// and the index map.
type elemMap struct {
	in, out int // node input and output
	cover   layout.Box
	at      func(out, in []int)
}

// MoveOps are the operators lowered as static element maps (Gather when
// its indices are constant).
var MoveOps = map[string]bool{"Concat": true, "Split": true, "Slice": true, "Expand": true, "Tile": true, "Gather": true}

// elemMaps returns the maps of a data-movement node.
func elemMaps(n *graph.Node) ([]elemMap, error) {
	xs := shapeInts(n.Inputs[0].Shape)
	ys := shapeInts(n.Outputs[0].Shape)
	switch a := n.Attrs.(type) {
	case *graph.Concat:
		return concatMaps(n, a, ys), nil
	case *graph.Split:
		return splitMaps(n, a), nil
	case *graph.Slice:
		return []elemMap{sliceMap(a, xs, ys)}, nil
	case *graph.Expand:
		return []elemMap{expandMap(xs, ys)}, nil
	case *graph.Tile:
		return []elemMap{{cover: layout.Full(ys), at: func(out, in []int) {
			for d := range in {
				in[d] = out[d] % xs[d]
			}
		}}}, nil
	case *graph.Gather:
		m, err := gatherMap(n, a, xs, ys)
		if err != nil {
			return nil, err
		}
		return []elemMap{m}, nil
	}
	return nil, fmt.Errorf("no element map for %s", n.Op)
}

// concatMaps maps each non-empty input of a Concat to its band of the
// output along the axis.
func concatMaps(n *graph.Node, a *graph.Concat, ys []int) []elemMap {
	var ms []elemMap
	off := 0
	for j, v := range n.Inputs {
		if v == nil {
			continue
		}
		d := int(v.Shape[a.Axis])
		if d == 0 {
			continue
		}
		cover := layout.Full(ys)
		cover[a.Axis] = layout.Range{Lo: off, Hi: off + d}
		o, ax := off, a.Axis
		ms = append(ms, elemMap{in: j, cover: cover, at: func(out, in []int) {
			copy(in, out)
			in[ax] -= o
		}})
		off += d
	}
	return ms
}

// splitMaps maps each non-empty output of a Split to its band of the
// input along the axis.
func splitMaps(n *graph.Node, a *graph.Split) []elemMap {
	var ms []elemMap
	off := 0
	for k, v := range n.Outputs {
		o, ax := off, a.Axis
		off += int(a.Sizes[k])
		if v == nil || a.Sizes[k] == 0 {
			continue
		}
		ms = append(ms, elemMap{out: k, cover: layout.Full(shapeInts(v.Shape)), at: func(out, in []int) {
			copy(in, out)
			in[ax] += o
		}})
	}
	return ms
}

// sliceMap maps a Slice's output to its input: start plus step times the
// index on each sliced axis.
func sliceMap(a *graph.Slice, xs, ys []int) elemMap {
	start := make([]int, len(xs))
	step := make([]int, len(xs))
	for d := range step {
		step[d] = 1
	}
	for i, ax := range a.Axes {
		start[ax], step[ax] = int(a.Starts[i]), int(a.Steps[i])
	}
	return elemMap{cover: layout.Full(ys), at: func(out, in []int) {
		for d := range in {
			in[d] = start[d] + step[d]*out[d]
		}
	}}
}

// expandMap maps an Expand's output to its input, whose leading axes the
// output adds and whose axes of 1 it broadcasts.
func expandMap(xs, ys []int) elemMap {
	off := len(ys) - len(xs)
	return elemMap{cover: layout.Full(ys), at: func(out, in []int) {
		for d := range in {
			if xs[d] == 1 {
				in[d] = 0
			} else {
				in[d] = out[d+off]
			}
		}
	}}
}

// gatherMap maps a Gather with constant indices: the output's index axes
// pick the input's index along the axis (negative indices counted from
// its end); an index outside the axis is an error.
func gatherMap(n *graph.Node, a *graph.Gather, xs, ys []int) (elemMap, error) {
	iv := n.Inputs[1]
	if iv.Const == nil {
		return elemMap{}, fmt.Errorf("indices %q are computed at run time", iv.Name)
	}
	idx, err := constIndices(iv)
	if err != nil {
		return elemMap{}, err
	}
	ax, q := a.Axis, len(iv.Shape)
	dim := xs[ax]
	for i, v := range idx {
		if v < -int64(dim) || v >= int64(dim) {
			return elemMap{}, fmt.Errorf("input 1 (%q): index %d at position %d is outside [-%d, %d) of axis %d", iv.Name, v, i, dim, dim, ax)
		}
		if v < 0 {
			idx[i] = v + int64(dim)
		}
	}
	is := shapeInts(iv.Shape)
	return elemMap{cover: layout.Full(ys), at: func(out, in []int) {
		copy(in[:ax], out[:ax])
		f := 0
		for d := 0; d < q; d++ {
			f = f*is[d] + out[ax+d]
		}
		in[ax] = int(idx[f])
		copy(in[ax+1:], out[ax+q:])
	}}, nil
}

// constIndices reads an int32 or int64 constant.
func constIndices(v *graph.Value) ([]int64, error) {
	raw := v.Const.Raw
	n := int(v.NumElements())
	out := make([]int64, n)
	switch v.DType {
	case onnx.Int64:
		if len(raw) != 8*n {
			return nil, fmt.Errorf("indices %q: %d bytes for %d int64", v.Name, len(raw), n)
		}
		for i := range out {
			out[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
		}
	case onnx.Int32:
		if len(raw) != 4*n {
			return nil, fmt.Errorf("indices %q: %d bytes for %d int32", v.Name, len(raw), n)
		}
		for i := range out {
			out[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
		}
	default:
		return nil, fmt.Errorf("indices %q of type %v", v.Name, v.DType)
	}
	return out, nil
}

// dataMove lowers a data-movement node by its element maps.
func (l *lowerer) dataMove(st *plan.Step, n *graph.Node) error {
	if g, ok := n.Attrs.(*graph.Gather); ok && n.Inputs[1].Const == nil {
		return l.gatherRows(st, n, g)
	}
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	maps, err := elemMaps(n)
	if err != nil {
		return l.notLowered(n, "%v", err)
	}
	var acc int64
	for _, v := range n.Inputs {
		if v != nil {
			acc = max(acc, l.acc[v.Index])
		}
	}
	for _, v := range n.Outputs {
		if v != nil {
			l.acc[v.Index] = acc
		}
	}
	all := newMoves()
	outRefs := make([][]prog.Ref, len(outs))
	for k, y := range outs {
		if y == nil {
			continue
		}
		if y.Kind != layout.RowMajor || y.Transposed {
			return l.stepErr("output %d: tensor %d (%q) is %s, want row-major", k, y.ID, y.Name, y.Kind)
		}
		if outRefs[k], err = l.write(y); err != nil {
			return err
		}
	}
	for _, m := range maps {
		x, y := ins[m.in], outs[m.out]
		if y == nil {
			continue
		}
		if x == nil {
			return l.stepErr("input %d has no tensor", m.in)
		}
		if x.Kind != layout.RowMajor || x.Transposed || x.Size != y.Size {
			return l.stepErr("input %d: tensor %d (%q) is %s of %d-byte elements, want row-major of %d", m.in, x.ID, x.Name, x.Kind, x.Size, y.Size)
		}
		xRefs, err := l.read(x)
		if err != nil {
			return err
		}
		runs, err := layout.MapRuns(x, y, m.cover, m.at)
		if err != nil {
			return l.stepErr("%v", err)
		}
		mv, err := l.runMoves(x, y, xRefs, outRefs[m.out], runs)
		if err != nil {
			return err
		}
		all.xfers = append(all.xfers, mv.xfers...)
		mv.recycle()
		for t, ks := range mv.copies {
			all.copies[t] = append(all.copies[t], ks...)
		}
	}
	l.exchange(n.Name, all)
	return nil
}
