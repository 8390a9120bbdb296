package link

import (
	"fmt"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/cost"
	"ipu.local/libs/graph"
	"ipu.local/libs/isa"
	"ipu.local/libs/onnx"
	"ipu.local/libs/planner"
	"ipu.local/libs/sched"
)

func hsync() isa.Inst    { return isa.Inst{Op: isa.HSYNC, D: uint8(codegen.M0)} }
func syncInst() isa.Inst { return isa.Inst{Op: isa.SYNC} }

// hostInst is hin $m1, $m2, $m3 (tile address, host address, bytes) or
// hout $m2, $m1, $m3.
func hostInst(in bool) isa.Inst {
	if in {
		return isa.Inst{Op: isa.HIN, D: uint8(codegen.M1), A: uint8(codegen.M2), B: uint8(codegen.M3)}
	}
	return isa.Inst{Op: isa.HOUT, D: uint8(codegen.M2), A: uint8(codegen.M1), B: uint8(codegen.M3)}
}

func pad(n, m int) int { return (n + m - 1) / m * m }

// panel is a block of a product operand in a panel layout: the group
// axis (A rows, B columns) [g0, g1) padded to gp, the k axis [k0, k1)
// padded to kp; w is the group width (4 or 16).
type panel struct {
	a              bool
	g0, g1, k0, k1 int
	gp, kp         int
}

func (p panel) w() int {
	if p.a {
		return cost.RowAlign
	}
	return cost.ColAlign
}

// elems is the panel's element count, padding included.
func (p panel) elems() int { return p.gp * p.kp }

// index is the element index of (g, k).
func (p panel) index(g, k int) int {
	w := p.w()
	return (g-p.g0)/w*w*p.kp + w*(k-p.k0) + (g-p.g0)%w
}

// block is the host tensor block of the panel over the operand matrix
// (the root, transposed when t).
func (p panel) block(off uint32, t bool) obj.Block {
	if p.a {
		return obj.Block{Offset: off, R0: uint32(p.g0), R1: uint32(p.g1), C0: uint32(p.k0), C1: uint32(p.k1),
			Rows: uint32(p.gp), Cols: uint32(p.kp), Transpose: t, Order: obj.APanel}
	}
	return obj.Block{Offset: off, R0: uint32(p.k0), R1: uint32(p.k1), C0: uint32(p.g0), C1: uint32(p.g1),
		Rows: uint32(p.kp), Cols: uint32(p.gp), Transpose: t, Order: obj.BPanel}
}

// run is a contiguous stretch of elements from one panel to another.
type run struct{ src, dst, n int }

// runs returns the runs that bring the intersection of s and d from s
// to d: a run per group, merged where both sides are contiguous.
func runs(s, d panel) []run {
	g0, g1 := max(s.g0, d.g0), min(s.g1, d.g1)
	k0, k1 := max(s.k0, d.k0), min(s.k1, d.k1)
	if g0 >= g1 || k0 >= k1 {
		return nil
	}
	w := s.w()
	var out []run
	for g := g0; g < g1; g += w {
		r := run{s.index(g, k0), d.index(g, k0), w * (k1 - k0)}
		if n := len(out); n > 0 && out[n-1].src+out[n-1].n == r.src && out[n-1].dst+out[n-1].n == r.dst {
			out[n-1].n += r.n
			continue
		}
		out = append(out, r)
	}
	return out
}

// operand is one side of a product as lowered.
type operand struct {
	name     string // "a" or "b"
	chain    cost.Chain
	a        bool
	saturate bool // the chain's cast to FP8 saturates
	before   bool // cast on source tiles before the exchange
	fed      bool // the root is computed by an earlier node
}

// allocate reserves size bytes at one address on every tile of ts, in
// interleaved memory (il) or non-interleaved memory (top down), aligned.
func (l *linker) allocate(ts []int, name string, size, align uint32, il bool) (uint32, error) {
	size = (size + 7) &^ 7
	if il {
		var at uint32
		for _, t := range ts {
			at = max(at, l.tile(t).il)
		}
		at = (at + align - 1) &^ (align - 1)
		if uint64(at)+uint64(size) > uint64(l.p.UsableMemory().Hi) {
			return 0, &memoryError{tiles: ts, name: name, size: size, region: "interleaved", free: int64(l.p.UsableMemory().Hi) - int64(at)}
		}
		for _, t := range ts {
			tl := l.tile(t)
			tl.il = at + size
			tl.bufs = append(tl.bufs, buffer{name: name, addr: at, size: size})
		}
		return at, nil
	}
	at := l.p.NonInterleaved.Hi
	for _, t := range ts {
		at = min(at, l.tile(t).ni)
	}
	if uint64(size) > uint64(at) || (at-size)&^(align-1) < l.p.NonInterleaved.Lo {
		return 0, &memoryError{tiles: ts, name: name, size: size, region: "non-interleaved", free: int64(at) - int64(l.p.NonInterleaved.Lo)}
	}
	at = (at - size) &^ (align - 1)
	for _, t := range ts {
		tl := l.tile(t)
		tl.ni = at
		tl.bufs = append(tl.bufs, buffer{name: name, addr: at, size: size})
	}
	return at, nil
}

// memoryError is a buffer that does not fit.
type memoryError struct {
	tiles  []int
	name   string
	size   uint32
	region string
	free   int64
}

func (e *memoryError) Error() string {
	return fmt.Sprintf("tile %d: buffer %s of %d bytes does not fit its %s memory (%d bytes free)", e.tiles[0], e.name, e.size, e.region, max(e.free, 0))
}

// setData gives a buffer constant contents on one tile.
func (l *linker) setData(t int, addr uint32, data []byte) {
	tl := l.tile(t)
	for i := range tl.bufs {
		if tl.bufs[i].addr == addr {
			d := make([]byte, tl.bufs[i].size)
			copy(d, data)
			tl.bufs[i].data = d
			return
		}
	}
}

// pageAlloc appends bytes to a host page and returns their offset.
func (l *linker) pageAlloc(page uint8, bytes uint32) (uint32, error) {
	for len(l.pages) <= int(page) {
		l.pages = append(l.pages, obj.Page{ID: uint8(len(l.pages))})
	}
	off := l.pages[page].Bytes
	end := uint64(off) + uint64((bytes+7)&^7)
	if end > 1<<24 {
		return 0, fmt.Errorf("host page %d: %d bytes exceed the 16 MiB of a page", page, end)
	}
	l.pages[page].Bytes = uint32(end)
	return off, nil
}

// product lowers one MatMul or Gemm step.
func (l *linker) product(st plan.Step, pr *cost.Product) error {
	n := pr.Node
	ep, err := l.epilogueOf(n, pr)
	if err != nil {
		return err
	}
	s := cost.Split{GM: st.Split.M, GN: st.Split.N, GK: st.Split.K, Align: cost.ResultAlign(l.g, n)}
	lo := st.Tiles[0]
	if !s.Fits(pr.M, pr.K, pr.N) || lo < 0 || lo+s.Tiles() > st.Tiles[1] || st.Tiles[1] > l.pl.Tiles {
		return fmt.Errorf("plan: step %q: split %v over tiles %v does not fit [%d,%d]x[%d,%d] on %d tiles", n.Name, s, st.Tiles, pr.M, pr.K, pr.K, pr.N, l.pl.Tiles)
	}
	out := n.Outputs[0]
	oc := cost.OutputCast(l.g, n)
	if oc != nil {
		out = oc.Outputs[0] // the product writes the cast's FP16 result
	}
	_, isOut := l.outIndex[out]
	if out.DType != onnx.Float && out.DType != onnx.Float16 {
		return notLowered(n, "output type %s", out.DType)
	}
	e := pr.Type.Size()
	var fp8 codegen.FP8Config
	ops := []*operand{{name: "a", chain: pr.A, a: true}, {name: "b", chain: pr.B}}
	for k, o := range ops {
		c := o.chain
		if c.Root.Producer != nil {
			if err := l.checkFed(n, o, pr.Type); err != nil {
				return err
			}
			o.fed = true
		}
		switch {
		case c.Root.DType == onnx.Float && c.HasCast && c.Cast == codegen.F32ToF8 && pr.Type == codegen.AMPFP8:
			for _, f := range c.Nodes {
				if ca, ok := f.Attrs.(*graph.Cast); ok && ca.To != onnx.Float {
					o.saturate = ca.Saturate
				}
			}
		case c.Root.DType == onnx.Float16 && !c.HasCast && pr.Type == codegen.AMPFP16:
		case c.Root.DType == onnx.Float && c.HasCast && c.Cast == codegen.F32ToF16 && pr.Type == codegen.AMPFP16:
		case !c.HasCast && pr.Type == codegen.AMPFP8 && c.Root.DType != onnx.Float && c.Root.DType != onnx.Float16:
		case c.Root.DType == onnx.Float && !c.HasCast && pr.Type == codegen.VecFP32:
		case c.Root.DType == onnx.Float16 && c.HasCast && c.Cast == codegen.F16ToF32 && pr.Type == codegen.VecFP32:
		case c.Root.DType != onnx.Float && c.Root.DType != onnx.Float16 && c.HasCast && c.Cast == codegen.F8ToF32 && pr.Type == codegen.VecFP32:
		default:
			return notLowered(n, "operand %s of type %s as %s on the AMP (FP32 products need an FP32 kernel)", o.name, c.Root.DType, pr.Type)
		}
		if pr.Type == codegen.AMPFP8 {
			if k == 0 {
				fp8.FormatA = c.FP8
			} else {
				fp8.FormatB = c.FP8
			}
		}
		o.before = c.HasCast && st.CastOrder == plan.BeforeExchange && st.Stationary != o.name && !o.fed
	}

	// Block geometry.
	kpad := func(kb int) int {
		if pr.Type == codegen.AMPFP8 {
			return pad(kb, 2)
		}
		return kb
	}
	var mpMax, npMax, kpMax, partMax int
	for i := 0; i < s.GM; i++ {
		r0, r1 := s.MBlock(pr.M, i)
		mpMax = max(mpMax, pad(r1-r0, 4))
		for kb := 0; kb < s.GK; kb++ {
			p0, p1 := s.PartBlock(r1-r0, kb)
			partMax = max(partMax, p1-p0)
		}
	}
	for j := 0; j < s.GN; j++ {
		c0, c1 := s.NBlock(pr.N, j)
		npMax = max(npMax, pad(c1-c0, 16))
	}
	for k := 0; k < s.GK; k++ {
		k0, k1 := s.KBlock(pr.K, k)
		kpMax = max(kpMax, kpad(k1-k0))
	}
	compute := make([]int, s.Tiles())
	for t := range compute {
		compute[t] = lo + t
	}
	ep.tiles = compute
	aPanel := func(i, kb int) panel {
		r0, r1 := s.MBlock(pr.M, i)
		k0, k1 := s.KBlock(pr.K, kb)
		return panel{a: true, g0: r0, g1: r1, k0: k0, k1: k1, gp: pad(r1-r0, 4), kp: kpad(k1 - k0)}
	}
	bPanel := func(kb, j int) panel {
		c0, c1 := s.NBlock(pr.N, j)
		k0, k1 := s.KBlock(pr.K, kb)
		return panel{g0: c0, g1: c1, k0: k0, k1: k1, gp: pad(c1-c0, 16), kp: kpad(k1 - k0)}
	}
	tileOf := func(i, j, kb int) int { return s.Tile(lo, i, j, kb) }
	nm := func(what string) string { return n.Name + "." + what }

	// Buffers on the compute tiles: B and C interleaved, A non-interleaved
	// (or interleaved, in another 32 KiB pair of elements than B).
	bBuf, err := l.allocate(compute, nm("b"), uint32(kpMax*npMax*e), 32, true)
	if err != nil {
		return l.memErr(n, err)
	}
	cBuf, err := l.allocate(compute, nm("c"), uint32(mpMax*npMax*4), 16, true)
	if err != nil {
		return l.memErr(n, err)
	}
	aBuf, err := l.allocate(compute, nm("a"), uint32(mpMax*kpMax*e), 8, false)
	if err != nil {
		aBuf, err = l.allocate(compute, nm("a"), uint32(mpMax*kpMax*e), 2*l.p.ElementBytes, true)
		if err != nil {
			return l.memErr(n, err)
		}
	}
	bufs := []uint32{aBuf, bBuf}

	var pre *superstep // cast before the exchange
	var xch *superstep // operand exchange
	mm := l.addStepLater(obj.Compute, "matmul:"+n.Name)
	for k, o := range ops {
		c := o.chain
		rootRows, rootCols := int(c.Root.Shape[0]), int(c.Root.Shape[1])
		blockOf := func(t int) (panel, int) { // the operand's block on compute tile t
			rel := t - lo
			j := rel % s.GN
			kb := (rel / s.GN) % s.GK
			i := rel / (s.GN * s.GK)
			if o.a {
				return aPanel(i, kb), i*s.GK + kb
			}
			return bPanel(kb, j), kb*s.GN + j
		}
		if o.fed {
			// Computed by an earlier node: packed on its tiles, then
			// moved to the blocks.
			if pre == nil {
				pre = l.addStep(obj.Compute, "pack:"+n.Name)
				xch = l.addStep(obj.Exchange, "operands:"+n.Name)
			}
			if err := l.feed(n, o, pr, e, compute, blockOf, bufs[k], pre, xch); err != nil {
				return err
			}
			continue
		}
		if !o.before {
			// Resident in block layout: host blocks (or constant data),
			// cast after on the compute tile when needed.
			dst := bufs[k]
			var stage uint32
			if c.HasCast {
				stage, err = l.allocate(compute, nm(o.name+".in"), uint32(map[bool]int{true: mpMax * kpMax, false: kpMax * npMax}[o.a]*c.Root.DType.ElemSize()), 8, true)
				if err != nil {
					return l.memErr(n, err)
				}
			}
			offs := map[int]uint32{}
			for _, t := range compute {
				pn, id := blockOf(t)
				size := c.Root.DType.ElemSize()
				target := dst
				if c.HasCast {
					target = stage
				}
				bytes := uint32(pn.elems() * size)
				if c.Root.Const != nil {
					data, err := arrange(c.Root, pn.block(0, c.Transpose), bytes)
					if err != nil {
						return fmt.Errorf("node %q: constant %q: %w", n.Name, c.Root.Name, err)
					}
					l.setData(t, target, data)
				} else {
					in := &l.inputs[l.inIndex[c.Root]]
					off, ok := offs[id]
					if !ok {
						off, err = l.pageAlloc(in.Page, bytes)
						if err != nil {
							return err
						}
						offs[id] = off
						in.Blocks = append(in.Blocks, pn.block(off, c.Transpose))
					}
					l.steps[0].host[t] = append(l.steps[0].host[t], hostOp{in: true, page: in.Page, off: off, addr: target, bytes: bytes})
				}
				if c.HasCast {
					mm.work[t] = append(mm.work[t], &kernel{what: nm("cast-" + o.name), cast: &codegen.Cast{
						Kind: c.Cast, N: pn.elems(), X: stage, Y: dst, Format: c.FP8, Saturate: o.saturate, Workers: codegen.Slots}})
				}
			}
			continue
		}

		// Cast before the exchange: row pieces of the root on the tiles
		// from lo, cast there, then sent to the blocks as panel runs.
		if pre == nil {
			pre = l.addStep(obj.Compute, "cast:"+n.Name)
			xch = l.addStep(obj.Exchange, "operands:"+n.Name)
		}
		src := cost.AlignedRowDist(rootRows, rootCols, 4, lo, st.Tiles[1]-lo, planner.SourceAlign(o.a, c.Transpose))
		srcPanels := make([]panel, len(src.Pieces))
		var srcMax int
		for q, pc := range src.Pieces {
			// The piece's rows are the operand's group axis, or its k
			// axis when the operand is the root transposed the other way.
			var sp panel
			groupRows := o.a != c.Transpose // root rows are the group axis
			if groupRows {
				w := cost.RowAlign
				if !o.a {
					w = cost.ColAlign
				}
				sp = panel{a: o.a, g0: pc.R0, g1: pc.R1, k0: 0, k1: pr.K, gp: pad(pc.R1-pc.R0, w), kp: kpad(pr.K)}
			} else {
				groupN := pr.M
				w := cost.RowAlign
				if !o.a {
					groupN, w = pr.N, cost.ColAlign
				}
				sp = panel{a: o.a, g0: 0, g1: groupN, k0: pc.R0, k1: pc.R1, gp: pad(groupN, w), kp: pc.R1 - pc.R0}
			}
			srcPanels[q] = sp
			srcMax = max(srcMax, sp.elems())
		}
		srcTiles := make([]int, len(src.Pieces))
		for q, pc := range src.Pieces {
			srcTiles[q] = pc.Tile
		}
		rs := c.Root.DType.ElemSize()
		stage, err := l.allocate(srcTiles, nm(o.name+".src.in"), uint32(srcMax*rs), 8, true)
		if err != nil {
			return l.memErr(n, err)
		}
		cast, err := l.allocate(srcTiles, nm(o.name+".src"), uint32(srcMax*e), 8, true)
		if err != nil {
			return l.memErr(n, err)
		}
		in := (*obj.Tensor)(nil)
		if c.Root.Const == nil {
			in = &l.inputs[l.inIndex[c.Root]]
		}
		srcBase := make([]uint32, len(srcTiles))
		inPlace := make([]bool, len(srcTiles))
		for q, t := range srcTiles {
			sp := srcPanels[q]
			bytes := uint32(sp.elems() * rs)
			if in != nil {
				off, err := l.pageAlloc(in.Page, bytes)
				if err != nil {
					return err
				}
				in.Blocks = append(in.Blocks, sp.block(off, c.Transpose))
				l.steps[0].host[t] = append(l.steps[0].host[t], hostOp{in: true, page: in.Page, off: off, addr: stage, bytes: bytes})
			} else {
				data, err := arrange(c.Root, sp.block(0, c.Transpose), bytes)
				if err != nil {
					return fmt.Errorf("node %q: constant %q: %w", n.Name, c.Root.Name, err)
				}
				l.setData(t, stage, data)
			}
			// A piece that is one run of its own tile's block is cast in
			// place, and sent from there.
			srcBase[q] = cast
			if t >= lo && t < lo+s.Tiles() {
				db, _ := blockOf(t)
				if own := runs(sp, db); len(own) == 1 && own[0].src == 0 && own[0].n == sp.elems() && (own[0].dst*e)%8 == 0 {
					srcBase[q] = bufs[k] + uint32(own[0].dst*e)
					inPlace[q] = true
				}
			}
			pre.work[t] = append(pre.work[t], &kernel{what: nm("cast-" + o.name), cast: &codegen.Cast{
				Kind: c.Cast, N: sp.elems(), X: stage, Y: srcBase[q], Format: c.FP8, Saturate: o.saturate, Workers: codegen.Slots}})
		}
		// Runs from every piece to every block that needs it; identical
		// runs to contiguous tiles become multicasts.
		var moves []sched.Transfer
		for _, t := range compute {
			db, _ := blockOf(t)
			for q, sp := range srcPanels {
				for _, r := range runs(sp, db) {
					if (r.n*e)%4 != 0 || (r.src*e)%4 != 0 || (r.dst*e)%4 != 0 {
						return notLowered(n, "operand %s: a run of %d elements at %d is not word aligned", o.name, r.n, r.src)
					}
					if srcTiles[q] == t {
						if inPlace[q] {
							continue
						}
						// Local: cast straight from the staged piece.
						if (r.src*rs)%8 != 0 || (r.dst*e)%8 != 0 {
							return notLowered(n, "operand %s: local run at element %d is not 8-byte aligned", o.name, r.dst)
						}
						pre.work[t] = append(pre.work[t], &kernel{what: nm("cast-local-" + o.name), cast: &codegen.Cast{
							Kind: c.Cast, N: r.n, X: stage + uint32(r.src*rs), Y: bufs[k] + uint32(r.dst*e), Format: c.FP8, Saturate: o.saturate, Workers: codegen.Slots}})
						continue
					}
					moves = append(moves, sched.Transfer{Src: srcTiles[q], Dst: t, Words: r.n * e / 4,
						SrcAddr: srcBase[q] + uint32(r.src*e), DstAddr: bufs[k] + uint32(r.dst*e)})
				}
			}
		}
		xch.xfers = append(xch.xfers, multicast(moves)...)
	}
	l.appendLater(mm)

	// The product on every compute tile.
	var cout uint32
	outSize := out.DType.ElemSize()
	if out.DType == onnx.Float16 {
		cout, err = l.allocate(compute, nm("out"), uint32(mpMax*npMax*2), 8, true)
		if err != nil {
			return l.memErr(n, err)
		}
	}
	np := func(j int) int { c0, c1 := s.NBlock(pr.N, j); return pad(c1-c0, 16) }
	for _, t := range compute {
		rel := t - lo
		j := rel % s.GN
		kb := (rel / s.GN) % s.GK
		i := rel / (s.GN * s.GK)
		ap, bp := aPanel(i, kb), bPanel(kb, j)
		if pr.Type == codegen.VecFP32 {
			mm.work[t] = append(mm.work[t], &kernel{what: nm("matmul"), mm32: &codegen.MatMulF32{
				M: ap.gp, K: ap.kp, N: bp.gp, A: aBuf, B: bBuf, C: cBuf, CStride: bp.gp, Workers: codegen.Slots}})
			continue
		}
		mm.work[t] = append(mm.work[t], &kernel{what: nm("matmul"), mm: &codegen.MatMul{
			Type: pr.Type, M: ap.gp, K: ap.kp, N: bp.gp, A: aBuf, B: bBuf, C: cBuf, CStride: bp.gp, FP8: fp8, Workers: codegen.Slots}})
	}

	// Partial sums: reduce-scatter over the k blocks.
	final := mm
	if s.GK > 1 {
		rx := l.addStep(obj.Exchange, "reduce:"+n.Name)
		add := l.addStep(obj.Compute, "reduce-add:"+n.Name)
		final = add
		rb, err := l.allocate(compute, nm("partials"), uint32((s.GK-1)*partMax*npMax*4), 8, true)
		if err != nil {
			return l.memErr(n, err)
		}
		for i := 0; i < s.GM; i++ {
			r0, r1 := s.MBlock(pr.M, i)
			for j := 0; j < s.GN; j++ {
				w := np(j)
				for kb := 0; kb < s.GK; kb++ {
					p0, p1 := s.PartBlock(r1-r0, kb)
					if p0 == p1 {
						continue
					}
					dst := tileOf(i, j, kb)
					slot := 0
					for k2 := 0; k2 < s.GK; k2++ {
						if k2 == kb {
							continue
						}
						slotAddr := rb + uint32(slot*partMax*npMax*4)
						rx.xfers = append(rx.xfers, sched.Transfer{Src: tileOf(i, j, k2), Dst: dst, DstN: 1, Words: (p1 - p0) * w,
							SrcAddr: cBuf + uint32(p0*w*4), DstAddr: slotAddr})
						add.work[dst] = append(add.work[dst], &kernel{what: nm("reduce-add"), bin: &codegen.Binary{Op: codegen.Add, N: (p1 - p0) * w,
							A: codegen.Operand{Addr: cBuf + uint32(p0*w*4)}, B: codegen.Operand{Addr: slotAddr}, Y: cBuf + uint32(p0*w*4), Workers: codegen.Slots}})
						slot++
					}
				}
			}
		}
	}

	// Output blocks: each tile's rows of its C block.
	var ot *obj.Tensor
	if isOut {
		ot = &l.outputs[l.outIndex[out]]
	}
	// The output pieces: each tile's rows of its C block (row stride w).
	var pieces []region
	for i := 0; i < s.GM; i++ {
		r0, r1 := s.MBlock(pr.M, i)
		for j := 0; j < s.GN; j++ {
			c0, c1 := s.NBlock(pr.N, j)
			w := np(j)
			for kb := 0; kb < s.GK; kb++ {
				p0, p1 := 0, r1-r0
				if s.GK > 1 {
					p0, p1 = s.PartBlock(r1-r0, kb)
				} else if kb > 0 {
					continue
				}
				if p0 == p1 {
					continue
				}
				pieces = append(pieces, region{tile: tileOf(i, j, kb), r0: r0 + p0, r1: r0 + p1, c0: c0, c1: c1, addr: cBuf + uint32(p0*w*4), stride: w})
			}
		}
	}
	// A bias another node computes comes to the pieces' layout through
	// the nodes' machinery, in a superstep of its own after the product.
	var biasAt []uint32
	if ep.bias != nil && ep.bias.Producer != nil {
		io := newIO()
		y := &layout{cols: pr.N, regions: pieces}
		biasAt, err = l.array(n, ep.bias, []int64{int64(pr.M), int64(pr.N)}, y, io)
		if err != nil {
			return err
		}
		final = l.step(n, io)
	}
	var regs []region
	for q, pc := range pieces {
		t, w := pc.tile, pc.stride
		src := pc.addr
		p0 := int(src-cBuf) / (4 * w)
		if biasAt != nil {
			ep.nodeBias = biasAt[q]
		}
		if err := l.epilogue(ep, final, t, src, cBuf, pc.r0, pc.r1, pc.c0, pc.c1, w); err != nil {
			return err
		}
		if out.DType == onnx.Float16 {
			final.work[t] = append(final.work[t], &kernel{what: nm("cast-out"), cast: &codegen.Cast{
				Kind: codegen.F32ToF16, N: (pc.r1 - pc.r0) * w, X: src, Y: cout + uint32(p0*w*2), Workers: codegen.Slots}})
			src = cout + uint32(p0*w*2)
		}
		regs = append(regs, region{tile: t, r0: pc.r0, r1: pc.r1, c0: pc.c0, c1: pc.c1, addr: src, stride: w})
		if !isOut {
			continue
		}
		bytes := uint32((pc.r1 - pc.r0) * w * outSize)
		off, err := l.pageAlloc(ot.Page, bytes)
		if err != nil {
			return err
		}
		ot.Blocks = append(ot.Blocks, obj.Block{Offset: off, R0: uint32(pc.r0), R1: uint32(pc.r1), C0: uint32(pc.c0), C1: uint32(pc.c1),
			Rows: uint32(pc.r1 - pc.r0), Cols: uint32(w), Order: obj.RowMajor})
		l.later = append(l.later, hostOp{in: false, page: ot.Page, off: off, addr: src, bytes: bytes})
		l.laterTiles = append(l.laterTiles, t)
	}
	l.recordResult(out, pr.N, outSize, pr.K, regs)
	if isOut && ot.Accumulate < int64(pr.K) {
		ot.Accumulate = int64(pr.K)
	}
	return nil
}

func (l *linker) memErr(n *graph.Node, err error) error {
	return fmt.Errorf("node %q does not fit the tiles: %w", n.Name, err)
}
