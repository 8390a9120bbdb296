package planner

import (
	"fmt"
	"sort"
	"strings"

	"ipu.local/formats/plan"
	"ipu.local/libs/codegen"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

// split is a decision's split for a product.
func (pr *product) split(d plan.Decision) layout.Split {
	return layout.Split{GB: d.Split.B, GM: d.Split.M, GN: d.Split.N, GK: d.Split.K, Align: pr.align, NAlign: pr.nalign, BOrder: d.Split.Order == "b", ColCut: d.Split.Parts == "cols" && pr.colCut(d.Split.K), Rest: lower.RestOf(d.Split.Rest)}
}

// colCut reports whether the reduce-scatter of the product's split of k
// blocks may cut its blocks' columns (a decision's Split.Parts "cols"):
// not for a Gemm's bias, whose pieces under blocks cut differently would
// overlap (a bias row read in column parts on some tiles and whole on
// others).
func (pr *product) colCut(k int) bool {
	n := pr.node
	bias := len(n.Inputs) > 2 && n.Inputs[2] != nil && gemmBeta(n) != 0
	return k > 1 && !bias
}

// defaultParts is the reduce-scatter a decision of k blocks starts with:
// column parts where they may cut, except for an FP32 product (measured
// when FP32 products ran on the vector unit, which paid more for a launch
// per column part than the parts saved: the BERT-base FP32 layer's
// splits, 1288576 cycles without, 1346596 with); the analytic start
// tries the other on each product's best decision (otherParts). On the
// AMP, column parts by default would take that layer from 100,171 to
// 90,183 cycles, but leave mlp-small cheaper on 64 tiles than the
// 1,472-tile search finds (TestMoreTiles): the start's screen keeps no
// split as small as the 64-tile plan's.
func (pr *product) defaultParts(k int) string {
	if pr.colCut(k) && pr.typ != codegen.AMPFP32 {
		return "cols"
	}
	return ""
}

// otherParts returns d with the other reduce-scatter, false when d's
// blocks may not be cut in column parts.
func (pr *product) otherParts(d plan.Decision) (plan.Decision, bool) {
	if !pr.colCut(d.Split.K) {
		return d, false
	}
	if d.Split.Parts == "cols" {
		d.Split.Parts = ""
	} else {
		d.Split.Parts = "cols"
	}
	return d, true
}

// product plans a MatMul or Gemm: its operand blocks, its result pieces,
// the steps that fill the blocks, and the step itself.
func (b *builder) product(pr *product) error {
	n := pr.node
	d := b.dec[n.Index]
	s := pr.split(d)
	lo := d.Tiles[0]
	ins := make([]int, len(n.Inputs))
	// The operands cast before the exchange move to their blocks in one
	// re-layout step, after both casts: one exchange superstep for both.
	move := plan.Step{Node: -1, Kernel: "relayout"}
	var names []string
	for k, o := range []*operand{&pr.a, &pr.b} {
		id, cast, err := b.operandTensor(pr, o, k == 0, s, d)
		if err != nil {
			return err
		}
		ins[k] = id
		if cast >= 0 {
			move.Inputs = append(move.Inputs, cast)
			move.Outputs = append(move.Outputs, id)
			names = append(names, o.w.Name)
		}
	}
	if len(names) > 0 {
		move.Name = "relayout:" + strings.Join(names, "+")
		b.steps = append(b.steps, move)
	}
	y := b.add(pr.out, layout.RowMajor, layout.BGroup, layout.FromStep, false, b.pl.blocks.pieces(pr, s, lo, blocksResult))
	parts := reduceParts(s, pr.mm, lo)
	if s.Cut() || parts != "" {
		// Blocks cut differently (a cut split's parts, or column parts
		// of some blocks only): a broadcast input's projections may
		// overlap.
		b.cut[y.ID] = true
	}
	if len(n.Inputs) > 2 {
		ins[2] = -1
		if c := n.Inputs[2]; c != nil && gemmBeta(n) != 0 {
			want := projected(y.Pieces, shapeOf(c), y.Shape)
			if b.cut[y.ID] && !b.partitions(want, shapeOf(c)) {
				return &lower.NotLoweredError{Node: n.Name, Op: n.Op, Why: fmt.Sprintf("split %v: the bias %q would be read in overlapping boxes", s, c.Name)}
			}
			id, err := b.need(c, want, layout.DefaultPad(lower.DeviceSize(c.DType)))
			if err != nil {
				return err
			}
			ins[2] = id
		}
	}
	b.home[pr.out.Index] = y.ID
	if pr.ocast != nil {
		b.home[n.Outputs[0].Index] = y.ID // read through the cast only
	}
	st := plan.Step{Node: n.Index, Name: n.Name, Kernel: lower.KernelName(pr.typ), Inputs: ins, Outputs: []int{y.ID},
		Split: &plan.Split{B: d.Split.B, M: d.Split.M, N: d.Split.N, K: d.Split.K, Align: pr.align, NAlign: pr.nalign, Order: d.Split.Order, Parts: parts, Rest: lower.PlanRest(s)}, Tiles: d.Tiles,
		CastOrder: d.CastOrder, Stationary: d.Stationary}
	b.steps = append(b.steps, st)
	return nil
}

// reduceParts is the plan's record of how the split's reduce-scatter
// cuts its blocks: "cols" when it cuts some block's columns (the
// planner's splits let it, layout.Split.ColCut), else "".
func reduceParts(s layout.Split, mm layout.MatMul, lo int) string {
	for rel := range s.Tiles() {
		if tb := s.Block(mm, lo, rel); s.ColParts(tb.M1-tb.M0, tb.N1-tb.N0) > 1 {
			return "cols"
		}
	}
	return ""
}

func gemmBeta(n *graph.Node) float32 {
	if g, ok := n.Attrs.(*graph.Gemm); ok {
		return g.Beta
	}
	return 1
}

// operandTensor returns the panel tensor of one operand's blocks,
// adding the steps that fill it: none when the host or the tile images
// deliver the blocks, a cast on the blocks (cast after the exchange), a
// cast on panels spread over the tiles (cast before the exchange: the
// cast tensor is returned too, -1 otherwise, and the caller adds the
// re-layout to the blocks), or a pack from a row-major tensor.
func (b *builder) operandTensor(pr *product, o *operand, isA bool, s layout.Split, d plan.Decision) (id, cast int, err error) {
	lo := d.Tiles[0]
	kind := layout.BPanel
	name := "b"
	if isA {
		kind, name = layout.APanel, "a"
	}
	part := blocksB
	if isA {
		part = blocksA
	}
	blocks := b.pl.blocks.pieces(pr, s, lo, part)
	transposed := o.flips%2 == 1
	before := d.CastOrder == plan.BeforeExchange && d.Stationary != name
	if sourceOf(o.w) != layout.FromStep && blockView(o.w) {
		if before && o.hostBlocks() && copied(blocks, shapeOf(o.w)) {
			id, src := b.spreadHost(pr, o, isA, kind, transposed, blocks, d)
			return id, src, nil
		}
		// The host or the tile images hold the blocks' values.
		return b.external(o.w, kind, 0, transposed, blocks), -1, nil
	}
	if sourceOf(o.w) != layout.FromStep {
		// A view the host cannot deliver in blocks (a reshape that moves
		// elements between rows): delivered row-major, then packed.
		r := len(o.w.Shape)
		gAx, w := r-2, layout.AGroup
		if !isA {
			gAx, w = r-1, layout.BGroup
		}
		if transposed {
			gAx = 2*r - 3 - gAx
		}
		src := b.external(o.w, layout.RowMajor, layout.DefaultPad(lower.DeviceSize(o.w.DType)), false, sourcePieces(o.w, gAx, w, lo, d.Tiles[1]-lo))
		p := b.add(o.w, kind, 0, layout.FromStep, transposed, blocks)
		b.steps = append(b.steps, plan.Step{Node: -1, Name: "pack:" + pr.node.Name + "." + name, Kernel: "pack", Inputs: []int{src}, Outputs: []int{p.ID}})
		return p.ID, -1, nil
	}
	// Stationary names the operand cast after the exchange; none (""):
	// both are cast before it.
	if o.cast != nil && sourceOf(o.x) != layout.FromStep {
		id, cast = b.castOperand(pr, o, isA, before, kind, transposed, blocks, d)
		return id, cast, nil
	}
	// Packed from the root's row pieces, aligned on the panel's groups.
	rootFlips := transposesAfter(o, o.root) + gemmTrans(pr.node, isA)
	r := len(o.root.Shape)
	gAx := r - 2 // the root axis the panel's groups run along
	w := layout.AGroup
	if !isA {
		gAx, w = r-1, layout.BGroup
	}
	if rootFlips%2 == 1 {
		gAx = 2*r - 3 - gAx
	}
	var src int
	if sourceOf(o.root) != layout.FromStep {
		src = b.external(o.root, layout.RowMajor, layout.DefaultPad(lower.DeviceSize(o.root.DType)), false, sourcePieces(o.root, gAx, w, lo, d.Tiles[1]-lo))
	} else {
		h, err := b.input(o.root)
		if err != nil {
			return 0, -1, err
		}
		src = h
		if !groupAligned(b.tensors[h], gAx, w) {
			if src, err = b.need(o.root, b.pl.packSourcePieces(o.root, gAx, w, d.Tiles[0]), layout.DefaultPad(lower.DeviceSize(o.root.DType))); err != nil {
				return 0, -1, err
			}
		}
	}
	p := b.add(o.w, kind, 0, layout.FromStep, transposed, blocks)
	b.steps = append(b.steps, plan.Step{Node: -1, Name: "pack:" + pr.node.Name + "." + name, Kernel: "pack", Inputs: []int{src}, Outputs: []int{p.ID}})
	return p.ID, -1, nil
}

// castOperand adds the cast of an operand the host or the tile images
// deliver: on its blocks (after the exchange), or, before it, on panels
// spread over the product's tiles, whose cast tensor it returns too
// (else -1) for the caller's re-layout to the blocks in the cast type.
func (b *builder) castOperand(pr *product, o *operand, isA, before bool, kind layout.Kind, transposed bool, blocks []layout.Piece, d plan.Decision) (id, cast int) {
	xflip := (transposesAfter(o, o.x)+gemmTrans(pr.node, isA))%2 == 1
	src := blocks
	if before {
		lo, n := castTiles(pr, d, isA)
		ps, stride := spread(panelSourcePieces(pr, isA, lo, n), lo, n)
		src = apart(ps, blocks, lo, n, stride)
	}
	xt := b.external(o.x, kind, 0, xflip, src)
	ws := b.add(o.w, kind, 0, layout.FromStep, transposed, src)
	b.steps = append(b.steps, plan.Step{Node: o.cast.Index, Name: o.cast.Name, Kernel: "cast", Inputs: []int{xt}, Outputs: []int{ws.ID}})
	if !before {
		return ws.ID, -1
	}
	p := b.add(o.w, kind, 0, layout.FromStep, transposed, blocks)
	return p.ID, ws.ID
}

func gemmTrans(n *graph.Node, a bool) int {
	if g, ok := n.Attrs.(*graph.Gemm); ok && (a && g.TransA || !a && g.TransB) {
		return 1
	}
	return 0
}

// groupAligned reports whether every piece of t starts axis ax on a
// multiple of w.
func groupAligned(t *layout.Tensor, ax, w int) bool {
	for _, p := range t.Pieces {
		if p.Box[ax].Lo%w != 0 {
			return false
		}
	}
	return true
}

// sourcePieces spreads the rows of v over n tiles from lo for a pack: the
// leading axes split, the group axis ax on multiples of w.
func sourcePieces(v *graph.Value, ax, w, lo, n int) []layout.Piece {
	shape := shapeOf(v)
	r := len(shape)
	aligns := make([]int, r)
	if ax < r-1 {
		aligns[ax] = w
	}
	return layout.Grid(shape, layout.GridCounts(shape, 1, n, aligns), aligns, lo)
}

// packSourcePieces spreads the rows of v over the tiles from lo for a
// pack that re-lays them out anyway: the default layout with the group
// axis ax on multiples of w (alignedPieces) or, when that leaves more
// tiles idle, the leading axes, the groups, then the other of the last
// two axes (k) in chunks that keep a piece at least packPiece
// elements. The tiles then each pack a part of a block and send it to
// the block's copies, instead of one tile per group packing its whole k
// extent (a pack's cost grows with its elements, and the blocks of a
// product of few rows are long in k).
func (pl *planner) packSourcePieces(v *graph.Value, ax, w, lo int) []layout.Piece {
	aligned := pl.alignedPieces(v, ax, w, lo)
	shape := shapeOf(v)
	r := len(shape)
	if r < 2 {
		return aligned
	}
	aligns := make([]int, r)
	for d := range aligns {
		aligns[d] = 1
	}
	kAx := 2*r - 3 - ax
	pad := layout.DefaultPad(lower.DeviceSize(v.DType))
	aligns[ax] = w
	// k in even chunks (FP8 panels pair k), the last axis on whole
	// 8-byte words.
	group := min(w, shape[ax])
	chunk := 2 * max(1, (pl.packPiece()+2*group-1)/(2*group))
	if kAx == r-1 {
		chunk = (chunk + pad - 1) / pad * pad
	} else {
		aligns[r-1] = max(aligns[r-1], pad)
	}
	aligns[kAx] = chunk
	n := min(pl.tiles, max(1, layout.Full(shape).Volume()/pl.packPiece()))
	counts := layout.GridCounts(shape, 0, n, aligns)
	if pieces(counts) <= len(aligned) {
		return aligned
	}
	lo = max(0, min(lo, pl.tiles-pieces(counts)))
	return layout.Grid(shape, counts, aligns, lo)
}

// minPackPiece is the fewest elements of a piece packSourcePieces makes
// for a deep model, when the value is larger: a pack launch costs about
// 200 cycles more than its elements' (codegen.Pack), and every piece is
// one more source for each copy of its block to hear.
const minPackPiece = 256

// widePackPiece is minPackPiece for a wide model (pl.wide). Linked
// cycles at 256, 192, 160, 128, 96 and 64 elements: the BERT-base FP16
// layer 48501, 48157, 48736, 48026, 48362, 48665; BERT-small's FP16
// layer at 256, 128, 96 and 64: 18808, 18380, 18507, 18156, and its
// FP16 2-layer encoder 37707, 36473, 36912, 35917. 128 is the size
// that improves on 256 everywhere measured: the FP32 layers and the
// shared BERT layers are 0.05-1.9% faster too, the GPT-2 blocks and
// the other test models unchanged. The 12-layer BERT-base FP16 encoder
// (deep) took 1.8% more at 128 (1339745 against 1315979), so a deep
// model keeps 256.
const widePackPiece = 128

// packPiece is the fewest elements of a piece packSourcePieces makes.
func (pl *planner) packPiece() int {
	if pl.wide {
		return widePackPiece
	}
	return minPackPiece
}

// panelSourcePieces spreads an operand's panels over n tiles from lo for
// a cast before the exchange: the batch axes, then the group axis
// (groups whole), then the k axis split, as many pieces as tiles.
// Splitting k as well lets the tiles that hold copies of a block each
// cast a part of it, instead of one tile per group casting the whole
// block; k splits in chunks that keep a piece at least minCastPiece
// elements (whole pairs of k, as FP8 panels pad k to even), since every
// piece is one more transfer to each copy.
func panelSourcePieces(pr *product, isA bool, lo, n int) []layout.Piece {
	var shape []int
	if isA {
		shape = append(append([]int(nil), pr.mm.ABatch...), pr.mm.M, pr.mm.K)
	} else {
		shape = append(append([]int(nil), pr.mm.BBatch...), pr.mm.K, pr.mm.N)
	}
	r := len(shape)
	aligns := make([]int, r)
	for i := range aligns {
		aligns[i] = 1
	}
	counts := make([]int, r)
	left := n
	for d := 0; d < r-2; d++ {
		counts[d] = min(shape[d], left)
		left /= counts[d]
	}
	gAx, kAx, w := r-2, r-1, layout.AGroup
	if !isA {
		gAx, kAx, w = r-1, r-2, layout.BGroup
	}
	aligns[gAx] = w
	counts[gAx] = min(layout.Units(shape[gAx], w), left)
	left /= max(counts[gAx], 1)
	group := min(w, shape[gAx])
	aligns[kAx] = 2 * max(1, (minCastPiece+2*group-1)/(2*group))
	counts[kAx] = min(layout.Units(shape[kAx], aligns[kAx]), left)
	for d := range counts {
		counts[d] = max(counts[d], 1)
	}
	return layout.Grid(shape, counts, aligns, lo)
}

// apart places pieces on the tiles [lo, lo+n), one per tile, so that
// as few as possible lie on a tile holding a block they overlap: such a
// piece would reach its block by a local copy, a kernel launch after
// the exchange, instead of in the exchange that moves the others. Each
// piece in turn takes the first free tile from its own on, stride
// tiles at a time (wrapping, at most maxApartTries of them), that holds
// no block it overlaps, else the first free one.
func apart(ps, blocks []layout.Piece, lo, n, stride int) []layout.Piece {
	if len(ps) > n {
		return ps
	}
	held := make(map[int][]layout.Box, len(blocks))
	for _, b := range blocks {
		held[b.Tile] = append(held[b.Tile], b.Box)
	}
	holds := func(t int, box layout.Box) bool {
		for _, b := range held[t] {
			if _, ok := layout.Intersect(box, b); ok {
				return true
			}
		}
		return false
	}
	used := make([]bool, n)
	out := make([]layout.Piece, len(ps))
	for i, p := range ps {
		at, first := -1, -1
		for step := 0; step < n && at < 0; step++ {
			t := (p.Tile - lo + step*stride) % n
			if used[t] {
				continue
			}
			if first < 0 {
				first = t
			}
			if !holds(lo+t, p.Box) {
				at = t
			} else if step >= maxApartTries {
				break
			}
		}
		if at < 0 {
			at = first
		}
		for step := 0; at < 0 || used[at]; step++ {
			at = (p.Tile - lo + step) % n // every tile was tried busy: a free one
		}
		used[at] = true
		out[i] = layout.Piece{Tile: lo + at, Box: p.Box}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Tile < out[j].Tile })
	return out
}

// spread moves pieces placed one per tile from lo apart, one per
// supertile, when [lo, lo+n) has room for that: a sender whose
// supertile partner sends nothing can use both of the supertile's bus
// slots (send2), so its streams take half the cycles. It returns the
// pieces and the stride between them (1: left as they were).
func spread(ps []layout.Piece, lo, n int) ([]layout.Piece, int) {
	if len(ps) == 0 || 2*len(ps) > n || lo%2 != 0 {
		return ps, 1
	}
	stride := 2 * (n / (2 * len(ps)))
	out := make([]layout.Piece, len(ps))
	for i, p := range ps {
		out[i] = layout.Piece{Tile: lo + (p.Tile-lo)*stride, Box: p.Box}
	}
	return out, stride
}

// maxApartTries bounds the tiles apart tries for one piece.
const maxApartTries = 64

// minCastPiece is the fewest elements of a piece of an operand cast
// before the exchange (8 words of FP8), when the operand is larger.
var minCastPiece = 64

// castTiles returns the tiles [lo, lo+n) of the operand's pieces when
// it is cast before the exchange: all of the product's, or, when both
// operands are, a share in proportion to its elements (A first), so
// that no tile casts both.
func castTiles(pr *product, d plan.Decision, isA bool) (lo, n int) {
	lo, n = d.Tiles[0], d.Tiles[1]-d.Tiles[0]
	if d.Stationary != "" || n < 2 {
		return lo, n
	}
	ea := float64(pr.mm.M) * float64(pr.mm.K) * float64(prod(pr.mm.ABatch))
	eb := float64(pr.mm.K) * float64(pr.mm.N) * float64(prod(pr.mm.BBatch))
	na := min(n-1, max(1, int(float64(n)*ea/(ea+eb)+0.5)))
	if isA {
		return lo, na
	}
	return lo + na, n - na
}

func prod(xs []int) int {
	p := 1
	for _, x := range xs {
		p *= x
	}
	return p
}

// blockView reports whether a graph input or constant seen through data
// movement keeps its matrix view's blocks: every node on the way swaps
// the last two axes or reshapes without changing the last axis.
func blockView(v *graph.Value) bool {
	for v.Producer != nil {
		n := v.Producer
		in := n.Inputs[0]
		switch a := n.Attrs.(type) {
		case *graph.Transpose:
			if !lastTwoSwap(a.Perm) {
				return false
			}
		default:
			r, ri := len(v.Shape), len(in.Shape)
			if r == 0 || ri == 0 || v.Shape[r-1] != in.Shape[ri-1] {
				return false
			}
		}
		v = in
	}
	return true
}
