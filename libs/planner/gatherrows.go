package planner

// A Gather whose indices are computed at run time (token ids from the
// host): the table [V, D] is split by columns, each tile holding every
// row of its columns, so that it looks up any index on its own
// (codegen.RowGather); the indices are copied whole to those tiles and
// the output [indices..., D] keeps the table's column split.

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

// tableTileBytes bounds a tile's share of a looked-up table.
const tableTileBytes = 192 << 10

// minTableColumns is the narrowest column block worth a tile of its own
// when the table fits on fewer.
const minTableColumns = 32

func (b *builder) gatherRows(n *graph.Node) error {
	data, idx, y := n.Inputs[0], n.Inputs[1], n.Outputs[0]
	if ax := n.Attrs.(*graph.Gather).Axis; ax != 0 {
		return &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: "indices computed at run time select along axis 0 only"}
	}
	if r := len(data.Shape); r < 1 || r > 2 {
		return &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: "indices computed at run time select rows of a table of rank 1 or 2"}
	}
	size := lower.DeviceSize(data.DType)
	pad := layout.DefaultPad(size)
	ds := shapeOf(data)
	rows, cols := ds[0], 1
	if len(ds) == 2 {
		cols = ds[1]
	}
	if size*cols%4 != 0 && cols > pad {
		return &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: "table rows are not whole 32-bit words"}
	}
	// Column blocks: aligned on pad, as few as memory allows but spread
	// when the rows are wide.
	blocks := 1
	if len(ds) == 2 {
		most := (cols + pad - 1) / pad
		need := (rows*cols*size + tableTileBytes - 1) / tableTileBytes
		blocks = min(b.pl.tiles, most, max(need, (cols+minTableColumns-1)/minTableColumns))
	}
	per := (cols + pad - 1) / pad
	lo := b.anchor(idx)
	if lo+blocks > b.pl.tiles {
		lo = b.pl.tiles - blocks
	}
	var tab, ins, outs []layout.Piece
	ys := shapeOf(y)
	for k := 0; k < blocks; k++ {
		c0, c1 := pad*(per*k/blocks), min(cols, pad*(per*(k+1)/blocks))
		if c0 >= c1 {
			continue
		}
		t := lo + k
		tb := layout.Full(ds)
		ob := layout.Full(ys)
		if len(ds) == 2 {
			tb[1] = layout.Range{Lo: c0, Hi: c1}
			ob[len(ob)-1] = layout.Range{Lo: c0, Hi: c1}
		}
		tab = append(tab, layout.Piece{Tile: t, Box: tb})
		ins = append(ins, layout.Piece{Tile: t, Box: layout.Full(shapeOf(idx))})
		outs = append(outs, layout.Piece{Tile: t, Box: ob})
	}
	tid, err := b.need(data, tab, pad)
	if err != nil {
		return err
	}
	// The indices dense (pad 1): the kernel reads them as one array.
	iid, err := b.needDense(idx, ins)
	if err != nil {
		return err
	}
	yt := b.add(y, layout.RowMajor, pad, layout.FromStep, false, outs)
	b.home[y.Index] = yt.ID
	b.steps = append(b.steps, plan.Step{Node: n.Index, Name: n.Name, Kernel: "gather_rows", Inputs: []int{tid, iid}, Outputs: []int{yt.ID}})
	return nil
}
