package lower

// Matrix products (MatMul of any rank, Gemm). The step's operand tensors
// are the split's blocks in panel layout (A: APanel, B: BPanel, in the
// element type the product multiplies), its result tensor the split's
// result pieces, row-major with rows padded to 16 (the C block's pitch).
// Per tile and batch index: the product into a C block, then (k split)
// the reduce-scatter of the partial sums, then the Gemm epilogue and the
// cast to FP16 when the result is FP16.

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"sync"

	"ipu.local/formats/obj"
	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/onnx"
	"ipu.local/libs/prog"
)

// OperandOf returns how a product operand's tensor may hold value w: the
// MatMul's input v traced back through exact casts to float (from FP16 or
// FP8) and transposes of the last two axes, until w; flips counts the
// transposes (Gemm's trans attributes included by the caller). ok is
// false when w is not on that chain.
func OperandOf(v, w *graph.Value) (flips int, ok bool) {
	for {
		if v == w {
			return flips, true
		}
		n := v.Producer
		if n == nil {
			return 0, false
		}
		switch a := n.Attrs.(type) {
		case *graph.Cast:
			in := n.Inputs[0]
			if a.To != onnx.Float && !(a.To == onnx.Float16 && isFP8(in.DType)) {
				return 0, false
			}
			if in.DType != onnx.Float16 && !isFP8(in.DType) && in.DType != onnx.Float {
				return 0, false
			}
			if in.DType == onnx.Float && a.To == onnx.Float {
				// an identity cast
			} else if in.DType == onnx.Float {
				return 0, false
			}
		case *graph.Transpose:
			r := len(a.Perm)
			if r < 2 || a.Perm[r-1] != r-2 || a.Perm[r-2] != r-1 || !layout.KeepsInner(append(append([]int(nil), a.Perm[:r-2]...), r-2)) {
				return 0, false
			}
			for i := 0; i < r-2; i++ {
				if a.Perm[i] != i {
					return 0, false
				}
			}
			flips++
		default:
			return 0, false
		}
		v = n.Inputs[0]
	}
}

func isFP8(d onnx.DataType) bool {
	_, ok := graph.FP8Format(d)
	return ok
}

// ampType is the product type of an operand tensor's element type.
func ampType(d onnx.DataType) (codegen.AMPType, bool) {
	switch {
	case d == onnx.Float16:
		return codegen.AMPFP16, true
	case isFP8(d):
		return codegen.AMPFP8, true
	case d == onnx.Float:
		return codegen.AMPFP32, true
	}
	return 0, false
}

// KernelName is a product step's kernel name for a product type: amp-fp16,
// amp-fp8 or amp-fp32 (a plan written before FP32 products ran on the AMP
// says vec-fp32, which the product's lowering refuses).
func KernelName(t codegen.AMPType) string {
	return "amp-" + t.String()
}

// productShape is a product step's operands and shape.
type productShape struct {
	a, b, c, y *layout.Tensor
	mm         layout.MatMul
	typ        codegen.AMPType
	fp8        codegen.FP8Config
	alpha      float32
	beta       float32
	// obias is the folded Add of a bias (OutputBias) whose output y
	// holds, and bias its vector; nil: none.
	obias *graph.Node
	bias  *graph.Value
	// oscale is the folded Mul by a constant (OutputScale) whose output
	// y holds, and scale the constant's FP16 bits; nil: none.
	oscale *graph.Node
	scale  uint16
	// oact is the folded activation (OutputAct) whose output y holds,
	// and act its Unary; nil: none.
	oact *graph.Node
	act  codegen.Unary
}

func (l *lowerer) productShape(st *plan.Step, n *graph.Node) (*productShape, error) {
	ins, outs, err := l.productTensors(st, n)
	if err != nil {
		return nil, err
	}
	ps := &productShape{a: ins[0], b: ins[1], y: outs[0], alpha: 1, beta: 1}
	if len(ins) > 2 {
		ps.c = ins[2]
	}
	yv := ps.y.Value // the value the cast, bias or scale writes
	if act := OutputAct(l.g, n); act != nil && act.Outputs[0].Index == yv {
		ps.oact, yv = act, act.Inputs[0].Index
		ps.act, _ = unaryParams(act, codegen.F16)
	}
	if add := OutputBias(l.g, n); add != nil && add.Outputs[0].Index == yv {
		ps.obias, ps.bias = add, biasVector(add, n.Outputs[0])
	}
	if mul := OutputScale(l.g, n); mul != nil && mul.Outputs[0].Index == yv {
		ps.oscale = mul
		ps.scale, _ = scaleFactor(mul, n.Outputs[0])
	}
	ta, tb := 0, 0
	if g, ok := n.Attrs.(*graph.Gemm); ok {
		ps.alpha, ps.beta = g.Alpha, g.Beta
		if g.TransA {
			ta = 1
		}
		if g.TransB {
			tb = 1
		}
	}
	for k, t := range []*layout.Tensor{ps.a, ps.b} {
		flips, ok := OperandOf(n.Inputs[k], l.g.Values[t.Value])
		if !ok {
			return nil, l.stepErr("operand %c: tensor %d holds %q, which is not the operand %q seen through exact casts and transposes", 'a'+k, t.ID, t.Name, n.Inputs[k].Name)
		}
		flips += []int{ta, tb}[k]
		if t.Transposed != (flips%2 == 1) {
			return nil, l.stepErr("operand %c: tensor %d (%q) has transposed=%v, the operand is %q transposed %d times", 'a'+k, t.ID, t.Name, t.Transposed, t.Name, flips)
		}
		if want := []layout.Kind{layout.APanel, layout.BPanel}[k]; t.Kind != want {
			return nil, l.stepErr("operand %c: tensor %d (%q) is %s, the product reads %s", 'a'+k, t.ID, t.Name, t.Kind, want)
		}
	}
	da, db := l.g.Values[ps.a.Value].DType, l.g.Values[ps.b.Value].DType
	typ, ok1 := ampType(da)
	tb2, ok2 := ampType(db)
	if !ok1 || !ok2 || typ != tb2 {
		return nil, l.notLowered(n, "operands of types %s and %s (a product multiplies two float16, two FP8 or two float operands)", da, db)
	}
	ps.typ = typ
	if typ == codegen.AMPFP8 {
		ps.fp8.FormatA, _ = graph.FP8Format(da)
		ps.fp8.FormatB, _ = graph.FP8Format(db)
	}
	if want := KernelName(typ); st.Kernel != want {
		return nil, l.stepErr("kernel %q, the operands' types make it %q", st.Kernel, want)
	}
	as, bs := ps.a.Shape, ps.b.Shape
	ra, rb := len(as), len(bs)
	if as[ra-1] != bs[rb-2] {
		return nil, l.stepErr("operands [.., %d, %d] x [.., %d, %d] do not share K", as[ra-2], as[ra-1], bs[rb-2], bs[rb-1])
	}
	ps.mm = layout.MatMul{ABatch: as[:ra-2], BBatch: bs[:rb-2], M: as[ra-2], K: as[ra-1], N: bs[rb-1]}
	ys := ps.y.Shape
	ps.mm.Batch = ys[:len(ys)-2]
	if ys[len(ys)-2] != ps.mm.M || ys[len(ys)-1] != ps.mm.N {
		return nil, l.stepErr("result tensor %d (%q) of shape %v for a [%d, %d] product", ps.y.ID, ps.y.Name, ys, ps.mm.M, ps.mm.N)
	}
	return ps, nil
}

// productTensors reads a product step's tensors: A, B, optional bias;
// the result (the node's output, or the FP16 cast of it that the step
// folds).
func (l *lowerer) productTensors(st *plan.Step, n *graph.Node) (ins, outs []*layout.Tensor, err error) {
	if len(st.Inputs) != len(n.Inputs) || len(st.Outputs) != 1 {
		return nil, nil, l.stepErr("%d input and %d output tensors for a product of %d inputs", len(st.Inputs), len(st.Outputs), len(n.Inputs))
	}
	for k, id := range st.Inputs {
		if id < 0 {
			if k < 2 {
				return nil, nil, l.stepErr("no tensor for operand %c", 'a'+k)
			}
			continue
		}
		var v *graph.Value
		if k == 2 {
			v = n.Inputs[2]
		}
		t, err := l.tensor(id, v, fmt.Sprintf("input %d", k))
		if err != nil {
			return nil, nil, err
		}
		ins = append(ins, t)
	}
	y, err := l.tensor(st.Outputs[0], nil, "output")
	if err != nil {
		return nil, nil, err
	}
	out := n.Outputs[0]
	v := y.Value
	if act := OutputAct(l.g, n); act != nil && act.Outputs[0].Index == v {
		v = act.Inputs[0].Index
	}
	if v != out.Index {
		cast, add, mul := OutputCast(l.g, n), OutputBias(l.g, n), OutputScale(l.g, n)
		if (cast == nil || cast.Outputs[0].Index != v) && (add == nil || add.Outputs[0].Index != v) && (mul == nil || mul.Outputs[0].Index != v) {
			return nil, nil, l.stepErr("result tensor %d holds %q, not %q, its only reader's cast to float16, its only reader's Add of a bias, its only reader's Mul by a constant or the activation of one of these", y.ID, y.Name, out.Name)
		}
	}
	return ins, []*layout.Tensor{y}, nil
}

// OutputCast returns the Cast to FP16 that is the only reader of a
// product's FP32 result, when that result is no graph output: the
// product may write the FP16 result itself. Nil otherwise.
func OutputCast(g *graph.Graph, n *graph.Node) *graph.Node {
	out := n.Outputs[0]
	if out.DType != onnx.Float {
		return nil
	}
	reader := onlyReader(g, out)
	if reader == nil {
		return nil
	}
	if a, ok := reader.Attrs.(*graph.Cast); ok && a.To == onnx.Float16 {
		return reader
	}
	return nil
}

// samePieces checks that t's pieces are want's, sorted.
func (l *lowerer) samePieces(t *layout.Tensor, want []layout.Piece, what string) error {
	w := &layout.Tensor{Pieces: append([]layout.Piece(nil), want...)}
	w.SortPieces()
	if len(w.Pieces) != len(t.Pieces) {
		return l.stepErr("tensor %d (%q): %d pieces, the split's %s has %d", t.ID, t.Name, len(t.Pieces), what, len(w.Pieces))
	}
	for i, p := range w.Pieces {
		q := t.Pieces[i]
		if p.Tile != q.Tile || !p.Box.Equal(q.Box) {
			return l.stepErr("tensor %d (%q): piece %d is tile %d %s, the split's %s has tile %d %s there", t.ID, t.Name, i, q.Tile, q.Box, what, p.Tile, p.Box)
		}
	}
	return nil
}

// pieceOn returns the index of t's piece on tile tl with box b (-1: none).
func pieceOn(t *layout.Tensor, tl int, b layout.Box) int {
	for _, i := range t.OnTile(tl) {
		if t.Pieces[i].Box.Equal(b) {
			return i
		}
	}
	return -1
}

// product lowers a MatMul or Gemm step.
func (l *lowerer) product(st *plan.Step, n *graph.Node) error {
	ps, err := l.productShape(st, n)
	if err != nil {
		return err
	}
	if st.Split == nil {
		return l.stepErr("a product step without a split")
	}
	s := layout.Split{GB: st.Split.B, GM: st.Split.M, GN: st.Split.N, GK: st.Split.K, Align: st.Split.Align, NAlign: st.Split.NAlign, BOrder: st.Split.Order == "b", ColCut: st.Split.Parts == "cols", Rest: RestOf(st.Split.Rest)}
	lo := st.Tiles[0]
	if !s.Fits(ps.mm) || lo+s.Tiles() > st.Tiles[1] {
		return l.stepErr("split %v over tiles %v does not fit %d products of [%d,%d]x[%d,%d]", s, st.Tiles, ps.mm.Batches(), ps.mm.M, ps.mm.K, ps.mm.K, ps.mm.N)
	}
	if err := l.samePieces(ps.a, s.OperandPieces(ps.mm, lo, true), "A blocks"); err != nil {
		return err
	}
	if err := l.samePieces(ps.b, s.OperandPieces(ps.mm, lo, false), "B blocks"); err != nil {
		return err
	}
	if err := l.samePieces(ps.y, s.ResultPieces(ps.mm, lo), "result pieces"); err != nil {
		return err
	}
	if ps.y.Kind != layout.RowMajor || ps.y.Pad != layout.BGroup {
		return l.stepErr("result tensor %d (%q): %s with pad %d, the product writes row-major rows padded to %d", ps.y.ID, ps.y.Name, ps.y.Kind, ps.y.Pad, layout.BGroup)
	}
	ydt := l.g.Values[ps.y.Value].DType
	if ydt != onnx.Float && ydt != onnx.Float16 {
		return l.notLowered(n, "result of type %s", ydt)
	}
	aRefs, err := l.read(ps.a)
	if err != nil {
		return err
	}
	bRefs, err := l.read(ps.b)
	if err != nil {
		return err
	}
	// The AMP reads B from interleaved memory, 32-byte aligned, and A from
	// another memory element.
	// Whichever of the two the linker places second keeps out of the
	// other's element pair.
	bBuf, aBuf := bRefs[0].Buf, aRefs[0].Buf
	l.ask(bufferAsk{buf: bBuf, region: prog.Interleaved, align: 32, apart: aBuf})
	l.ask(bufferAsk{buf: aBuf, region: prog.NonInterleaved, weak: true, apart: bBuf})

	blocks := s.Blocks(ps.mm, lo)
	var mpMax, npMax, nbMax, partMax int
	for _, tb := range blocks {
		mpMax = max(mpMax, layout.Pad(tb.M1-tb.M0, layout.AGroup))
		npMax = max(npMax, layout.Pad(tb.N1-tb.N0, layout.BGroup))
		nbMax = max(nbMax, tb.B1-tb.B0)
	}
	for _, tb := range blocks {
		_, pitch := partPlace(tb)
		if tb.Q0 == 0 && tb.Q1 == tb.N1-tb.N0 {
			pitch = npMax
		}
		partMax = max(partMax, (tb.P1-tb.P0)*pitch)
	}
	tiles := make([]int, len(blocks))
	for i, tb := range blocks {
		tiles[i] = tb.Tile
	}
	blockBytes := mpMax * npMax * 4
	cBuf := l.out.NewBuffer(n.Name+".c", tiles, nbMax*blockBytes, 16, prog.Interleaved)
	mmStep := l.compute(n.Name)
	cRef := func(tb layout.TileBlock, b int) prog.Ref {
		return prog.Ref{Buf: cBuf, Off: uint32((b - tb.B0) * blockBytes)}
	}
	for _, tb := range blocks {
		for b := tb.B0; b < tb.B1; b++ {
			idx := ps.mm.BatchIndex(b)
			ab := append(layout.ProjectBatch(idx, ps.mm.ABatch), layout.Range{Lo: tb.M0, Hi: tb.M1}, layout.Range{Lo: tb.K0, Hi: tb.K1})
			bb := append(layout.ProjectBatch(idx, ps.mm.BBatch), layout.Range{Lo: tb.K0, Hi: tb.K1}, layout.Range{Lo: tb.N0, Hi: tb.N1})
			ai, bi := blockPiece(ps.a, tb.Tile, ab, s.EdgeCut(true)), blockPiece(ps.b, tb.Tile, bb, s.EdgeCut(false))
			if ai < 0 || bi < 0 {
				return l.stepErr("tile %d: the operand blocks %s and %s are not stored whole", tb.Tile, ab, bb)
			}
			kp := ps.a.Geometry(ai).KP
			for _, k := range matmulKernels(n, ps, s, tb, kp, aRefs[ai], bRefs[bi], cRef(tb, b)) {
				mmStep.Work[tb.Tile] = append(mmStep.Work[tb.Tile], k)
			}
		}
	}
	final := mmStep
	var sums map[[2]int]*prog.Kernel
	if s.GK > 1 {
		final, sums = l.reduceScatter(n, s, blocks, cBuf, blockBytes, partMax, nbMax)
	}
	return l.productResult(n, ps, blocks, cRef, final, sums)
}

// matmulKernels are the product kernels of tb's block: the B panels of
// its columns into its C block, which with column parts (colParts) is
// one row-major block a part. That is one kernel a part, or one kernel
// over every part, the workers sharing all of the block's items instead
// of each part's few: with C's parts (codegen.MatMul.CParts), or, when
// every part is one panel, with C's panels a part apart (CPanel; this
// one can split items over the workers), as partsLaunch chooses.
func matmulKernels(n *graph.Node, ps *productShape, s layout.Split, tb layout.TileBlock, kp int, a, b, cb prog.Ref) []*prog.Kernel {
	cs := colParts(s, tb)
	mp := layout.Pad(tb.M1-tb.M0, layout.AGroup)
	launch := partsApart
	if len(cs) > 1 && evenParts(cs) {
		launch = partsLaunch(partsKey{typ: ps.typ, fp8: ps.fp8, m: mp, k: kp, panels: layout.Units(cs[len(cs)-1].Hi, layout.BGroup), parts: len(cs)})
	}
	if launch == partsApart {
		out := make([]*prog.Kernel, len(cs))
		for h, c := range cs {
			out[h] = matmulKernel(n, ps, tb, kp, c, a, b, cb.Add(4*mp*c.Lo))
		}
		return out
	}
	k := matmulKernel(n, ps, tb, kp, layout.Range{Lo: 0, Hi: cs[len(cs)-1].Hi}, a, b, cb)
	p := k.Params.(*codegen.MatMul)
	if launch == partsPanels {
		p.CStride, p.CPanel = layout.BGroup, mp*layout.BGroup
	} else {
		p.CStride, p.CParts = 0, len(cs)
	}
	return []*prog.Kernel{k}
}

// partsKey is what the choice of a block's matrix launches over its
// column parts depends on: the AMP type, the padded rows and k, and the
// panels, split as evenly as possible into the parts.
type partsKey struct {
	typ           codegen.AMPType
	fp8           codegen.FP8Config
	m, k          int
	panels, parts int
}

// Launches over column parts.
const (
	partsApart  = iota // one kernel a part
	partsPanels        // one kernel, C's panels a part apart (parts of one panel)
	partsOne           // one kernel over the parts (CParts)
)

// partsChoices caches partsLaunch by key: a split's tiles have blocks of
// a few shapes, lowered again for every point the search prices.
var partsChoices sync.Map

// partsLaunch chooses the launches with the fewest cycles on the
// kernels' cost (and prog.LaunchCallCycles a launch), ties to one
// kernel.
func partsLaunch(key partsKey) int {
	if c, ok := partsChoices.Load(key); ok {
		return c.(int)
	}
	base := codegen.MatMul{Type: key.typ, M: key.m, K: key.k, FP8: key.fp8, Workers: codegen.Slots}
	cycles := func(p codegen.MatMul) int64 {
		c, err := p.Cost()
		if err != nil {
			return math.MaxInt64
		}
		return c.Cycles()
	}
	// A kernel a part: their cycles and the calls of all but one.
	best, most := partsApart, int64(key.parts-1)*prog.LaunchCallCycles
	for h := range key.parts {
		lo, hi := layout.Block(key.panels, key.parts, h)
		p := base
		p.N, p.CStride = (hi-lo)*layout.BGroup, (hi-lo)*layout.BGroup
		most = min(math.MaxInt64-1, most+cycles(p))
	}
	p := base
	p.N = key.panels * layout.BGroup
	if key.panels == key.parts {
		p.CStride, p.CPanel = layout.BGroup, key.m*layout.BGroup
		if c := cycles(p); c <= most {
			best, most = partsPanels, c
		}
	}
	p.CStride, p.CPanel, p.CParts = 0, 0, key.parts
	if c := cycles(p); c <= most {
		best = partsOne
	}
	partsChoices.Store(key, best)
	return best
}

// evenParts reports whether the column parts cs are codegen.MatMul's
// CParts: one after the other, none empty, their panels split as evenly
// as possible (layout.Block), the wider first.
func evenParts(cs []layout.Range) bool {
	panels := layout.Units(cs[len(cs)-1].Hi, layout.BGroup)
	for h, c := range cs {
		lo, hi := layout.Block(panels, len(cs), h)
		if lo == hi || c.Lo != lo*layout.BGroup || layout.Units(c.Hi, layout.BGroup) != hi {
			return false
		}
	}
	return true
}

// matmulKernel is the product kernel of tb's block for columns c of it:
// the B panels of those columns, into their row-major C block at cb (the
// block's at 4*mp*c.Lo bytes for a column part, colParts).
func matmulKernel(n *graph.Node, ps *productShape, tb layout.TileBlock, kp int, c layout.Range, a, b, cb prog.Ref) *prog.Kernel {
	mp, w := layout.Pad(tb.M1-tb.M0, layout.AGroup), layout.Pad(c.Len(), layout.BGroup)
	b = b.Add(c.Lo * kp * ps.typ.Size())
	// The result's readers (productResult, reduceScatter) read rows
	// [P0, P1) of the block, inside its M extent.
	k := &prog.Kernel{What: n.Name + ".matmul", RowsRead: tb.M1 - tb.M0}
	p := &codegen.MatMul{Type: ps.typ, M: mp, K: kp, N: w, CStride: w, FP8: ps.fp8, Workers: codegen.Slots}
	k.Params = p
	k.Fixes = []prog.Fix{{Field: &p.A, Ref: a}, {Field: &p.B, Ref: b}, {Field: &p.C, Ref: cb, Write: true}}
	return k
}

// productResult applies the Gemm epilogue and the FP16 cast to each
// tile's result part and records the result tensor's storage. A part
// with no epilogue that a k split's sum ends (sums, by tile and batch
// index) gets the cast fused into that sum: the launch writes the FP16
// result instead of its FP32 accumulator (same rounding, one launch and
// one pass over the part fewer).
func (l *lowerer) productResult(n *graph.Node, ps *productShape, blocks []layout.TileBlock, cRef func(layout.TileBlock, int) prog.Ref, final *prog.Superstep, sums map[[2]int]*prog.Kernel) error {
	y := ps.y
	e := &epilogue{n: n, ps: ps, final: final, sums: sums, f16: l.g.Values[y.Value].DType == onnx.Float16}
	if e.f16 {
		var err error
		if e.yRefs, err = l.write(y); err != nil {
			return err
		}
	} else {
		if l.refs[y.ID] != nil {
			return planErr("tensor %d (%q) is written twice", y.ID, y.Name)
		}
		e.yRefs = make([]prog.Ref, len(y.Pieces))
	}
	if ps.c != nil && ps.beta != 0 {
		var err error
		if e.bias, err = l.read(ps.c); err != nil {
			return err
		}
	}
	r := len(y.Shape)
	for _, tb := range blocks {
		if tb.P0 == tb.P1 {
			continue
		}
		at, np := partPlace(tb)
		for b := tb.B0; b < tb.B1; b++ {
			box := make(layout.Box, 0, r)
			for _, i := range ps.mm.BatchIndex(b) {
				box = append(box, layout.Range{Lo: i, Hi: i + 1})
			}
			box = append(box, layout.Range{Lo: tb.M0 + tb.P0, Hi: tb.M0 + tb.P1}, layout.Range{Lo: tb.N0 + tb.Q0, Hi: tb.N0 + tb.Q1})
			if err := l.partEpilogue(e, tb, b, box, cRef(tb, b).Add(at), np); err != nil {
				return err
			}
		}
	}
	l.foldedBiases(e)
	for _, a := range e.actParts {
		actF16(ps.oact.Name, final, a.tile, a.y, ps.act, a.n)
	}
	l.refs[y.ID] = e.yRefs
	l.productResultAcc(n, ps, e.f16)
	return nil
}

// epilogue is a product's result as productResult makes it: the result
// tensor's storage (yRefs), the Gemm's bias operand's, and the parts
// the folded Add's bias and the folded activation are still to reach.
type epilogue struct {
	n     *graph.Node
	ps    *productShape
	final *prog.Superstep
	sums  map[[2]int]*prog.Kernel
	f16   bool
	yRefs []prog.Ref
	bias  []prog.Ref
	// The folded Add's bias, per FP16 part: added by the part's sum, or
	// after its cast.
	biasParts []biasPart
	// The folded activation's parts that no sum applies it to.
	actParts []actPart
}

type biasPart struct {
	sum *prog.Kernel // nil: after the cast
	y   prog.Ref
	blk biasBlock
}

type actPart struct {
	tile, n int
	y       prog.Ref
}

// partEpilogue applies the epilogue to the result part of block tb's
// batch index b (box, at part, np columns apart): alpha, the Gemm's
// bias, the FP16 cast (fused into the part's sum when nothing comes
// between), and notes the part for the folded bias and activation.
func (l *lowerer) partEpilogue(e *epilogue, tb layout.TileBlock, b int, box layout.Box, part prog.Ref, np int) error {
	n, ps, final := e.n, e.ps, e.final
	yi := pieceOn(ps.y, tb.Tile, box)
	rows := tb.P1 - tb.P0
	if ps.alpha != 1 {
		p := &codegen.Binary{Op: codegen.Mul, N: rows * np, B: codegen.Operand{Const: true, Value: ps.alpha}, Workers: codegen.Slots}
		final.Work[tb.Tile] = append(final.Work[tb.Tile], &prog.Kernel{What: n.Name + ".alpha", Params: p,
			Fixes: []prog.Fix{{Field: &p.A.Addr, Ref: part}, {Field: &p.Y, Ref: part, Write: true}}})
	}
	if e.bias != nil {
		if err := l.addBias(n, ps, final, tb.Tile, box, part, np, e.bias); err != nil {
			return err
		}
	}
	var fused *prog.Kernel
	if sum := e.sums[[2]int{tb.Tile, b}]; e.f16 && sum != nil && ps.alpha == 1 && e.bias == nil {
		fuseCast(sum, e.yRefs[yi])
		fused = sum
		if ps.oscale != nil {
			scaleF16(ps.oscale.Name, final, tb.Tile, e.yRefs[yi], ps.scale, rows*np)
		}
	} else if e.f16 {
		// The folded Mul's factor, in the cast's pass.
		p := &codegen.Cast{Kind: codegen.F32ToF16, N: rows * np, MulF16: ps.scale, Workers: codegen.Slots}
		final.Work[tb.Tile] = append(final.Work[tb.Tile], &prog.Kernel{What: n.Name + ".cast-out", Params: p,
			Fixes: []prog.Fix{{Field: &p.X, Ref: part}, {Field: &p.Y, Ref: e.yRefs[yi], Write: true}}})
	} else {
		e.yRefs[yi] = part
	}
	if ps.obias != nil && e.f16 {
		c0, nc := biasCols(box)
		e.biasParts = append(e.biasParts, biasPart{fused, e.yRefs[yi], biasBlock{tile: tb.Tile, rows: rows, pitch: np, c0: c0, nc: nc}})
	}
	if ps.oact != nil && e.f16 {
		if fused != nil && ps.oscale == nil {
			fuseAct(fused, ps.act)
		} else {
			e.actParts = append(e.actParts, actPart{tb.Tile, rows * np, e.yRefs[yi]})
		}
	}
	return nil
}

// foldedBiases adds the folded Add's bias to its parts: in their sums,
// or after their casts.
func (l *lowerer) foldedBiases(e *epilogue) {
	if len(e.biasParts) == 0 {
		return
	}
	blks := make([]biasBlock, len(e.biasParts))
	for i, bp := range e.biasParts {
		blks[i] = bp.blk
	}
	refs := l.biasBuffer(e.ps.obias.Name+".bias", e.ps.bias, blks)
	for i, bp := range e.biasParts {
		if bp.sum != nil {
			fuseBias(bp.sum, refs[i])
		} else {
			addBiasF16(e.ps.obias.Name, e.final, bp.blk.tile, bp.y, refs[i], bp.blk.rows, bp.blk.pitch)
		}
	}
}

// productResultAcc records the roundings the product's result and the
// folded Add, Mul and activation accumulate.
func (l *lowerer) productResultAcc(n *graph.Node, ps *productShape, f16 bool) {
	acc := l.productAcc(n, ps, f16)
	if ps.obias != nil {
		// The Add: FP16 operands, one FP16 rounding (f16v4add).
		l.acc[n.Outputs[0].Index] = acc
		acc = max(acc, l.acc[ps.bias.Index]) + F16Rounding
	}
	if ps.oscale != nil {
		// The Mul: one FP16 rounding (f16v4mul).
		l.acc[n.Outputs[0].Index] = acc
		acc += F16Rounding
	}
	if ps.oact != nil {
		// The activation: its FP32 roundings and the FP16 one.
		l.acc[ps.oact.Inputs[0].Index] = acc
		acc += unaryRoundings[ps.act.Op] + F16Rounding
	}
	l.acc[ps.y.Value] = acc
}

// productAcc is the rounding count of a product's result: the operands'
// counts (the largest), K FP32 additions, the epilogue's, and the FP16
// rounding.
func (l *lowerer) productAcc(n *graph.Node, ps *productShape, f16 bool) int64 {
	acc := max(l.acc[ps.a.Value], l.acc[ps.b.Value]) + int64(ps.mm.K)
	if ps.alpha != 1 {
		acc++
	}
	if ps.c != nil && ps.beta != 0 {
		acc = max(acc, l.acc[ps.c.Value]) + 1
		if ps.beta != 1 {
			acc++
		}
	}
	if f16 {
		acc += F16Rounding
	}
	return acc
}

// addBias adds Beta*C to one result part (rows of pitch np at part).
func (l *lowerer) addBias(n *graph.Node, ps *productShape, s *prog.Superstep, tile int, box layout.Box, part prog.Ref, np int, bias []prog.Ref) error {
	c := ps.c
	ys := ps.y.Shape
	want := layout.Project(box, c.Shape, ys)
	ci := pieceOn(c, tile, want)
	if ci < 0 {
		return l.stepErr("bias tensor %d (%q) has no piece %s on tile %d, which the result piece %s needs", c.ID, c.Name, want, tile, box)
	}
	dt := l.g.Values[c.Value].DType
	if c.Kind != layout.RowMajor || dt != onnx.Float && dt != onnx.Float16 {
		return l.notLowered(n, "bias %q of type %s in a %s layout (a float or float16 row-major bias)", c.Name, dt, c.Kind)
	}
	out := l.resultGeometry(box)
	src := bias[ci]
	g := c.Geometry(ci)
	if dt == onnx.Float16 {
		// The FP16 bias piece converted (exactly) to FP32 in a scratch of
		// the same element pitch: the epilogue adds in FP32 and the result
		// is rounded to FP16 once, after it.
		g16 := g
		g.Size = 4
		tmp := l.out.NewBuffer(n.Name+".bias-f32", []int{tile}, g.Bytes(), 8, prog.AnyRegion)
		p := &codegen.Cast{Kind: codegen.F16ToF32, N: g16.Elems, Workers: codegen.Slots}
		s.Work[tile] = append(s.Work[tile], &prog.Kernel{What: n.Name + ".bias-f32", Params: p,
			Fixes: []prog.Fix{{Field: &p.X, Ref: src}, {Field: &p.Y, Ref: prog.Ref{Buf: tmp}, Write: true}}})
		src = prog.Ref{Buf: tmp}
	}
	if ps.beta != 1 {
		// Beta*C into a scratch the size of the bias piece.
		tmp := l.out.NewBuffer(n.Name+".beta", []int{tile}, g.Bytes(), 8, prog.AnyRegion)
		p := &codegen.Binary{Op: codegen.Mul, N: g.Elems, B: codegen.Operand{Const: true, Value: ps.beta}, Workers: codegen.Slots}
		s.Work[tile] = append(s.Work[tile], &prog.Kernel{What: n.Name + ".beta", Params: p,
			Fixes: []prog.Fix{{Field: &p.A.Addr, Ref: src}, {Field: &p.Y, Ref: prog.Ref{Buf: tmp}, Write: true}}})
		src = prog.Ref{Buf: tmp}
	}
	ops := []operand{{geo: out, ref: part, shape: ys}, {geo: g, ref: src, shape: c.Shape}}
	return l.elementwiseLaunches(n.Name+".bias", s, tile, binaryKernel(codegen.Add, codegen.F32), out, part, ys, ops)
}

// resultGeometry is the storage geometry of an FP32 result part: rows of
// the C block's pitch.
func (l *lowerer) resultGeometry(box layout.Box) layout.Geometry {
	t := &layout.Tensor{Size: 4, Kind: layout.RowMajor, Pad: layout.BGroup}
	return t.GeometryOf(box)
}

// exchangeNamed is exchange with separate names for the two supersteps.
func (l *lowerer) exchangeNamed(xname, cname string, m *moves) *prog.Superstep {
	if len(m.xfers) > 0 {
		x := l.add(obj.Exchange, xname)
		x.Xfers = multicast(m.xfers)
		l.cur = nil
	}
	m.recycle()
	if l.cur == nil || l.out.Steps[len(l.out.Steps)-1] != l.cur {
		l.cur = l.add(obj.Compute, cname)
	}
	s := l.cur
	ts := make([]int, 0, len(m.copies))
	for t := range m.copies {
		ts = append(ts, t)
	}
	sort.Ints(ts)
	for _, t := range ts {
		s.Work[t] = append(s.Work[t], m.copies[t]...)
	}
	return s
}

// appendOnce appends b to list unless it is there.
func appendOnce(list []*prog.Buffer, b *prog.Buffer) []*prog.Buffer {
	if slices.Contains(list, b) {
		return list
	}
	return append(list, b)
}
