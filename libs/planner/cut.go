package planner

// Splits cut in two (layout.Rest): when no grid of at most the budget's
// tiles gives the busiest tile as few items as the tiles allow, a grid
// over all but a narrow last band of columns (rows) and a coarser grid
// of its own over that band may. The start screens them after the
// grids and prices the best one when its score beats every grid's.

import (
	"ipu.local/formats/plan"
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
)

// cutPart is one part of a cut split: its extent (m rows, n columns)
// and grid.
type cutPart struct{ m, n, gm, gn int }

// cut returns the best split of pr within budget tiles cut in two along
// the rows or the columns whose score is below best (the best grid's;
// negative: no grid fits), and whether there is one; of equal scores,
// the one of fewer tiles.
//
// Not with a k split: its reduce-scatter over every tile adds exchange
// code to each, which the search's memory check does not see (the
// 12-layer BERT-base encoder's plan with cut k splits did not fit its
// tiles' memory when linked).
func (pl *planner) cut(pr *product, budget int, best int64) (layout.Split, bool) {
	var found scored
	ok := false
	// worse reports whether a score cannot win (a split scoring it ties
	// the one found at best).
	worse := func(sc int64) bool { return best >= 0 && sc >= best || ok && sc > found.score }
	consider := func(s layout.Split, sc int64) {
		if !worse(sc) && (!ok || sc < found.score || s.Tiles() < found.s.Tiles()) {
			found, ok = scored{s, sc}, true
		}
	}
	for _, gb := range distinct(pr.mm.Batches(), budget) {
		for _, cols := range []bool{true, false} {
			pl.cutAxis(pr, gb, budget/gb, cols, worse, consider)
		}
	}
	return found.s, ok
}

// cutAxis offers consider the splits of pr in gb batch blocks of t tiles
// each cut along the columns (cols) or the rows: the first part c units
// a block along the cut axis, as many whole blocks as fit, in every
// count of blocks along the other axis; the rest (fewer than c units)
// in each count of blocks along the cut axis, with as many along the
// other as the tiles left allow. worse prunes a first part that cannot
// win.
func (pl *planner) cutAxis(pr *product, gb, t int, cols bool, worse func(int64) bool, consider func(layout.Split, int64)) {
	ra := max(layout.AGroup, pr.align)
	ca := max(layout.BGroup, pr.nalign)
	cu, ou, cAlign := layout.Units(pr.mm.N, ca), layout.Units(pr.mm.M, ra), ca
	if !cols {
		cu, ou, cAlign = ou, cu, ra
	}
	for _, g0 := range distinct(cu, t) {
		c := (cu + g0 - 1) / g0
		g, r := cu/c, cu%c
		if r == 0 {
			continue
		}
		at := g * c * cAlign
		for _, o := range distinct(ou, t/g) {
			left := t - o*g
			if left < 1 {
				continue
			}
			first := cutPart{pr.mm.M, at, o, g}
			if !cols {
				first = cutPart{at, pr.mm.N, g, o}
			}
			main := pl.cutBlock(pr, gb, first)
			sc, good := pl.score(pr, main)
			if !good || worse(sc) {
				continue
			}
			for _, rg := range distinct(r, left) {
				ro := min(ou, left/rg)
				rest := cutPart{pr.mm.M, pr.mm.N - at, ro, rg}
				if !cols {
					rest = cutPart{pr.mm.M - at, pr.mm.N, rg, ro}
				}
				if s, sc, good := pl.cutSplit(pr, gb, cols, at, first, rest, main, sc); good {
					consider(s, sc)
				}
			}
		}
	}
}

// cutBlock is the largest block of one part of a cut split (no k split).
func (pl *planner) cutBlock(pr *product, gb int, p cutPart) block {
	ra := max(layout.AGroup, pr.align)
	ca := max(layout.BGroup, pr.nalign)
	mu, nu := layout.Units(p.m, ra), layout.Units(p.n, ca)
	return block{bb: (pr.mm.Batches() + gb - 1) / gb, gk: 1, mb: min(p.m, (mu+p.gm-1)/p.gm*ra), kb: pr.mm.K, nb: min(p.n, (nu+p.gn-1)/p.gn*ca)}
}

// cutSplit scores a cut split given its first part's block and score:
// the worse part's score, the memory of the largest operands of either
// part (a tile's buffers are the largest tile's). False when it does
// not fit, the kernel refuses a block, or a part copies a constant
// operand to more than two tiles.
func (pl *planner) cutSplit(pr *product, gb int, cols bool, at int, first, rest cutPart, main block, mainScore int64) (layout.Split, int64, bool) {
	if isConst(pr.a.w) && max(first.gn, rest.gn) > 2 || isConst(pr.b.w) && max(first.gm, rest.gm) > 2 {
		return layout.Split{}, 0, false
	}
	rb := pl.cutBlock(pr, gb, rest)
	sc, good := pl.score(pr, rb)
	if !good {
		return layout.Split{}, 0, false
	}
	most := main
	most.mb, most.nb = max(main.mb, rb.mb), max(main.nb, rb.nb)
	// The screen's memory share is a guess; a cut split, priced besides
	// the grids, is screened only against the tile's usable memory (the
	// pricing checks the program's).
	usable := pl.usable - codeAllowance
	if most.bytes(int64(pr.typ.Size())) > usable || most.constBytes(pr) > pl.constShare || !pl.underLimit(pr, most) {
		return layout.Split{}, 0, false
	}
	s := withOrder(layout.Split{GB: gb, GM: first.gm, GN: first.gn, GK: 1, Align: pr.align, NAlign: pr.nalign,
		Rest: layout.Rest{Cols: cols, At: at, GM: rest.gm, GN: rest.gn}})
	return s, max(mainScore, sc), true
}

// parts returns the parts of a split: one grid, or the two of a cut.
func parts(s layout.Split, mm layout.MatMul) []cutPart {
	r := s.Rest
	switch {
	case !s.Cut():
		return []cutPart{{mm.M, mm.N, s.GM, s.GN}}
	case r.Cols:
		return []cutPart{{mm.M, r.At, s.GM, s.GN}, {mm.M, mm.N - r.At, r.GM, r.GN}}
	}
	return []cutPart{{r.At, mm.N, s.GM, s.GN}, {mm.M - r.At, mm.N, r.GM, r.GN}}
}

// cutNode returns the node of the point's first split cut in two, nil
// for none.
func (pt point) cutNode(g *graph.Graph) *graph.Node {
	for _, d := range pt {
		if d.Split.Rest != nil {
			return g.Nodes[d.Node]
		}
	}
	return nil
}

// tryCut prices product i of pt under its cut split, with the cast
// order and stationary operand of its best grid decision (every option
// when no grid fits), and returns the cheapest when it is cheaper than
// bestR (nil: not). A cut point that does not fit, is not lowered or
// fails to price is no candidate.
func (pl *planner) tryCut(pt point, i int, cut layout.Split, best plan.Decision, bestR *result) (plan.Decision, *result) {
	pr := pl.products[i]
	orders, stats := pl.options(pr)
	if bestR != nil {
		orders, stats = []string{best.CastOrder}, []string{best.Stationary}
	}
	var ds []plan.Decision
	for _, o := range orders {
		for _, st := range stats {
			d := decision(pr.idx, cut, o, st)
			d.Split.Parts = pr.defaultParts(d.Split.K)
			ds = append(ds, d)
		}
	}
	ceil := int64(noCeiling)
	if bestR != nil {
		ceil = bestR.cost()
	}
	d, r, _, err := pl.cheapest(pt, i, ds, ceil)
	if err != nil || r == nil || bestR != nil && r.cost() >= bestR.cost() {
		return d, nil
	}
	return d, r
}

// projectable reports whether every broadcast input of elementwise node
// n projected onto pieces of its output is a partition of the input
// (a split cut in two blocks the columns differently in its parts, so
// their projections onto a bias row overlap).
func (b *builder) projectable(n *graph.Node, pieces []layout.Piece) bool {
	out := shapeOf(n.Outputs[0])
	for _, v := range n.Inputs {
		if v == nil || sameShape(v.Shape, n.Outputs[0].Shape) || v.Const != nil && v.NumElements() == 1 && n.Op != "Cast" && len(n.Inputs) > 1 {
			continue
		}
		if !b.partitions(projected(pieces, shapeOf(v), out), shapeOf(v)) {
			return false
		}
	}
	return true
}

// partitions reports whether pieces' distinct boxes partition a value of
// the shape.
func (b *builder) partitions(pieces []layout.Piece, shape []int) bool {
	t := &layout.Tensor{Size: 4, Kind: layout.RowMajor, Pad: 1, Shape: shape, Pieces: append([]layout.Piece(nil), pieces...)}
	t.SortPieces()
	return t.Validate(b.pl.tiles) == nil
}
