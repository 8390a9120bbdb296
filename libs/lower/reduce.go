package lower

import (
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/prog"
)

// The reduce-scatter of a k split: each tile's part of its block (row
// parts, or row parts of column parts), where it lies in the C block,
// the exchange of the partial sums and their addition.

// colParts returns the column ranges (relative to N0) of tb's C block
// that are stored apart, each as a row-major block of its own padded
// width, one after the other: the column parts of a k split's
// reduce-scatter when it cuts the block's columns (so that every part is
// contiguous), else the whole width.
func colParts(s layout.Split, tb layout.TileBlock) []layout.Range {
	cols := tb.N1 - tb.N0
	gc := 1
	if s.GK > 1 {
		gc = s.ColParts(tb.M1-tb.M0, cols)
	}
	out := make([]layout.Range, gc)
	for h := range out {
		out[h].Lo, out[h].Hi = layout.AlignedBlock(cols, gc, h, layout.BGroup)
	}
	return out
}

// partPlace returns where tb's reduced part lies in its C block: the
// byte offset and the row pitch (elements). Column part [c0, c1) of the
// block is a row-major block of pitch Pad(c1-c0) at byte 4*mp*c0
// (colParts).
func partPlace(tb layout.TileBlock) (off, pitch int) {
	mp := layout.Pad(tb.M1-tb.M0, layout.AGroup)
	pitch = layout.Pad(tb.Q1-tb.Q0, layout.BGroup)
	return 4 * (mp*tb.Q0 + tb.P0*pitch), pitch
}

// reduceScatter adds the exchange and compute supersteps that sum a k
// split's partial products: tile (b, i, j, l) receives its part l of
// block (b, i, j) (PartBox: a row part, or a row part of a column part)
// from the other k blocks and adds them. It returns the
// compute superstep and, by tile and batch index, the last launch adding
// to each part (productResult may fuse the FP16 cast into it).
//
// The parts and the tile's own block are in interleaved memory at
// 16-byte aligned places (the C buffer's blocks and parts are multiples
// of 64 bytes: padded widths of 16 FP32 elements), so the sums run on
// 128-bit units (codegen.SumParts.Interleaved).
func (l *lowerer) reduceScatter(n *graph.Node, s layout.Split, blocks []layout.TileBlock, cBuf *prog.Buffer, blockBytes, partMax, nbMax int) (*prog.Superstep, map[[2]int]*prog.Kernel) {
	var tiles []int
	for _, tb := range blocks {
		tiles = append(tiles, tb.Tile)
	}
	slot := partMax * 4
	rb := l.out.NewBuffer(n.Name+".partials", tiles, nbMax*(s.GK-1)*slot, 16, prog.Interleaved)
	last := map[[2]int]*prog.Kernel{}
	m := newMoves()
	var adds []struct {
		tile int
		k    *prog.Kernel
	}
	byCoord := map[[4]int]layout.TileBlock{}
	for rel, tb := range blocks {
		b, i, j, lk := s.Coords(rel)
		byCoord[[4]int{b, i, j, lk}] = tb
	}
	for rel, tb := range blocks {
		b, i, j, lk := s.Coords(rel)
		if tb.P0 == tb.P1 {
			continue
		}
		at, pitch := partPlace(tb)
		words := (tb.P1 - tb.P0) * pitch
		for bi := tb.B0; bi < tb.B1; bi++ {
			k := 0
			for l2 := 0; l2 < s.GK; l2++ {
				if l2 == lk {
					continue
				}
				from := byCoord[[4]int{b, i, j, l2}]
				part := prog.Ref{Buf: cBuf, Off: uint32((bi-from.B0)*blockBytes + at)}
				dst := prog.Ref{Buf: rb, Off: uint32(((bi-tb.B0)*(s.GK-1) + k) * slot)}
				m.xfers = append(m.xfers, prog.Transfer{Src: from.Tile, Dst: tb.Tile, DstN: 1, Words: words, From: part, To: dst})
				k++
			}
			// The received parts, one slot apart, are added to the tile's
			// own in k order, as many per launch as a load's offset
			// reaches.
			own := prog.Ref{Buf: cBuf, Off: uint32((bi-tb.B0)*blockBytes + at)}
			perLaunch := max(1, 0x7FFF/slot+1)
			for k0 := 0; k0 < s.GK-1; k0 += perLaunch {
				parts := min(perLaunch, s.GK-1-k0)
				first := prog.Ref{Buf: rb, Off: uint32(((bi-tb.B0)*(s.GK-1) + k0) * slot)}
				p := &codegen.SumParts{N: words, Parts: parts, Stride: slot / 4, Workers: codegen.Slots, Interleaved: true}
				kk := &prog.Kernel{What: n.Name + ".reduce-add", Params: p, Fixes: []prog.Fix{
					{Field: &p.X, Ref: first}, {Field: &p.Y, Ref: own, Write: true}}}
				last[[2]int{tb.Tile, bi}] = kk
				adds = append(adds, struct {
					tile int
					k    *prog.Kernel
				}{tb.Tile, kk})
			}
		}
	}
	step := l.exchangeNamed("reduce:"+n.Name, "reduce-add:"+n.Name, m)
	for _, a := range adds {
		step.Work[a.tile] = append(step.Work[a.tile], a.k)
	}
	return step, last
}

// fuseCast makes the sum k write its result rounded to FP16 at y
// instead of its FP32 accumulator, which it then only reads.
func fuseCast(k *prog.Kernel, y prog.Ref) {
	p := k.Params.(*codegen.SumParts)
	for i := range k.Fixes {
		if k.Fixes[i].Field == &p.Y {
			k.Fixes[i].Write = false
		}
	}
	k.Fixes = append(k.Fixes, prog.Fix{Field: &p.Out, Ref: y, Write: true})
	k.ClearCost()
}
