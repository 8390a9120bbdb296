package lower

// Row operators whose rows are spread over tiles: each piece of the
// input holds rows' columns [c0, c1), the pieces of the same rows on
// different tiles (a group). Every tile runs codegen.TileSplit's three
// launches on its piece; after launches 1 and 2 an exchange superstep
// sends each tile's partials to the group's other tiles, at the same
// place of the step's scratch (one buffer, one address on every tile).

import (
	"encoding/binary"
	"fmt"

	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/numfmt"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// wholeRowPieces reports whether every piece of t holds whole rows of
// its last axes from axis on.
func wholeRowPieces(t *layout.Tensor, axis int) bool {
	for _, pc := range t.Pieces {
		for d := axis; d < len(t.Shape); d++ {
			if pc.Box[d].Lo != 0 || pc.Box[d].Hi != t.Shape[d] {
				return false
			}
		}
	}
	return true
}

// spreadRows returns the rows of a row-major piece spread over tiles: R
// rows of its columns, rows stride elements apart, or ok false when its
// leading axes do not merge into rows at one stride.
func spreadRows(g layout.Geometry) (R, stride int, ok bool) {
	r := len(g.Box)
	if g.Kind != layout.RowMajor || r == 0 || g.Strides[r-1] != 1 {
		return 0, 0, false
	}
	R, stride = 1, g.Pitch
	for d := r - 2; d >= 0; d-- {
		if n := g.Box[d].Len(); n > 1 {
			if R > 1 && g.Strides[d] != stride*R {
				return 0, 0, false
			}
			if R == 1 {
				stride = g.Strides[d]
			}
			R *= n
		}
	}
	return R, stride, true
}

// spreadPiece is one piece of a spread row operator's input.
type spreadPiece struct {
	i, yi, tile, R, xs, ys, c0, n int
	group                         string // the rows' box
}

// rowsSpread lowers a row operator (launch parameters p, without
// addresses) whose input x has pieces holding parts of rows along its
// last axis; y has the same pieces. LayerNorm's scale and bias are
// vecs, stored at vecRefs, or when f32Raw holds them (the FP16 data of
// constants; vecRefs unused) FP32 copies made here.
func (l *lowerer) rowsSpread(name string, p codegen.Rows, x, y *layout.Tensor, xRefs, yRefs []prog.Ref, vecs [2]*layout.Tensor, vecRefs [2][]prog.Ref, f32Raw [2][]byte) error {
	r := len(x.Shape)
	C := x.Shape[r-1]
	pcs, W, err := l.spreadPieces(x, y)
	if err != nil {
		return err
	}
	// The partials in interleaved memory: launches 2 and 3 load them four
	// at a time.
	p.ScratchInterleaved = true
	probe := p
	probe.C = C
	for _, sp := range pcs {
		if sp.n == W && sp.R >= probe.R {
			probe.R, probe.XStride, probe.YStride = sp.R, sp.xs, sp.ys
		}
	}
	L := codegen.TileChunkLen(probe, W)
	if L == 0 {
		return l.stepErr("input tensor %d (%q): rows of %d spread over tiles of %d columns: no chunk length for them", x.ID, x.Name, C, W)
	}
	var seqs [][]*prog.Kernel
	var params [][]*codegen.Rows
	var buf *prog.Buffer
	tiles := x.Tiles()
	f32 := f32Raw[0] != nil
	if f32 {
		vecRefs = l.spreadVecsF32(name, f32Raw, pcs)
	}
	for pi, sp := range pcs {
		ks, ps, err := l.spreadLaunches(name, p, sp, pi, f32, C, L, tiles, &buf, xRefs, yRefs, vecs, vecRefs)
		if err != nil {
			return err
		}
		seqs, params = append(seqs, ks), append(params, ps)
	}
	s := l.compute(name)
	for j := 0; j < 3; j++ {
		if j > 0 {
			m := newMoves()
			if err := l.partialMoves(m, pcs, params, j-1, buf); err != nil {
				return err
			}
			s = l.exchange(name, m)
		}
		for pi, sp := range pcs {
			s.Work[sp.tile] = append(s.Work[sp.tile], seqs[pi][j])
		}
	}
	return nil
}

// spreadLaunches returns the three launches of piece sp, number pi
// (rows of C columns in all, chunks of L) and their parameters, the
// scratch buffer over tiles made or grown in *buf; with f32, vecRefs
// are spreadVecsF32's, by piece.
func (l *lowerer) spreadLaunches(name string, p codegen.Rows, sp spreadPiece, pi int, f32 bool, C, L int, tiles []int, buf **prog.Buffer, xRefs, yRefs []prog.Ref, vecs [2]*layout.Tensor, vecRefs [2][]prog.Ref) ([]*prog.Kernel, []*codegen.Rows, error) {
	k := p
	k.R, k.C, k.XStride, k.YStride = sp.R, C, sp.xs, sp.ys
	fixes := []prog.Fix{{Field: &k.X, Ref: xRefs[sp.i]}, {Field: &k.Y, Ref: yRefs[sp.yi], Write: true}}
	// Made-up addresses for the checks; the fixes set the real ones.
	probe := k
	probe.X, probe.Y = 0x80000, 0xA0000
	for v, f := range []*uint32{&k.Scale, &k.Bias} {
		if vecs[v] == nil {
			continue
		}
		ref, ok := prog.Ref{}, true
		if f32 {
			ref = vecRefs[v][pi]
		} else {
			ref, ok = vecAt(vecs[v], vecRefs[v], sp.tile, sp.c0, sp.n)
		}
		if !ok {
			return nil, nil, l.stepErr("tensor %d (%q) has no piece of columns [%d, %d) on tile %d, where its rows' columns are", vecs[v].ID, vecs[v].Name, sp.c0, sp.c0+sp.n, sp.tile)
		}
		fixes = append(fixes, prog.Fix{Field: f, Ref: ref})
		if v == 0 {
			probe.Scale = 0xC0000
		} else {
			probe.Bias = 0xC4000
		}
	}
	seq, bytes, err := codegen.TileSplit(probe, L, sp.c0, sp.n, 0xD0000)
	if err != nil {
		return nil, nil, l.stepErr("on tile %d: %v", sp.tile, err)
	}
	if *buf == nil {
		*buf = l.out.NewBuffer(name+".partials", tiles, bytes, 16, prog.Interleaved)
	}
	(*buf).Size = max((*buf).Size, uint32(bytes+15)&^15)
	var ks []*prog.Kernel
	var ps []*codegen.Rows
	for j := range seq {
		q := seq[j]
		kern := &prog.Kernel{What: fmt.Sprintf("%s.%d", name, j+1), Params: &q}
		for _, f := range fixes {
			kern.Fixes = append(kern.Fixes, prog.Fix{Field: rowsField(&k, &q, f.Field), Ref: f.Ref, Write: f.Write})
		}
		kern.Fixes = append(kern.Fixes, prog.Fix{Field: &q.Scratch, Ref: prog.Ref{Buf: *buf}, Write: true})
		if _, err := kern.Cost(); err != nil {
			return nil, nil, l.stepErr("on tile %d: %v", sp.tile, err)
		}
		ks, ps = append(ks, kern), append(ps, &q)
	}
	return ks, ps, nil
}

// fp16ConstVecs returns LayerNormalization node n's scale and bias data
// (nil for a bias it has not) when they are FP16 constants of the
// normalised shape's one axis of C elements, else nils (the vectors are
// then read as the plan stores them, and any other shape is refused
// there).
func fp16ConstVecs(n *graph.Node, C int) (raw [2][]byte) {
	if len(n.Inputs) < 2 || n.Inputs[1] == nil {
		return raw
	}
	for k := 1; k < 3 && k < len(n.Inputs); k++ {
		v := n.Inputs[k]
		if v == nil {
			continue
		}
		if v.DType != onnx.Float16 || v.Const == nil || len(v.Shape) != 1 || v.Shape[0] != int64(C) || len(v.Const.Raw) != 2*C {
			return [2][]byte{}
		}
		raw[k-1] = v.Const.Raw
	}
	return raw
}

// spreadVecsF32 returns LayerNormalization's scale and bias (FP16
// constants, fp16ConstVecs) as FP32 copies of each spread piece's
// columns on its tile, by piece: launch 3 then loads a pair of each with
// one ld64 instead of an ld32 and a conversion (16 issues per four
// elements instead of 20). The conversion is exact, so the results are
// the same bits.
func (l *lowerer) spreadVecsF32(name string, raws [2][]byte, pcs []spreadPiece) (refs [2][]prog.Ref) {
	var tiles []int
	most := 0
	for _, sp := range pcs {
		tiles = append(tiles, sp.tile)
		most = max(most, 4*sp.n)
	}
	tiles = prog.TileSet(tiles)
	for v, suffix := range []string{".scale32", ".bias32"} {
		raw := raws[v]
		if raw == nil {
			continue
		}
		buf := l.out.NewBuffer(name+suffix, tiles, most, 16, prog.AnyRegion)
		buf.Permanent = true
		if !l.opt.NoData {
			buf.Data = map[int][]byte{}
		}
		refs[v] = make([]prog.Ref, len(pcs))
		made := map[[2]int][]byte{} // by columns: the groups' tiles share a copy
		for i, sp := range pcs {
			refs[v][i] = prog.Ref{Buf: buf}
			if buf.Data == nil {
				continue
			}
			b, ok := made[[2]int{sp.c0, sp.n}]
			if !ok {
				b = make([]byte, buf.Size) // a shorter piece's copy padded with zeros
				for j := range sp.n {
					h := binary.LittleEndian.Uint16(raw[2*(sp.c0+j):])
					binary.LittleEndian.PutUint32(b[4*j:], numfmt.F16ToF32(h))
				}
				made[[2]int{sp.c0, sp.n}] = b
			}
			buf.Data[sp.tile] = b
		}
	}
	return refs
}

// rowsField maps a field of k to the same field of q.
func rowsField(k, q *codegen.Rows, f *uint32) *uint32 {
	switch f {
	case &k.X:
		return &q.X
	case &k.Y:
		return &q.Y
	case &k.Scale:
		return &q.Scale
	}
	return &q.Bias
}

// vecAt returns where columns [c0, c0+n) of a vector tensor lie on tile
// t: a piece of exactly them, or a piece holding the whole vector.
func vecAt(t *layout.Tensor, refs []prog.Ref, tile, c0, n int) (prog.Ref, bool) {
	if j := pieceOn(t, tile, layout.Box{{Lo: c0, Hi: c0 + n}}); j >= 0 {
		return refs[j], true
	}
	if j := pieceOn(t, tile, layout.Full(t.Shape)); j >= 0 {
		return refs[j].Add(c0 * t.Size), true
	}
	return prog.Ref{}, false
}

// spreadPieces checks the pieces of a spread row operator's input x and
// output y and returns them with the width W of their column blocks:
// one piece per tile, each holding columns [c0, c0+W) of its rows with
// c0 a multiple of W (fewer at the rows' end), y's piece on the same
// tile holding the same box.
func (l *lowerer) spreadPieces(x, y *layout.Tensor) ([]spreadPiece, int, error) {
	r := len(x.Shape)
	C := x.Shape[r-1]
	var out []spreadPiece
	W := 0
	seen := map[int]bool{}
	for i, pc := range x.Pieces {
		if seen[pc.Tile] {
			return nil, 0, l.stepErr("input tensor %d (%q): tile %d holds two pieces of rows spread over tiles", x.ID, x.Name, pc.Tile)
		}
		seen[pc.Tile] = true
		R, xs, ok := spreadRows(x.Geometry(i))
		yi := pieceOn(y, pc.Tile, pc.Box)
		ys := 0
		if yi >= 0 {
			_, ys, _ = spreadRows(y.Geometry(yi))
		}
		if !ok || yi < 0 || ys == 0 {
			return nil, 0, l.stepErr("input tensor %d (%q): piece %s on tile %d: want rows at one stride and the same piece of output tensor %d", x.ID, x.Name, pc.Box, pc.Tile, y.ID)
		}
		sp := spreadPiece{i: i, yi: yi, tile: pc.Tile, R: R, xs: xs, ys: ys, c0: pc.Box[r-1].Lo, n: pc.Box[r-1].Len(), group: pc.Box[:r-1].String()}
		W = max(W, sp.n)
		out = append(out, sp)
	}
	for _, sp := range out {
		if sp.c0%W != 0 || sp.n != W && sp.c0+sp.n != C {
			return nil, 0, l.stepErr("input tensor %d (%q): piece %s on tile %d: want columns in blocks of %d", x.ID, x.Name, x.Pieces[sp.i].Box, sp.tile, W)
		}
	}
	return out, W, nil
}

// partialMoves adds to m the transfers of launch j's partials (j = 0 or
// 1): each piece's to every other tile of its rows.
func (l *lowerer) partialMoves(m *moves, pcs []spreadPiece, params [][]*codegen.Rows, j int, buf *prog.Buffer) error {
	byGroup := map[string][]int{}
	var order []string
	for k, sp := range pcs {
		if _, ok := byGroup[sp.group]; !ok {
			order = append(order, sp.group)
		}
		byGroup[sp.group] = append(byGroup[sp.group], k)
	}
	for _, g := range order {
		for _, a := range byGroup[g] {
			ranges, err := params[a][j].TilePartials()
			if err != nil {
				return l.stepErr("%v", err)
			}
			for _, b := range byGroup[g] {
				if b == a {
					continue
				}
				for _, rg := range ranges {
					ref := prog.Ref{Buf: buf, Off: rg[0]}
					m.xfers = append(m.xfers, prog.Transfer{Src: pcs[a].tile, Dst: pcs[b].tile, Words: int(rg[1]-rg[0]) / 4, From: ref, To: ref})
				}
			}
		}
	}
	return nil
}
