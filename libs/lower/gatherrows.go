package lower

// Gather by indices computed at run time: each tile holding a column
// block of every table row looks the indices up itself
// (codegen.RowGather). The indices are int32 on the device (int64 ones
// narrowed by the host); an index outside the table faults the device.

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

func (l *lowerer) gatherRows(st *plan.Step, n *graph.Node, g *graph.Gather) error {
	ins, outs, err := l.ioTensors(st, n)
	if err != nil {
		return err
	}
	x, ix, y := ins[0], ins[1], outs[0]
	if x == nil || ix == nil {
		return l.stepErr("the table and the indices need tensors")
	}
	if g.Axis != 0 || len(x.Shape) < 1 || len(x.Shape) > 2 {
		return l.notLowered(n, "indices computed at run time select rows (axis 0) of a table of rank 1 or 2")
	}
	if dt := n.Inputs[1].DType; dt != onnx.Int64 && dt != onnx.Int32 {
		return l.notLowered(n, "input 1 (%q): indices of type %s", n.Inputs[1].Name, elemType(dt))
	}
	for _, t := range []*layout.Tensor{x, ix, y} {
		if t.Kind != layout.RowMajor || t.Transposed {
			return l.stepErr("tensor %d (%q) is %s, want row-major", t.ID, t.Name, t.Kind)
		}
	}
	rows := x.Shape[0]
	nIdx := ix.Elements()
	xRefs, err := l.read(x)
	if err != nil {
		return err
	}
	iRefs, err := l.read(ix)
	if err != nil {
		return err
	}
	yRefs, err := l.write(y)
	if err != nil {
		return err
	}
	l.acc[n.Outputs[0].Index] = l.acc[n.Inputs[0].Index]
	s := l.compute(n.Name)
	full := layout.Full(ix.Shape)
	for i, p := range y.Pieces {
		// The column block this piece holds, every index.
		c0, c1 := 0, 1
		if len(x.Shape) == 2 {
			r := len(p.Box) - 1
			c0, c1 = p.Box[r].Lo, p.Box[r].Hi
		}
		for d := 0; d < len(p.Box)-(len(x.Shape)-1); d++ {
			if p.Box[d].Lo != 0 || p.Box[d].Hi != y.Shape[d] {
				return l.stepErr("output piece %d on tile %d does not hold every index", i, p.Tile)
			}
		}
		tb := layout.Box{{Lo: 0, Hi: rows}}
		if len(x.Shape) == 2 {
			tb = append(tb, layout.Range{Lo: c0, Hi: c1})
		}
		xi := pieceOn(x, p.Tile, tb)
		ii := pieceOn(ix, p.Tile, full)
		if xi < 0 {
			return l.stepErr("tensor %d (%q) has no piece %s on tile %d, which the output's piece there reads", x.ID, x.Name, tb, p.Tile)
		}
		if ii < 0 {
			return l.stepErr("tensor %d (%q) is not whole on tile %d, which looks rows up", ix.ID, ix.Name, p.Tile)
		}
		if ig := ix.Geometry(ii); len(ix.Shape) > 1 && ig.Pitch != ix.Shape[len(ix.Shape)-1] {
			return l.stepErr("tensor %d (%q): the indices on tile %d are not dense (pitch %d)", ix.ID, ix.Name, p.Tile, ig.Pitch)
		}
		xg, yg := x.Geometry(xi), y.Geometry(i)
		xPitch, yPitch := xg.Pitch, yg.Pitch
		if len(x.Shape) == 1 {
			xPitch, yPitch = 1, 1
		}
		if xPitch*x.Size%4 != 0 || yPitch*y.Size%4 != 0 {
			return l.notLowered(n, "rows of %d-byte elements at pitches %d and %d are not whole 32-bit words", x.Size, xPitch, yPitch)
		}
		w := ((c1-c0)*x.Size + 3) / 4
		k := &codegen.RowGather{N: nIdx, W: w, Rows: rows, XStride: xPitch * x.Size / 4, YStride: yPitch * y.Size / 4, Workers: codegen.Slots}
		kk := &prog.Kernel{What: n.Name + ".rows", Params: k, Fixes: []prog.Fix{
			{Field: &k.Idx, Ref: iRefs[ii]}, {Field: &k.X, Ref: xRefs[xi]}, {Field: &k.Y, Ref: yRefs[i], Write: true}}}
		if _, err := kk.Cost(); err != nil {
			return l.notLowered(n, "on tile %d: %v", p.Tile, err)
		}
		s.Work[p.Tile] = append(s.Work[p.Tile], kk)
	}
	return nil
}
