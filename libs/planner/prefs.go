package planner

// What readers want of a value's default layout, carried back from them
// through the nodes that keep the layout's shape: the trailing axes a
// row operator needs whole (keep), and the alignment of each axis's
// splits (a product packs a value on groups of 4 rows or 16 columns).

import (
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

// prefs holds the preferences of every value.
type prefs struct {
	keep  map[int]int   // value -> trailing axes kept whole (at least 1)
	align map[int][]int // value -> per axis, splits on multiples of
}

func (p *prefs) alignOf(v *graph.Value) []int {
	a := p.align[v.Index]
	if a == nil {
		a = make([]int, len(v.Shape))
		for i := range a {
			a[i] = 1
		}
		p.align[v.Index] = a
	}
	return a
}

func (p *prefs) want(v *graph.Value, axis, w int) {
	if axis < 0 || axis >= len(v.Shape) {
		return
	}
	a := p.alignOf(v)
	a[axis] = max(a[axis], w)
}

// axisMap maps each axis of a reshape's output to the input axis with
// the same extent and the same elements before it (-1: none).
func axisMap(out, in []int64) []int {
	m := make([]int, len(out))
	po := int64(1)
	for d := range out {
		m[d] = -1
		pi := int64(1)
		for e := range in {
			if pi == po && in[e] == out[d] {
				m[d] = e
				break
			}
			pi *= in[e]
		}
		po *= out[d]
	}
	return m
}

// splitAxes returns, for each input axis of a reshape that the reshape
// splits into several output axes, the product of those axes but the
// first (0 for the others).
func splitAxes(in, out []int64) []int {
	res := make([]int, len(in))
	o := 0
	for e := range in {
		if o >= len(out) {
			break
		}
		// Output axes from o whose product is in[e].
		p := int64(1)
		k := o
		for k < len(out) && p < in[e] {
			p *= out[k]
			k++
		}
		if p != in[e] {
			return res
		}
		if k-o > 1 {
			inner := int64(1)
			for _, d := range out[o+1 : k] {
				inner *= d
			}
			res[e] = int(inner)
		}
		o = k
	}
	return res
}

// computePrefs carries the readers' wants back through the graph.
func (pl *planner) computePrefs() {
	p := &prefs{keep: map[int]int{}, align: map[int][]int{}}
	pl.prefs = p
	for i := len(pl.g.Nodes) - 1; i >= 0; i-- {
		n := pl.g.Nodes[i]
		out := n.Outputs[0]
		if pr := pl.prod[n.Index]; pr != nil {
			for k, o := range []*operand{&pr.a, &pr.b} {
				if sourceOf(o.root) != 0 {
					continue
				}
				r := len(o.root.Shape)
				gAx, w := r-2, layout.AGroup
				if k == 1 {
					gAx, w = r-1, layout.BGroup
				}
				if (transposesAfter(o, o.root)+gemmTrans(n, k == 0))%2 == 1 {
					gAx = 2*r - 3 - gAx
				}
				p.want(o.root, gAx, w)
			}
			continue
		}
		switch n.Op {
		case "Softmax", "LogSoftmax", "LayerNormalization", "ReduceMean", "ReduceSum":
			if axis, ok := rowAxis(n); ok {
				x := n.Inputs[0]
				p.keep[x.Index] = max(p.keep[x.Index], len(x.Shape)-axis)
			}
			if n.Op == "ReduceMean" || n.Op == "ReduceSum" {
				continue
			}
		case "Transpose":
			perm := n.Attrs.(*graph.Transpose).Perm
			if a := p.align[out.Index]; a != nil {
				for d, w := range a {
					p.want(n.Inputs[0], perm[d], w)
				}
			}
			continue
		case "Reshape", "Flatten", "Identity", "Squeeze", "Unsqueeze":
			if a := p.align[out.Index]; a != nil {
				for d, e := range axisMap(out.Shape, n.Inputs[0].Shape) {
					if e >= 0 {
						p.want(n.Inputs[0], e, a[d])
					}
				}
			}
			// An input axis the reshape splits into several: blocks of it
			// on multiples of the inner axes' size keep the reshape a view.
			for e, inner := range splitAxes(n.Inputs[0].Shape, out.Shape) {
				if inner > 1 {
					p.want(n.Inputs[0], e, inner)
				}
			}
			continue
		}
		// Elementwise and row operators keep their inputs' layout.
		for _, v := range n.Inputs {
			if v == nil || !sameShape(v.Shape, out.Shape) {
				continue
			}
			if a := p.align[out.Index]; a != nil {
				for d, w := range a {
					p.want(v, d, w)
				}
			}
			if k := p.keep[out.Index]; k > 0 && n.Op != "LayerNormalization" {
				p.keep[v.Index] = max(p.keep[v.Index], k)
			}
		}
	}
	// Products' result alignment.
	for _, pr := range pl.prod {
		r := len(pr.out.Shape)
		pr.align = layout.AGroup
		if a := p.align[pr.out.Index]; a != nil {
			pr.align = productAlign(a[r-2])
			// Columns: a multiple of 16 that the readers want.
			if c := a[r-1]; c > layout.BGroup && c%layout.BGroup == 0 {
				pr.nalign = c
			}
		}
		if pr.ocast == nil {
			continue
		}
		if a := p.align[pr.node.Outputs[0].Index]; a != nil {
			pr.align = productAlign(max(pr.align, a[r-2]))
		}
	}
	// Every value has its entry from here on: the search's workers read
	// them at once, and alignOf must not write.
	for _, v := range pl.g.Values {
		p.alignOf(v)
	}
}

// productAlign is the row alignment of a product's result blocks (4, 8
// or 16, what the matrix kernels take) for readers that want rows on
// multiples of want: want clamped to 4..16, or 4 when that is none of
// them (a reshape into heads of 9 rows wants multiples of 9; the readers
// then get a re-layout).
func productAlign(want int) int {
	a := min(max(layout.AGroup, want), layout.BGroup)
	if a != layout.AGroup && a != 8 && a != layout.BGroup {
		return layout.AGroup
	}
	return a
}

// minPieceElements is the fewest elements the default layout puts on a
// tile: below it, a kernel launch and its share of the exchange cost
// more than the work they spread.
const minPieceElements = 64

// defaultPieces is a value's default layout over the planner's tiles,
// from tile lo on (see piecesOf).
func (pl *planner) defaultPieces(v *graph.Value, lo int) []layout.Piece {
	return pl.piecesWith(v, pl.prefs.keep[v.Index], pl.prefs.alignOf(v), lo)
}

// piecesWith spreads v over the tiles, its last keep axes whole, axis d
// split on multiples of aligns[d] (the last axis at least on 8 bytes,
// so that pieces start rows 8-byte aligned), at least minPieceElements
// per tile.
func (pl *planner) piecesWith(v *graph.Value, keep int, aligns []int, lo int) []layout.Piece {
	return pl.piecesOf(v, keep, aligns, false, lo)
}

// piecesOf is piecesWith; strict keeps the alignments whatever the
// tiles it leaves idle. The pieces take consecutive tiles from lo on, or
// the last ones when they would run past the planner's tiles: callers
// pass the first tile of the data the value comes from, so that the
// layers of a deep model spread over the chip with their products
// instead of piling their code and buffers on the first tiles.
func (pl *planner) piecesOf(v *graph.Value, keep int, aligns []int, strict bool, lo int) []layout.Piece {
	shape := shapeOf(v)
	r := len(shape)
	if r == 0 {
		return []layout.Piece{{Tile: 0, Box: layout.Box{}}}
	}
	keep = min(keep, r)
	a := append([]int(nil), aligns...)
	a[r-1] = max(a[r-1], layout.DefaultPad(lower.DeviceSize(v.DType)))
	n := min(pl.tiles, max(1, layout.Full(shape).Volume()/minPieceElements))
	counts := layout.GridCounts(shape, keep, n, a)
	// An alignment readers want is a preference: when it leaves most of
	// the tiles idle, spread the rows and let the readers re-lay out.
	free := append([]int(nil), a...)
	for d := 0; d < r-1; d++ {
		free[d] = 1
	}
	if fc := layout.GridCounts(shape, keep, n, free); !strict && pieces(fc) >= 4*pieces(counts) {
		counts, a = fc, free
	}
	lo = max(0, min(lo, pl.tiles-pieces(counts)))
	return layout.Grid(shape, counts, a, lo)
}

// rowPieces is the default layout of a row operator's input: the axes
// from axis on whole (rowLayout).
func (pl *planner) rowPieces(v *graph.Value, axis, lo int) []layout.Piece {
	ps, _ := pl.rowLayout(v, axis, lo)
	return ps
}

// rowLayout is rowPieces, and whether it halved the alignment. The row
// alignment its readers want is halved while that shrinks the largest
// piece: a row operator's time is its tile's rows, and the readers that
// want 4-row blocks (a product's A operand) re-lay the result out anyway
// (BERT-base attention's softmax: 1536 rows on 384 tiles at 4 rows a
// tile, on 768 at 2). Not for the values pl.whole holds: their row
// operators' code did not fit (fitRows).
func (pl *planner) rowLayout(v *graph.Value, axis, lo int) ([]layout.Piece, bool) {
	keep := max(len(v.Shape)-axis, pl.prefs.keep[v.Index], 1)
	a := pl.prefs.alignOf(v)
	best, halved := pl.piecesWith(v, keep, a, lo), false
	for !pl.whole[v.Index] {
		h, ok := halvedAligns(a, len(v.Shape)-keep)
		if !ok {
			break
		}
		if ps := pl.piecesWith(v, keep, h, lo); largestPiece(ps) < largestPiece(best) {
			best, halved = ps, true
		}
		a = h
	}
	return best, halved
}

// halvedAligns returns aligns with the even ones of the first n axes
// halved, ok false when none is.
func halvedAligns(aligns []int, n int) ([]int, bool) {
	h := append([]int(nil), aligns...)
	ok := false
	for d := 0; d < min(n, len(h)); d++ {
		if h[d] > 1 && h[d]%2 == 0 {
			h[d] /= 2
			ok = true
		}
	}
	return h, ok
}

// largestPiece is the most elements a piece holds.
func largestPiece(ps []layout.Piece) int {
	m := 0
	for _, p := range ps {
		m = max(m, p.Box.Volume())
	}
	return m
}

// alignedPieces is the default layout with axis ax split on multiples of
// w.
func (pl *planner) alignedPieces(v *graph.Value, ax, w, lo int) []layout.Piece {
	a := append([]int(nil), pl.prefs.alignOf(v)...)
	a[ax] = max(a[ax], w)
	return pl.piecesOf(v, pl.prefs.keep[v.Index], a, true, lo)
}

func pieces(counts []int) int {
	n := 1
	for _, c := range counts {
		n *= c
	}
	return n
}
