package layout

import (
	"fmt"
	"sort"
)

// Run is a stretch of elements contiguous in the storage of a source
// piece and of a destination piece: N elements from element SrcOff of
// source piece Src to element DstOff of destination piece Dst.
type Run struct {
	Src, Dst       int
	SrcOff, DstOff int
	N              int
}

// holder picks, among the source pieces holding one box, the one a
// destination on tile t reads: its own tile's when it has one, else the
// nearest tile (the lower on a tie).
func holder(pieces []int, src *Tensor, t int) int {
	best := -1
	for _, i := range pieces {
		d := src.Pieces[i].Tile - t
		if d < 0 {
			d = -d
		}
		if best < 0 {
			best = i
			continue
		}
		bd := src.Pieces[best].Tile - t
		if bd < 0 {
			bd = -bd
		}
		if d < bd {
			best = i
		}
	}
	return best
}

// distinctPieces groups a tensor's pieces by box: the distinct boxes
// (sorted) and the piece indices holding each.
func distinctPieces(t *Tensor) ([]Box, [][]int) {
	idx := make([]int, len(t.Pieces))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return t.Pieces[idx[a]].Box.Less(t.Pieces[idx[b]].Box) })
	var boxes []Box
	var holders [][]int
	for _, i := range idx {
		p := t.Pieces[i]
		if n := len(boxes); n > 0 && boxes[n-1].Equal(p.Box) {
			holders[n-1] = append(holders[n-1], i)
			continue
		}
		boxes = append(boxes, p.Box)
		holders = append(holders, []int{i})
	}
	return boxes, holders
}

// boxIndex finds the distinct boxes intersecting a query box quickly.
// The boxes are numbered by their start on axis 0 (the order each
// reports them in), and searched on the axis where their starts vary
// most: a panel split only along its other axis would otherwise make
// every query scan every box.
type boxIndex struct {
	boxes   []Box
	holders [][]int
	ax      int   // the axis searched
	byAx    []int // box numbers by their start on ax (nil: ax is 0)
	maxLen  int   // longest extent on ax
	hits    []boxHit
}

type boxHit struct {
	k     int
	inter Box
}

func newBoxIndex(t *Tensor) *boxIndex {
	bx, hs := distinctPieces(t)
	ix := &boxIndex{boxes: bx, holders: hs}
	if len(t.Shape) == 0 {
		return ix
	}
	order := make([]int, len(bx))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return bx[order[a]][0].Lo < bx[order[b]][0].Lo })
	ix.boxes = make([]Box, len(bx))
	ix.holders = make([][]int, len(bx))
	for k, i := range order {
		ix.boxes[k], ix.holders[k] = bx[i], hs[i]
	}
	r := len(t.Shape)
	for _, b := range ix.boxes {
		r = min(r, len(b))
	}
	best := distinctStarts(ix.boxes, 0)
	for d := 1; d < r; d++ {
		if n := distinctStarts(ix.boxes, d); n > best {
			best, ix.ax = n, d
		}
	}
	if ix.ax != 0 {
		ix.byAx = make([]int, len(ix.boxes))
		for k := range ix.byAx {
			ix.byAx[k] = k
		}
		sort.SliceStable(ix.byAx, func(a, b int) bool { return ix.boxes[ix.byAx[a]][ix.ax].Lo < ix.boxes[ix.byAx[b]][ix.ax].Lo })
	}
	for _, b := range ix.boxes {
		ix.maxLen = max(ix.maxLen, b[ix.ax].Len())
	}
	return ix
}

// distinctStarts counts the distinct starts of boxes on axis d.
func distinctStarts(boxes []Box, d int) int {
	seen := make(map[int]struct{}, len(boxes))
	for _, b := range boxes {
		seen[b[d].Lo] = struct{}{}
	}
	return len(seen)
}

// box is the box at position j of the search order.
func (ix *boxIndex) box(j int) int {
	if ix.byAx == nil {
		return j
	}
	return ix.byAx[j]
}

// each calls f for every distinct box intersecting q, with the
// intersection (valid during the call only: each reuses it), in box
// number order.
func (ix *boxIndex) each(q Box, f func(k int, inter Box)) {
	if len(q) == 0 {
		for k := range ix.boxes {
			f(k, Box{})
		}
		return
	}
	ax := ix.ax
	j := sort.Search(len(ix.boxes), func(j int) bool { return ix.boxes[ix.box(j)][ax].Lo > q[ax].Lo-ix.maxLen })
	if ix.byAx == nil {
		// One intersection for the query, not one a hit (f may query
		// again: the box is this call's own).
		inter := make(Box, len(q))
		for ; j < len(ix.boxes) && ix.boxes[j][ax].Lo < q[ax].Hi; j++ {
			b := ix.boxes[j]
			if len(b) != len(q) {
				if in, ok := Intersect(b, q); ok {
					f(j, in)
				}
				continue
			}
			if intersectInto(inter, b, q) {
				f(j, inter)
			}
		}
		return
	}
	hits := ix.hits[:0]
	for ; j < len(ix.boxes) && ix.boxes[ix.byAx[j]][ax].Lo < q[ax].Hi; j++ {
		k := ix.byAx[j]
		if inter, ok := Intersect(ix.boxes[k], q); ok {
			hits = append(hits, boxHit{k, inter})
		}
	}
	sort.Slice(hits, func(a, b int) bool { return hits[a].k < hits[b].k })
	ix.hits = nil // f may query again
	for _, h := range hits {
		f(h.k, h.inter)
	}
	ix.hits = hits[:0]
}

// PermuteBox returns the box of a transposed value (output axis i is
// input axis perm[i]) for box b of the input, or, with inverse, the input
// box of output box b.
func PermuteBox(b Box, perm []int, inverse bool) Box {
	out := make(Box, len(b))
	for i, p := range perm {
		if inverse {
			out[p] = b[i]
		} else {
			out[i] = b[p]
		}
	}
	return out
}

// Identity is the identity permutation of rank r.
func Identity(r int) []int {
	p := make([]int, r)
	for i := range p {
		p[i] = i
	}
	return p
}

// KeepsInner reports whether a permutation keeps the last axis last.
func KeepsInner(perm []int) bool { return len(perm) == 0 || perm[len(perm)-1] == len(perm)-1 }

// PermuteRuns returns the runs that bring dst's elements from src, for
// dst a row-major layout of transpose(value of src, perm) (perm the
// identity for a plain re-layout). Both are row-major and perm keeps the
// last axis last. Every destination element is read from one source
// piece: the destination tile's own when it holds the element, else the
// nearest holder.
func PermuteRuns(src, dst *Tensor, perm []int) ([]Run, error) {
	if src.Kind != RowMajor || dst.Kind != RowMajor {
		return nil, fmt.Errorf("runs between %s and %s layouts", src.Kind, dst.Kind)
	}
	if !KeepsInner(perm) {
		return nil, fmt.Errorf("permutation %v moves the last axis", perm)
	}
	r := len(dst.Shape)
	ix := newBoxIndex(src)
	var out []Run
	for di, dp := range dst.Pieces {
		dg := dst.Geometry(di)
		q := PermuteBox(dp.Box, perm, true) // in src coordinates
		ix.each(q, func(k int, inter Box) {
			si := holder(ix.holders[k], src, dp.Tile)
			sg := src.Geometry(si)
			iy := PermuteBox(inter, perm, false)
			if r == 0 {
				out = append(out, Run{si, di, 0, 0, 1})
				return
			}
			// Merge axes from the innermost outwards while both sides
			// stay contiguous.
			L := iy[r-1].Len()
			outer := r - 1
			for outer > 0 {
				d := outer - 1
				if dg.Strides[d] != L || sg.Strides[perm[d]] != L {
					break
				}
				L *= iy[d].Len()
				outer = d
			}
			idx := make([]int, r)
			for d := range idx {
				idx[d] = iy[d].Lo
			}
			xi := make([]int, r)
			for {
				for d := range idx {
					xi[perm[d]] = idx[d]
				}
				out = append(out, Run{si, di, sg.Offset(xi), dg.Offset(idx), L})
				d := outer - 1
				for d >= 0 {
					idx[d]++
					if idx[d] < iy[d].Hi {
						break
					}
					idx[d] = iy[d].Lo
					d--
				}
				if d < 0 {
					break
				}
			}
		})
	}
	return out, nil
}

// segment is a stretch of a piece contiguous in the value's row-major
// order and in the piece's storage.
type segment struct {
	piece int
	flat  int // first element, row-major index in the value
	n     int
	off   int // element offset in the piece's storage
}

// segments returns the flat-contiguous stretches of piece i of t.
func segments(t *Tensor, i int) []segment {
	g := t.Geometry(i)
	b := t.Pieces[i].Box
	r := len(b)
	if r == 0 {
		return []segment{{i, 0, 1, 0}}
	}
	vs := make([]int, r) // the value's row-major strides
	acc := 1
	for d := r - 1; d >= 0; d-- {
		vs[d] = acc
		acc *= t.Shape[d]
	}
	L := b[r-1].Len()
	outer := r - 1
	for outer > 0 {
		d := outer - 1
		// Axis d merges when the inner box is whole in the value and
		// dense in storage.
		if b[outer].Len() != t.Shape[outer] || g.Strides[d] != L || vs[d] != L {
			break
		}
		L *= b[d].Len()
		outer = d
	}
	count := 1
	for d := range outer {
		count *= b[d].Len()
	}
	out := make([]segment, 0, count)
	idx := make([]int, r)
	for d := range idx {
		idx[d] = b[d].Lo
	}
	for {
		flat := 0
		for d := range idx {
			flat += idx[d] * vs[d]
		}
		out = append(out, segment{i, flat, L, g.Offset(idx)})
		d := outer - 1
		for d >= 0 {
			idx[d]++
			if idx[d] < b[d].Hi {
				break
			}
			idx[d] = b[d].Lo
			d--
		}
		if d < 0 {
			break
		}
	}
	return out
}

// ReshapeRuns returns the runs that bring dst's elements from src, for
// dst a row-major layout of a reshape of src's value (the same elements
// in the same row-major order).
func ReshapeRuns(src, dst *Tensor) ([]Run, error) {
	if src.Kind != RowMajor || dst.Kind != RowMajor {
		return nil, fmt.Errorf("runs between %s and %s layouts", src.Kind, dst.Kind)
	}
	if src.Elements() != dst.Elements() {
		return nil, fmt.Errorf("reshape of %d elements into %d", src.Elements(), dst.Elements())
	}
	_, holders := distinctPieces(src)
	// The source's stretches, one per distinct box (read from its first
	// holder; the holder is chosen per destination below).
	type srcSeg struct {
		segment
		box int
	}
	var ss []srcSeg
	for k, hs := range holders {
		for _, s := range segments(src, hs[0]) {
			ss = append(ss, srcSeg{s, k})
		}
	}
	sort.Slice(ss, func(a, b int) bool { return ss[a].flat < ss[b].flat })
	var out []Run
	for di, dp := range dst.Pieces {
		for _, d := range segments(dst, di) {
			k := sort.Search(len(ss), func(k int) bool { return ss[k].flat+ss[k].n > d.flat })
			for ; k < len(ss) && ss[k].flat < d.flat+d.n; k++ {
				s := ss[k]
				lo, hi := max(s.flat, d.flat), min(s.flat+s.n, d.flat+d.n)
				si := holder(holders[s.box], src, dp.Tile)
				// Offsets are the same in every holder of the box.
				out = append(out, Run{si, di, s.off + lo - s.flat, d.off + lo - d.flat, hi - lo})
			}
		}
	}
	return out, nil
}

// PanelRuns returns the runs between two panel layouts of one kind: a
// run per group of the intersection (w lanes times the k range), merged
// where both sides are contiguous.
func PanelRuns(src, dst *Tensor) ([]Run, error) {
	if src.Kind != dst.Kind || src.Kind == RowMajor {
		return nil, fmt.Errorf("panel runs between %s and %s layouts", src.Kind, dst.Kind)
	}
	ix := newBoxIndex(src)
	// Source geometries once per piece, not per intersection.
	sgs := make([]Geometry, len(src.Pieces))
	// The runs at most (before merging), so that out is allocated once:
	// growing it was most of the re-layouts' allocation.
	// A piece with the previous one's box (a replicated block) meets the
	// same source boxes: its count is the previous one's.
	n, pieceN := 0, 0
	var countedBox Box
	for _, dp := range dst.Pieces {
		if countedBox == nil || !dp.Box.Equal(countedBox) {
			pieceN, countedBox = 0, dp.Box
			ix.each(dp.Box, func(_ int, inter Box) { pieceN += panelRunsAtMost(src.Kind, inter) })
		}
		n += pieceN
	}
	out := make([]Run, 0, n)
	// A copy of the previous destination piece (a replicated block: the
	// same box on another tile) meets the same source boxes and takes
	// the same runs, but for its own piece and each box's holder nearest
	// its tile: the runs are copied, those two indices changed. prev
	// holds, per source box met, its runs' range in out.
	type met struct{ k, lo, hi int }
	var prev []met
	var prevBox Box
	for di, dp := range dst.Pieces {
		if prevBox != nil && dp.Box.Equal(prevBox) {
			for _, m := range prev {
				si := holder(ix.holders[m.k], src, dp.Tile)
				for _, ru := range out[m.lo:m.hi] {
					ru.Src, ru.Dst = si, di
					out = append(out, ru)
				}
			}
			continue
		}
		prev, prevBox = prev[:0], dp.Box
		dg := dst.Geometry(di)
		ix.each(dp.Box, func(k int, inter Box) {
			si := holder(ix.holders[k], src, dp.Tile)
			if sgs[si].Box == nil {
				sgs[si] = src.Geometry(si)
			}
			lo := len(out)
			out = appendPanelRuns(out, sgs[si], dg, inter, si, di)
			prev = append(prev, met{k, lo, len(out)})
		})
	}
	return out, nil
}

// panelRunsAtMost is the number of runs appendPanelRuns makes of the
// intersection inter of two panel pieces of kind before merging: one a
// group of lanes per index of the outer axes.
func panelRunsAtMost(kind Kind, inter Box) int {
	r := len(inter)
	gAx, w := r-2, AGroup
	if kind == BPanel {
		gAx, w = r-1, BGroup
	}
	n := (inter[gAx].Len() + w - 1) / w
	for d := 0; d < r-2; d++ {
		n *= inter[d].Len()
	}
	return n
}

// panelRuns is the runs of the intersection inter of two panel pieces.
func panelRuns(sg, dg Geometry, inter Box, si, di int) []Run {
	return appendPanelRuns(nil, sg, dg, inter, si, di)
}

// appendPanelRuns appends panelRuns' runs to out (merging only among
// them) without a slice of its own per intersection.
func appendPanelRuns(out []Run, sg, dg Geometry, inter Box, si, di int) []Run {
	r := len(inter)
	gAx, kAx, w := r-2, r-1, AGroup
	if sg.Kind == BPanel {
		gAx, kAx, w = r-1, r-2, BGroup
	}
	first := len(out)
	var idxBuf [8]int // no allocation for the usual ranks
	idx := idxBuf[:min(r, len(idxBuf))]
	if r > len(idxBuf) {
		idx = make([]int, r)
	}
	for d := 0; d < r-2; d++ {
		idx[d] = inter[d].Lo
	}
	for {
		for g := inter[gAx].Lo; g < inter[gAx].Hi; g += w {
			idx[gAx], idx[kAx] = g, inter[kAx].Lo
			run := Run{si, di, sg.Offset(idx), dg.Offset(idx), w * inter[kAx].Len()}
			if n := len(out); n > first && out[n-1].SrcOff+out[n-1].N == run.SrcOff && out[n-1].DstOff+out[n-1].N == run.DstOff && out[n-1].Src == si {
				out[n-1].N += run.N
				continue
			}
			out = append(out, run)
		}
		d := r - 3
		for d >= 0 {
			idx[d]++
			if idx[d] < inter[d].Hi {
				break
			}
			idx[d] = inter[d].Lo
			d--
		}
		if d < 0 {
			break
		}
	}
	return out
}

// Project returns the box of an input of shape in that a numpy
// broadcast to shape out reads for output box b: the trailing axes
// aligned, axes of size 1 read index 0.
func Project(b Box, in, out []int) Box {
	p := make(Box, len(in))
	off := len(out) - len(in)
	for d := range in {
		if in[d] == 1 && out[off+d] != 1 {
			p[d] = Range{0, 1}
		} else {
			p[d] = b[off+d]
		}
	}
	return p
}

// PanelRunsOf returns the runs of the intersection inter between a
// source and a destination panel piece of one kind, given their storage
// geometries (source piece 0 to destination piece 0).
func PanelRunsOf(sg, dg Geometry, inter Box) []Run { return panelRuns(sg, dg, inter, 0, 0) }

// AppendPanelRuns is PanelRunsOf appending to out (a caller's scratch).
func AppendPanelRuns(out []Run, sg, dg Geometry, inter Box) []Run {
	return appendPanelRuns(out, sg, dg, inter, 0, 0)
}

// Index finds the pieces of a list intersecting a box quickly: the pieces
// sorted by their start on the axis where starts vary most.
type Index struct {
	pieces []Piece
	order  []int
	ax     int
	maxLen int
}

// NewIndex indexes pieces.
func NewIndex(pieces []Piece) *Index {
	ix := &Index{pieces: pieces, order: make([]int, len(pieces))}
	for i := range ix.order {
		ix.order[i] = i
	}
	if len(pieces) == 0 || len(pieces[0].Box) == 0 {
		return ix
	}
	r := len(pieces[0].Box)
	best := -1
	for d := 0; d < r; d++ {
		seen := map[int]bool{}
		for _, p := range pieces {
			seen[p.Box[d].Lo] = true
		}
		if len(seen) > best {
			best, ix.ax = len(seen), d
		}
	}
	sort.SliceStable(ix.order, func(a, b int) bool { return pieces[ix.order[a]].Box[ix.ax].Lo < pieces[ix.order[b]].Box[ix.ax].Lo })
	for _, p := range pieces {
		ix.maxLen = max(ix.maxLen, p.Box[ix.ax].Len())
	}
	return ix
}

// Each calls f for every piece intersecting q, in index order, with the
// intersection (valid during the call only: Each reuses it).
func (ix *Index) Each(q Box, f func(i int, inter Box)) {
	if len(q) == 0 {
		for _, i := range ix.order {
			f(i, Box{})
		}
		return
	}
	ps := ix.pieces
	inter := make(Box, len(q))
	k := sort.Search(len(ix.order), func(k int) bool { return ps[ix.order[k]].Box[ix.ax].Lo > q[ix.ax].Lo-ix.maxLen })
	for ; k < len(ix.order) && ps[ix.order[k]].Box[ix.ax].Lo < q[ix.ax].Hi; k++ {
		i := ix.order[k]
		if intersectInto(inter, ps[i].Box, q) {
			f(i, inter)
		}
	}
}

// intersectInto is Intersect writing into out (of a's length).
func intersectInto(out, a, b Box) bool {
	for i := range a {
		lo, hi := max(a[i].Lo, b[i].Lo), min(a[i].Hi, b[i].Hi)
		if lo >= hi {
			return false
		}
		out[i] = Range{lo, hi}
	}
	return true
}
