package lower

// Row operators: Softmax, LogSoftmax, LayerNormalization, ReduceSum and
// ReduceMean over trailing axes, at float and float16 (computed in FP32,
// see codegen.Rows). Each piece of the input holds whole rows (the
// trailing axes entire, stored contiguously); the output piece on the
// same tile holds the same rows (reductions: one value per row).

import (
	"fmt"

	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// rowAxis returns the first of the trailing axes a row operator works
// along, or ok false when its axes are not trailing.
func rowAxis(n *graph.Node) (axis int, ok bool) {
	r := len(n.Inputs[0].Shape)
	switch a := n.Attrs.(type) {
	case *graph.Softmax:
		if a.Coerce2D {
			return a.Axis, true
		}
		return a.Axis, a.Axis == r-1
	case *graph.LayerNorm:
		return a.Axis, true
	case *graph.Reduce:
		if len(a.Axes) == 0 {
			return r, true
		}
		for i, ax := range a.Axes {
			if ax != r-len(a.Axes)+i {
				return 0, false
			}
		}
		return a.Axes[0], true
	}
	return 0, false
}

// rowGeometry returns the rows of piece geometry g along axes [axis, r):
// R rows of C elements, rows stride apart, or ok false when the piece does
// not hold whole rows contiguously.
func rowGeometry(g layout.Geometry, shape []int, axis int) (R, C, stride int, ok bool) {
	r := len(shape)
	C = 1
	for d := axis; d < r; d++ {
		if g.Box[d].Lo != 0 || g.Box[d].Hi != shape[d] {
			return 0, 0, 0, false
		}
		C *= shape[d]
	}
	// The trailing axes must be dense: every axis but the last strides
	// by the product of the inner extents.
	acc := 1
	for d := r - 1; d >= axis; d-- {
		if g.Strides[d] != acc {
			return 0, 0, 0, false
		}
		acc *= shape[d]
	}
	R = 1
	for d := 0; d < axis; d++ {
		R *= g.Box[d].Len()
	}
	stride = layout.Pad(C, 8/g.Size)
	if axis > 0 {
		stride = g.Strides[axis-1]
	}
	return R, C, stride, true
}

// rowsStep is a row operator's step as rows lowers it: the kernel's
// parameters so far and the tensors around it, with their storage.
type rowsStep struct {
	n        *graph.Node
	p        codegen.Rows
	axis     int
	x, y     *layout.Tensor
	xRefs    []prog.Ref
	yRefs    []prog.Ref
	vecs     [2]*layout.Tensor // LayerNorm's scale and bias
	vecRefs  [2][]prog.Ref
	f32Raw   [2][]byte         // FP16 constant scale and bias stored as FP32 (rowsSpread)
	stats    [2]*layout.Tensor // LayerNorm's Mean and InvStdDev outputs
	statRefs [2][]prog.Ref
}

func (r *rowsStep) reduces() bool {
	return r.p.Op == codegen.ReduceSum || r.p.Op == codegen.ReduceMean
}

func (l *lowerer) rows(st *plan.Step, n *graph.Node) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	x, y := ins[0], outs[0]
	if x == nil {
		return l.stepErr("input 0 has no tensor")
	}
	if _, err := l.computeType(n); err != nil {
		return err
	}
	xv := n.Inputs[0]
	if xv.DType != onnx.Float && xv.DType != onnx.Float16 {
		return l.notLowered(n, "input of type %s", xv.DType)
	}
	axis, ok := rowAxis(n)
	if !ok {
		return l.notLowered(n, "along axes that are not the last ones (the planner rewrites those with transposes)")
	}
	if red, ok := n.Attrs.(*graph.Reduce); ok && len(red.Axes) == 0 {
		return l.copyStep(n, x, y)
	}
	r := &rowsStep{n: n, axis: axis, x: x, y: y}
	r.p = codegen.Rows{InF16: xv.DType == onnx.Float16, OutF16: n.Outputs[0].DType == onnx.Float16, Workers: codegen.Slots}
	L := 1
	for _, d := range x.Shape[axis:] {
		L *= d
	}
	rounds := rowsOp(n, &r.p, L)
	if r.xRefs, err = l.read(x); err != nil {
		return err
	}
	spread := !wholeRowPieces(x, axis)
	if r.p.Op == codegen.LayerNorm {
		if err := l.rowsVectors(r, ins, spread); err != nil {
			return err
		}
	}
	if r.yRefs, err = l.write(y); err != nil {
		return err
	}
	for k := 1; k < len(outs); k++ {
		if outs[k] != nil {
			r.stats[k-1] = outs[k]
			if r.statRefs[k-1], err = l.write(outs[k]); err != nil {
				return err
			}
		}
	}
	s := l.compute(n.Name)
	pieces := x.Pieces
	if spread {
		// Rows spread over tiles (rowspread.go).
		if r.reduces() || r.stats[0] != nil || r.stats[1] != nil || axis != len(x.Shape)-1 {
			return l.notLowered(n, "rows spread over tiles with statistics outputs, along several axes or reduced")
		}
		if err := l.rowsSpread(n.Name, r.p, x, y, r.xRefs, r.yRefs, r.vecs, r.vecRefs, r.f32Raw); err != nil {
			return err
		}
		pieces = nil
	}
	for i, pc := range pieces {
		ks, err := l.rowsPiece(r, i)
		if err != nil {
			return err
		}
		s.Work[pc.Tile] = append(s.Work[pc.Tile], ks...)
	}
	l.rowsAccumulations(n, r.p.OutF16, L, rounds)
	return nil
}

// rowsOp sets p's operation (and LayerNorm's epsilon) from n and returns
// the roundings along a row of L elements that its output accumulates.
func rowsOp(n *graph.Node, p *codegen.Rows, L int) (rounds int64) {
	switch n.Op {
	case "Softmax":
		p.Op, rounds = codegen.Softmax, int64(L)+4
	case "LogSoftmax":
		p.Op, rounds = codegen.LogSoftmax, int64(L)+5
	case "LayerNormalization":
		p.Op, rounds = codegen.LayerNorm, int64(2*L+7)
		p.Epsilon = n.Attrs.(*graph.LayerNorm).Epsilon
	case "ReduceSum":
		p.Op, rounds = codegen.ReduceSum, int64(L)
	case "ReduceMean":
		p.Op, rounds = codegen.ReduceMean, int64(L)+2
	}
	return rounds
}

// rowsVectors reads LayerNorm's scale and bias: the whole normalised
// shape on every tile of the input (rows spread over tiles with FP16
// constants: FP32 copies that rowsSpread stores instead).
func (l *lowerer) rowsVectors(r *rowsStep, ins []*layout.Tensor, spread bool) error {
	n, xv := r.n, r.n.Inputs[0]
	if spread {
		r.f32Raw = fp16ConstVecs(n, r.x.Shape[len(r.x.Shape)-1])
	}
	f32Vecs := r.f32Raw[0] != nil
	for k := 1; k < 3 && k < len(ins); k++ {
		t := ins[k]
		if t == nil {
			if n.Inputs[k] != nil {
				return l.stepErr("input %d has no tensor", k)
			}
			continue
		}
		if t.Kind != layout.RowMajor {
			return l.stepErr("tensor %d (%q) is %s: LayerNormalization reads its scale and bias row-major", t.ID, t.Name, t.Kind)
		}
		if d := n.Inputs[k].DType; d != xv.DType {
			return l.notLowered(n, "scale or bias of type %s with input of type %s", d, xv.DType)
		}
		r.vecs[k-1] = t
		if f32Vecs {
			continue // rowsSpread stores FP32 copies instead
		}
		var err error
		if r.vecRefs[k-1], err = l.read(t); err != nil {
			return err
		}
	}
	r.p.ScaleF16 = xv.DType == onnx.Float16 && !f32Vecs
	return nil
}

// rowsPiece returns the kernels of input piece i: its rows, the output
// piece on its tile holding the same rows, LayerNorm's vectors and
// statistics there, split over the workers (splitRows).
func (l *lowerer) rowsPiece(r *rowsStep, i int) ([]*prog.Kernel, error) {
	n, x, y, axis := r.n, r.x, r.y, r.axis
	pc := x.Pieces[i]
	R, C, xs, ok := rowGeometry(x.Geometry(i), x.Shape, axis)
	if !ok {
		return nil, l.stepErr("input tensor %d (%q): piece %s on tile %d does not hold whole rows of axes %d.. stored contiguously", x.ID, x.Name, pc.Box, pc.Tile, axis)
	}
	k := r.p
	k.R, k.C, k.XStride = R, C, xs
	kern := &prog.Kernel{What: n.Name, Params: &k}
	kern.Fixes = append(kern.Fixes, prog.Fix{Field: &k.X, Ref: r.xRefs[i]})
	// The output piece: the same rows.
	ybox := pc.Box
	if r.reduces() {
		ybox = reducedBox(pc.Box, axis, y.Shape)
	}
	yi := pieceOn(y, pc.Tile, ybox)
	if yi < 0 {
		return nil, l.stepErr("output tensor %d (%q) has no piece %s on tile %d for input piece %s", y.ID, y.Name, ybox, pc.Tile, pc.Box)
	}
	yg := y.Geometry(yi)
	if r.reduces() {
		if yg.Elems != R && !(R == 1 && yg.Elems >= 1) || !denseRows(yg) {
			return nil, l.stepErr("output tensor %d (%q): piece %s on tile %d does not store its %d values one after the other", y.ID, y.Name, ybox, pc.Tile, R)
		}
	} else {
		_, _, ys, ok := rowGeometry(yg, y.Shape, axis)
		if !ok {
			return nil, l.stepErr("output tensor %d (%q): piece %s on tile %d does not store whole rows contiguously", y.ID, y.Name, ybox, pc.Tile)
		}
		k.YStride = ys
	}
	kern.Fixes = append(kern.Fixes, prog.Fix{Field: &k.Y, Ref: r.yRefs[yi], Write: true})
	for v, vec := range r.vecs {
		if vec == nil {
			continue
		}
		j := pieceOn(vec, pc.Tile, layout.Full(vec.Shape))
		if j < 0 {
			return nil, l.stepErr("tensor %d (%q) has no whole copy on tile %d, where LayerNormalization's rows are", vec.ID, vec.Name, pc.Tile)
		}
		f := &k.Scale
		if v == 1 {
			f = &k.Bias
		}
		kern.Fixes = append(kern.Fixes, prog.Fix{Field: f, Ref: r.vecRefs[v][j]})
	}
	for v, stat := range r.stats {
		if stat == nil {
			continue
		}
		sbox := reducedBox(pc.Box, axis, stat.Shape)
		j := pieceOn(stat, pc.Tile, sbox)
		if j < 0 || !denseRows(stat.Geometry(j)) {
			return nil, l.stepErr("tensor %d (%q) has no dense piece %s on tile %d", stat.ID, stat.Name, sbox, pc.Tile)
		}
		f := &k.Mean
		if v == 1 {
			f = &k.InvStdDev
		}
		kern.Fixes = append(kern.Fixes, prog.Fix{Field: f, Ref: r.statRefs[v][j], Write: true})
	}
	ks, err := l.splitRows(n, kern, &k)
	if err != nil {
		return nil, err
	}
	for _, kk := range ks {
		if _, err := kk.Cost(); err != nil {
			return nil, l.notLowered(n, "on tile %d: %v", pc.Tile, err)
		}
	}
	return ks, nil
}

// rowsAccumulations records the roundings n's outputs accumulate: the
// most of its inputs' plus rounds along a row (and the FP16 rounding),
// LayerNorm's Mean and InvStdDev theirs along a row of L elements.
func (l *lowerer) rowsAccumulations(n *graph.Node, outF16 bool, L int, rounds int64) {
	acc := l.acc[n.Inputs[0].Index]
	for _, v := range n.Inputs[1:] {
		if v != nil {
			acc = max(acc, l.acc[v.Index])
		}
	}
	f16 := int64(0)
	if outF16 {
		f16 = F16Rounding
	}
	l.acc[n.Outputs[0].Index] = acc + rounds + f16
	if len(n.Outputs) > 1 && n.Outputs[1] != nil {
		l.acc[n.Outputs[1].Index] = acc + int64(L) + 1
	}
	if len(n.Outputs) > 2 && n.Outputs[2] != nil {
		l.acc[n.Outputs[2].Index] = acc + int64(2*L) + 5
	}
}

// reducedBox is box with the axes from axis on reduced, in a shape that
// keeps them as 1 or drops them.
func reducedBox(b layout.Box, axis int, shape []int) layout.Box {
	out := append(layout.Box(nil), b[:axis]...)
	for len(out) < len(shape) {
		out = append(out, layout.Range{Lo: 0, Hi: 1})
	}
	return out
}

// denseRows reports whether a geometry stores its elements one after the
// other (no row padding).
func denseRows(g layout.Geometry) bool {
	if len(g.Box) == 0 {
		return true
	}
	r := len(g.Box)
	return g.Pitch == g.Box[r-1].Len() || g.Elems == g.Box.Volume()
}

// splitRows returns the launches of a row kernel: itself, or, when its
// rows are fewer than the workers (or do not share out evenly), the
// sequence of codegen.RowsSplit that splits each row's elements over the
// workers, with its scratch for the partials.
func (l *lowerer) splitRows(n *graph.Node, kern *prog.Kernel, p *codegen.Rows) ([]*prog.Kernel, error) {
	// Made-up addresses with the given arrays non-zero, as the choice
	// depends only on which arrays are given.
	probe := *p
	for _, f := range kern.Fixes {
		switch f.Field {
		case &p.X:
			probe.X = 0x80000
		case &p.Y:
			probe.Y = 0xA0000
		case &p.Scale:
			probe.Scale = 0xC0000
		case &p.Bias:
			probe.Bias = 0xC4000
		case &p.Mean:
			probe.Mean = 0xC8000
		case &p.InvStdDev:
			probe.InvStdDev = 0xCC000
		}
	}
	// The partials in interleaved memory: the launches that combine them
	// load them four at a time.
	probe.ScratchInterleaved = true
	seq, scratch, err := codegen.RowsSplit(probe, 0xD0000)
	if err != nil {
		return nil, l.notLowered(n, "%v", err)
	}
	if len(seq) == 1 {
		return []*prog.Kernel{kern}, nil
	}
	var buf *prog.Buffer
	out := make([]*prog.Kernel, len(seq))
	for i := range seq {
		q := seq[i]
		k := &prog.Kernel{What: fmt.Sprintf("%s.%d", kern.What, i+1), Params: &q}
		for _, f := range kern.Fixes {
			var field *uint32
			switch f.Field {
			case &p.X:
				field = &q.X
			case &p.Y:
				field = &q.Y
			case &p.Scale:
				field = &q.Scale
			case &p.Bias:
				field = &q.Bias
			case &p.Mean:
				field = &q.Mean
			case &p.InvStdDev:
				field = &q.InvStdDev
			default:
				return nil, l.stepErr("internal error: unknown field of a row kernel")
			}
			k.Fixes = append(k.Fixes, prog.Fix{Field: field, Ref: f.Ref, Write: f.Write})
		}
		if buf == nil {
			// One scratch per step, over the input's tiles.
			if l.scratch == nil || l.scratchStep != l.step {
				l.scratch = l.out.NewBuffer(kern.What+".partials", kern.Fixes[0].Ref.Buf.Tiles, scratch, 16, prog.Interleaved)
				l.scratchStep = l.step
			}
			buf = l.scratch
			buf.Size = max(buf.Size, uint32(scratch+15)&^15)
		}
		k.Fixes = append(k.Fixes, prog.Fix{Field: &q.Scratch, Ref: prog.Ref{Buf: buf}, Write: true})
		out[i] = k
	}
	return out, nil
}
