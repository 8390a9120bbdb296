package lower

// Pack steps: a row-major tensor of a value into a product's panel
// blocks, converting the element type and transposing the matrix on the
// way. The output tensor holds a value that the input's value becomes
// through one cast and transposes of the last two axes (a product
// operand's chain). Each source piece must start its group axis on a
// group boundary of the panel kind. Per source piece and batch index:
// the part a block on the same tile needs is packed straight into that
// block; for the blocks on other tiles, the piece is packed once into a
// staging panel on its tile and the panel's group runs travel in the
// exchange.

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// packChain follows w back to v through casts and transposes of the last
// two axes: the number of transposes, the cast node that rounds (nil:
// none), and ok false when w is not v so transformed.
func packChain(v, w *graph.Value) (flips int, cast *graph.Node, ok bool) {
	for w != v {
		n := w.Producer
		if n == nil {
			return 0, nil, false
		}
		switch a := n.Attrs.(type) {
		case *graph.Cast:
			in := n.Inputs[0]
			widening := a.To == onnx.Float || a.To == onnx.Float16 && isFP8(in.DType)
			if !widening {
				if cast != nil {
					return 0, nil, false // two roundings: the pack makes one
				}
				cast = n
			}
		case *graph.Transpose:
			r := len(a.Perm)
			if r < 2 || a.Perm[r-1] != r-2 || a.Perm[r-2] != r-1 {
				return 0, nil, false
			}
			for i := 0; i < r-2; i++ {
				if a.Perm[i] != i {
					return 0, nil, false
				}
			}
			flips++
		default:
			return 0, nil, false
		}
		w = n.Inputs[0]
	}
	return flips, cast, true
}

func (l *lowerer) pack(st *plan.Step) error {
	if len(st.Inputs) != 1 || len(st.Outputs) != 1 {
		return l.stepErr("a pack reads one tensor and writes one")
	}
	x, err := l.tensor(st.Inputs[0], nil, "input")
	if err != nil {
		return err
	}
	y, err := l.tensor(st.Outputs[0], nil, "output")
	if err != nil {
		return err
	}
	v, w := l.g.Values[x.Value], l.g.Values[y.Value]
	if x.Kind != layout.RowMajor || x.Transposed || y.Kind == layout.RowMajor {
		return l.stepErr("a pack reads a row-major tensor (tensor %d is %s) and writes panels (tensor %d is %s)", x.ID, x.Kind, y.ID, y.Kind)
	}
	flips, cast, ok := packChain(v, w)
	if !ok {
		return l.stepErr("tensor %d holds %q, which is not %q (tensor %d) through one cast and transposes of the last two axes", y.ID, w.Name, v.Name, x.ID)
	}
	transp := (flips%2 == 1) != y.Transposed
	out, ok := ampType(w.DType)
	if !ok {
		return l.notLowered(nil, "a pack into %s panels", w.DType)
	}
	if v.DType != onnx.Float && v.DType != onnx.Float16 {
		return l.notLowered(nil, "a pack from %s (float or float16)", v.DType)
	}
	var fp8 codegen.FP8Config
	if out == codegen.AMPFP8 {
		fp8.FormatA, _ = graph.FP8Format(w.DType)
		if cast != nil {
			fp8.NaNOnOverflow = !cast.Attrs.(*graph.Cast).Saturate
		}
	}
	kind := codegen.APanel
	if y.Kind == layout.BPanel {
		kind = codegen.BPanel
	}
	base := codegen.Pack{Kind: kind, Transpose: transp, Out: out, FP8: fp8, InF16: v.DType == onnx.Float16, Workers: codegen.Slots}
	xRefs, err := l.read(x)
	if err != nil {
		return err
	}
	yRefs, err := l.write(y)
	if err != nil {
		return err
	}
	if err := l.packPieces(st, x, y, xRefs, yRefs, base, transp); err != nil {
		return err
	}
	acc := l.acc[v.Index]
	if cast != nil {
		if w.DType == onnx.Float16 {
			acc += F16Rounding
		} else {
			acc++
		}
	}
	l.acc[w.Index] = acc
	return nil
}

// panelRuns are the runs of one source panel into the blocks of y it
// meets, kept for the last block: the copies of a replicated operand
// (consecutive pieces of y with one box, on other tiles) take the same
// runs, which are computed once.
type panelRuns struct {
	box  layout.Box
	have bool
	buf  []layout.Run
}

// reset forgets the runs kept: the next source panel starts.
func (m *panelRuns) reset() { m.have = false }

// runs returns the runs of source panel sg into y's piece j, whose
// intersection with the panel is inter (valid until the next call).
func (m *panelRuns) runs(sg layout.Geometry, y *layout.Tensor, j int, inter layout.Box) []layout.Run {
	if b := y.Pieces[j].Box; !m.have || !b.Equal(m.box) {
		m.buf = layout.AppendPanelRuns(m.buf[:0], sg, y.Geometry(j), inter)
		m.box, m.have = b, true
	}
	return m.buf
}

// stagePiece is a source piece's staging panel: its geometry and its
// offset in the staging buffer.
type stagePiece struct {
	geo layout.Geometry
	off int
}

// packJob is a pack step as packPieces lowers it: x's pieces packed
// into y's blocks (gAx the group axis, w its group), each source piece's
// box in y's coordinates (vbox), its staging panel, whether another tile
// needs it and where it is packed when that is its own block (direct).
type packJob struct {
	x, y         *layout.Tensor
	xRefs, yRefs []prog.Ref
	base         codegen.Pack
	transp       bool
	gAx, w, esz  int
	vbox         []layout.Box
	ix           map[int][]int // y's pieces by tile
	stage        []stagePiece
	needed       []bool
	direct       []prog.Ref
	stageBuf     *prog.Buffer
	m            *moves
	s            *prog.Superstep
}

// packPieces emits the packs and transfers of a pack step.
func (l *lowerer) packPieces(st *plan.Step, x, y *layout.Tensor, xRefs, yRefs []prog.Ref, base codegen.Pack, transp bool) error {
	r := len(x.Shape)
	j := &packJob{x: x, y: y, xRefs: xRefs, yRefs: yRefs, base: base, transp: transp, gAx: r - 2, w: layout.AGroup, esz: y.Size,
		stage: make([]stagePiece, len(x.Pieces)), needed: make([]bool, len(x.Pieces)), vbox: make([]layout.Box, len(x.Pieces)), ix: map[int][]int{}}
	if y.Kind == layout.BPanel {
		j.gAx, j.w = r-1, layout.BGroup
	}
	for k, p := range y.Pieces {
		j.ix[p.Tile] = append(j.ix[p.Tile], k)
	}
	// Per source piece: the operand box it holds, in y's coordinates.
	for i, p := range x.Pieces {
		b := p.Box.Clone()
		if transp {
			b[r-2], b[r-1] = b[r-1], b[r-2]
		}
		if b[j.gAx].Lo%j.w != 0 {
			return l.stepErr("input tensor %d (%q): piece %s on tile %d starts its %s groups at %d, not a multiple of %d", x.ID, x.Name, p.Box, p.Tile, y.Kind, b[j.gAx].Lo, j.w)
		}
		j.vbox[i] = b
	}
	j.m = newMoves()
	j.s = l.compute("pack:" + y.Name)
	if err := l.packTransfers(j); err != nil {
		return err
	}
	if err := l.packLocalParts(j); err != nil {
		return err
	}
	for k := range y.Pieces {
		l.zeroKPad(j.m, y.Name, y, k, yRefs[k])
	}
	if len(j.m.xfers) > 0 || len(j.m.copies) > 0 {
		l.exchange("operands:"+y.Name, j.m)
	}
	return nil
}

// packTransfers adds the transfers of the source pieces' parts that
// other tiles' blocks hold, each source panel packed into its own block
// when that is where it is sent from (directPanels), else into a staging
// buffer on its tile. The transfers go straight into the moves, their
// sources at their staging offsets; the staging buffer, sized once every
// piece is known, is filled in after.
func (l *lowerer) packTransfers(j *packJob) error {
	x, y := j.x, j.y
	yix := layout.NewIndex(y.Pieces)
	// The transfers counted first: a wide operand's are many, and
	// growing them was most of this step's lowering.
	n := 0
	var memo panelRuns
	for i, p := range x.Pieces {
		j.stage[i].geo = y.GeometryOf(j.vbox[i])
		memo.reset()
		yix.Each(j.vbox[i], func(k int, inter layout.Box) {
			if y.Pieces[k].Tile != p.Tile {
				n += len(memo.runs(j.stage[i].geo, y, k, inter))
			}
		})
	}
	j.m.reserve(n)
	j.direct = l.directPanels(x, y, j.yRefs, j.vbox, j.ix, j.stage, j.esz)
	stageBytes := map[int]int{}
	var sendTiles []int
	for i, p := range x.Pieces {
		vg := j.stage[i].geo
		off := stageBytes[p.Tile] // the piece's staging offset, if it sends
		from := prog.Ref{Off: uint32(off)}
		if j.direct[i].Buf != nil {
			from = j.direct[i]
		}
		var rerr error
		memo.reset()
		yix.Each(j.vbox[i], func(k int, inter layout.Box) {
			q := y.Pieces[k]
			if rerr != nil || q.Tile == p.Tile {
				return // a tile's own part is packed or copied into its block below
			}
			j.needed[i] = true
			for _, ru := range memo.runs(vg, y, k, inter) {
				bytes := ru.N * j.esz
				to := j.yRefs[k].Add(ru.DstOff * j.esz)
				if bytes%4 != 0 || (ru.SrcOff*j.esz)%4 != 0 || to.Off%4 != 0 {
					rerr = l.notLowered(nil, "a run of %d %s elements of %q is not whole aligned 32-bit words", ru.N, y.Kind, y.Name)
					return
				}
				j.m.xfers = append(j.m.xfers, prog.Transfer{Src: p.Tile, Dst: q.Tile, DstN: 1, Words: bytes / 4,
					From: from.Add(ru.SrcOff * j.esz), To: to})
			}
		})
		if rerr != nil {
			return rerr
		}
		if j.needed[i] && j.direct[i].Buf != nil {
			// Packed into its own block, sent from there.
			if err := l.packRect(j.s, y.Name+".pack", p.Tile, x, i, j.xRefs[i], j.vbox[i], j.direct[i], vg, j.base, j.transp); err != nil {
				return err
			}
			continue
		}
		if j.needed[i] {
			j.stage[i].off = off
			stageBytes[p.Tile] += vg.Bytes()
			sendTiles = append(sendTiles, p.Tile)
		}
	}
	if len(sendTiles) == 0 {
		return nil
	}
	most := 0
	for _, b := range stageBytes {
		most = max(most, b)
	}
	buf := l.out.NewBuffer(y.Name+".staged", prog.TileSet(sendTiles), most, 8, prog.AnyRegion)
	j.stageBuf = buf
	for k := range j.m.xfers {
		if j.m.xfers[k].From.Buf == nil {
			j.m.xfers[k].From.Buf = buf
		}
	}
	for i, p := range x.Pieces {
		if !j.needed[i] || j.direct[i].Buf != nil {
			continue
		}
		if err := l.packRect(j.s, y.Name+".pack", p.Tile, x, i, j.xRefs[i], j.vbox[i], prog.Ref{Buf: buf, Off: uint32(j.stage[i].off)}, j.stage[i].geo, j.base, j.transp); err != nil {
			return err
		}
	}
	return nil
}

// packLocalParts fills each tile's blocks with the parts its own source
// pieces hold: copied from the staging panel when the piece is staged
// anyway, else packed straight into the blocks.
func (l *lowerer) packLocalParts(j *packJob) error {
	x, y := j.x, j.y
	for i, p := range x.Pieces {
		for _, k := range j.ix[p.Tile] {
			q := y.Pieces[k]
			inter, ok := layout.Intersect(j.vbox[i], q.Box)
			if !ok {
				continue
			}
			dg := y.Geometry(k)
			if j.needed[i] && j.direct[i].Buf != nil {
				continue // packed there
			}
			if j.needed[i] {
				for _, ru := range layout.PanelRunsOf(j.stage[i].geo, dg, inter) {
					bytes := ru.N * j.esz
					if bytes%4 != 0 || (ru.SrcOff*j.esz)%4 != 0 || (ru.DstOff*j.esz)%4 != 0 {
						return l.notLowered(nil, "a run of %d %s elements of %q is not whole aligned 32-bit words", ru.N, y.Kind, y.Name)
					}
					cp := &codegen.Copy{R: 1, W: bytes / 4, XStride: bytes / 4, YStride: bytes / 4, Workers: codegen.Slots}
					j.m.copies[p.Tile] = append(j.m.copies[p.Tile], &prog.Kernel{What: y.Name + ".copy-local", Params: cp, Fixes: []prog.Fix{
						{Field: &cp.X, Ref: prog.Ref{Buf: j.stageBuf, Off: uint32(j.stage[i].off + ru.SrcOff*j.esz)}}, {Field: &cp.Y, Ref: j.yRefs[k].Add(ru.DstOff * j.esz), Write: true}}})
				}
				continue
			}
			if err := l.packLocal(j.s, y.Name+".pack-local", p.Tile, x, i, j.xRefs[i], inter, j.yRefs[k], dg, j.base, j.transp, j.gAx, j.w); err != nil {
				return err
			}
		}
	}
	return nil
}

// directPanels returns, per source piece, where its panel is packed when
// that is its tile's own block of y: the piece lies in one block of y
// on its tile, wholly, and its panel is one run of that block (the same
// elements in the same order, padding included), 8-byte aligned. The
// panel is then packed there and sent from there, with no staging copy
// and no local copy after the exchange. Elsewhere the Ref is zero, and
// everywhere when the plan's packs stage (plan.StagedPacks: the blocks
// then live from the exchange on, which a tile short of room may need).
func (l *lowerer) directPanels(x, y *layout.Tensor, yRefs []prog.Ref, vbox []layout.Box, ix map[int][]int, stage []stagePiece, esz int) []prog.Ref {
	direct := make([]prog.Ref, len(x.Pieces))
	if l.pl.Packs == plan.StagedPacks {
		return direct
	}
	for i, p := range x.Pieces {
		at := -1
		for _, j := range ix[p.Tile] {
			if _, ok := layout.Intersect(vbox[i], y.Pieces[j].Box); !ok {
				continue
			}
			if at >= 0 {
				at = -1
				break
			}
			at = j
		}
		if at < 0 || !y.Pieces[at].Box.Contains(vbox[i]) {
			continue
		}
		runs := layout.PanelRunsOf(stage[i].geo, y.Geometry(at), vbox[i])
		if len(runs) != 1 || runs[0].SrcOff != 0 || runs[0].N != stage[i].geo.Elems || (runs[0].DstOff*esz)%8 != 0 {
			continue
		}
		direct[i] = yRefs[at].Add(runs[0].DstOff * esz)
	}
	return direct
}

// packRect packs the operand box vb of source piece i (all its batch
// indices) into a panel with geometry g at dst.
func (l *lowerer) packRect(s *prog.Superstep, what string, tile int, x *layout.Tensor, i int, xref prog.Ref, vb layout.Box, dst prog.Ref, g layout.Geometry, base codegen.Pack, transp bool) error {
	r := len(vb)
	outer := append(vb[:r-2].Clone(), layout.Range{Lo: 0, Hi: 1}, layout.Range{Lo: 0, Hi: 1})
	var err error
	eachIndex(outer, func(idx []int) {
		if err != nil {
			return
		}
		sub := append(layout.Box(nil), vb...)
		for d := 0; d < r-2; d++ {
			sub[d] = layout.Range{Lo: idx[d], Hi: idx[d] + 1}
		}
		err = l.packOne(s, what, tile, x, i, xref, sub, dst.Add(g.BatchOffset(idx[:r-2])*g.Size), g.KP, base, transp)
	})
	return err
}

// packOne emits one Pack of the operand rectangle sub (one batch index,
// in y's coordinates) of source piece i, writing a panel of KP k at dst.
func (l *lowerer) packOne(s *prog.Superstep, what string, tile int, x *layout.Tensor, i int, xref prog.Ref, sub layout.Box, dst prog.Ref, kp int, base codegen.Pack, transp bool) error {
	r := len(sub)
	xb := sub.Clone()
	if transp {
		xb[r-2], xb[r-1] = xb[r-1], xb[r-2]
	}
	xg := x.Geometry(i)
	lo := make([]int, r)
	for d := range lo {
		lo[d] = xb[d].Lo
	}
	p := base
	p.R, p.C = xb[r-2].Len(), xb[r-1].Len()
	p.XStride = xg.Pitch
	if r >= 2 {
		p.XStride = xg.Strides[r-2]
	}
	p.KP = kp
	if _, err := p.Cost(); err != nil && p.R == 1 {
		// One row: no row follows, so its pitch is never stepped; a pitch
		// the kernel refuses (a dense piece of an odd FP16 row length: a
		// flattened [N, C, 1, 1] pooling's rows) is rounded up to the
		// multiple of 4 it accepts in every orientation.
		p.XStride = (p.XStride + 3) &^ 3
	}
	k := &prog.Kernel{What: what, Params: &p, Fixes: []prog.Fix{
		{Field: &p.X, Ref: xref.Add(xg.Offset(lo) * x.Size)}, {Field: &p.Y, Ref: dst, Write: true}}}
	if _, err := k.Cost(); err != nil {
		return l.notLowered(nil, "%s on tile %d: %v", what, tile, err)
	}
	s.Work[tile] = append(s.Work[tile], k)
	return nil
}

// packLocal packs the intersection inter of a source piece and a block
// on the same tile straight into the block: per batch index, one pack
// of whole groups when the intersection spans the block's k range, else
// one pack per group (a group's k run is contiguous in the block).
func (l *lowerer) packLocal(s *prog.Superstep, what string, tile int, x *layout.Tensor, i int, xref prog.Ref, inter layout.Box, dst prog.Ref, dg layout.Geometry, base codegen.Pack, transp bool, gAx, w int) error {
	r := len(inter)
	kAx := r - 1
	if gAx == r-1 {
		kAx = r - 2
	}
	outer := append(inter[:r-2].Clone(), layout.Range{Lo: 0, Hi: 1}, layout.Range{Lo: 0, Hi: 1})
	var err error
	eachIndex(outer, func(idx []int) {
		if err != nil {
			return
		}
		sub := append(layout.Box(nil), inter...)
		for d := 0; d < r-2; d++ {
			sub[d] = layout.Range{Lo: idx[d], Hi: idx[d] + 1}
		}
		at := make([]int, r)
		for d := range at {
			at[d] = sub[d].Lo
		}
		if sub[kAx] == dg.Box[kAx] {
			err = l.packOne(s, what, tile, x, i, xref, sub, dst.Add(dg.Offset(at)*dg.Size), dg.KP, base, transp)
			return
		}
		for g := sub[gAx].Lo; g < sub[gAx].Hi && err == nil; g += w {
			one := sub.Clone()
			one[gAx] = layout.Range{Lo: g, Hi: min(g+w, sub[gAx].Hi)}
			at[gAx] = g
			err = l.packOne(s, what, tile, x, i, xref, one, dst.Add(dg.Offset(at)*dg.Size), sub[kAx].Len(), base, transp)
		}
	})
	return err
}

// zeroKPad zeroes the k padding of a panel piece (KP above its k extent)
// that runs between tiles filled: the product multiplies the padding
// lanes of A and B, so they must hold zeros. One copy of a zero word
// slice per group and batch index into m's local work.
func (l *lowerer) zeroKPad(m *moves, what string, t *layout.Tensor, i int, ref prog.Ref) {
	g := t.Geometry(i)
	r := len(g.Box)
	kAx, gAx, w := r-1, r-2, layout.AGroup
	if t.Kind == layout.BPanel {
		kAx, gAx, w = r-2, r-1, layout.BGroup
	}
	ext := g.Box[kAx].Len()
	if g.KP == ext {
		return
	}
	tile := t.Pieces[i].Tile
	words := w * t.Size * (g.KP - ext) / 4
	groups := g.GP / w
	zero := l.zeros(tile, 4*words)
	outer := append(g.Box[:r-2].Clone(), layout.Range{Lo: 0, Hi: 1}, layout.Range{Lo: 0, Hi: 1})
	eachIndex(outer, func(idx []int) {
		at := append(append([]int(nil), idx[:r-2]...), 0, 0)
		at[gAx], at[kAx] = g.Box[gAx].Lo, g.Box[kAx].Lo+ext
		off := g.BatchOffset(idx[:r-2]) + w*ext
		_ = at
		cp := &codegen.Copy{R: groups, W: words, XStride: 0, YStride: w * g.KP * t.Size / 4, Workers: codegen.Slots}
		m.copies[tile] = append(m.copies[tile], &prog.Kernel{What: what + ".zero-kpad", Params: cp, Fixes: []prog.Fix{
			{Field: &cp.X, Ref: prog.Ref{Buf: zero}}, {Field: &cp.Y, Ref: ref.Add(off * t.Size), Write: true}}})
	})
}

// zeros returns a buffer of at least n zero bytes on tile t: one buffer
// of constant zeros for the whole program, on every tile that asks.
// Lowering with a step cache, the ask is recorded for the step's
// fragment, which a replay makes again of its program's buffer (the
// buffer is the program's, not a step's: cache.go).
func (l *lowerer) zeros(t, n int) *prog.Buffer {
	if l.opt.Cache != nil {
		l.zeroAsks = append(l.zeroAsks, zeroAsk{t, n})
	}
	return l.zeroBuffer(t, n)
}

// zeroAsk is a step's ask of the program's zeros: n bytes on tile t.
type zeroAsk struct{ t, n int }

// zeroBuffer is zeros without recording the ask.
func (l *lowerer) zeroBuffer(t, n int) *prog.Buffer {
	if l.zero == nil {
		l.zero = l.out.NewBuffer("zeros", nil, 0, 16, prog.AnyRegion)
		l.zero.Permanent = true
		l.zero.Data = map[int][]byte{}
	}
	z := l.zero
	z.Size = max(z.Size, uint32(n+15)&^15)
	if _, ok := z.Data[t]; !ok {
		z.Tiles = append(z.Tiles, t)
		z.Data[t] = nil
	}
	return z
}

// finishZeros sizes the zero buffer's data once every tile has asked.
func (l *lowerer) finishZeros() {
	z := l.zero
	if z == nil {
		return
	}
	z.Tiles = prog.TileSet(z.Tiles)
	zero := make([]byte, z.Size) // read only: one slice for every tile
	for t := range z.Data {
		z.Data[t] = zero
	}
}
