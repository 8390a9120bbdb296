package layout

import (
	"fmt"
	"sort"
)

// Block is the part [lo, hi) of an axis of n elements in block b of g:
// the first n mod g blocks one longer.
func Block(n, g, b int) (lo, hi int) {
	q, r := n/g, n%g
	lo = b*q + min(b, r)
	hi = lo + q
	if b < r {
		hi++
	}
	return lo, hi
}

// Units is the number of align-sized units of an axis of n elements.
func Units(n, align int) int { return (n + align - 1) / align }

// AlignedBlock is Block over the align-sized units of an axis of n
// elements, clipped to n: block b of g starts at a multiple of align.
// Blocks past the last unit are empty.
func AlignedBlock(n, g, b, align int) (lo, hi int) {
	u0, u1 := Block(Units(n, align), g, b)
	return min(n, u0*align), min(n, u1*align)
}

// MatMul is the shape of a matrix product as the tiles compute it: a
// batch of [M,K] x [K,N] products. Batch is the output's batch axes;
// ABatch and BBatch the operands' (numpy broadcasting: an operand's axis
// of size 1, or a missing leading axis, repeats its data).
type MatMul struct {
	Batch          []int
	ABatch, BBatch []int
	M, K, N        int
}

// Batches is the number of products.
func (mm MatMul) Batches() int {
	n := 1
	for _, d := range mm.Batch {
		n *= d
	}
	return n
}

// batchIndex returns the output batch coordinates of flat batch b.
func (mm MatMul) batchIndex(b int) []int {
	idx := make([]int, len(mm.Batch))
	for d := len(mm.Batch) - 1; d >= 0; d-- {
		idx[d] = b % mm.Batch[d]
		b /= mm.Batch[d]
	}
	return idx
}

// project returns an operand's batch box for output batch index idx.
func project(idx, batch []int) Box {
	box := make(Box, len(batch), len(batch)+2) // room for an operand's two axes
	off := len(idx) - len(batch)
	for d := range batch {
		i := idx[off+d]
		if batch[d] == 1 {
			i = 0
		}
		box[d] = Range{i, i + 1}
	}
	return box
}

// Split is a product's block counts: GB batch blocks, GM row blocks, GN
// column blocks, GK k blocks. Block (b, i, j, l) runs on tile
//
//	lo + ((b*GM + i)*GK + l)*GN + j
//
// so the GN tiles sharing an A block are contiguous (one multicast).
// Column blocks start at multiples of NAlign (at least, and a multiple
// of, BGroup: a reshape that splits the columns into heads keeps each
// block inside a head).
// Row blocks start at multiples of the row alignment (Align, at least
// AGroup; a product whose result a later product packs as a transposed B
// operand needs BGroup), column blocks at multiples of BGroup. With GK >
// 1 the partial products are reduce-scattered: tile (b, i, j, l) ends
// with row part l of block (b, i, j), summed.
//
// A split may be cut in two along the rows or the columns (Rest): the
// GM x GN grid then covers the axis up to Rest.At and a grid of its own
// the rest, so that a narrow last band of columns (rows) takes fewer,
// larger blocks along the other axis than the rest of the product. A
// plain grid of g x h blocks uses g*h tiles; a cut lets the blocks of
// the busiest tile be as small as the tiles allow when no grid does
// (2048 x 2048 results on 1472 tiles: 125 columns of panels in 57 x 25
// blocks of 9 x 5 row groups and panels, the last 3 panels in 43 blocks
// of at most 12 groups).
type Split struct {
	GB, GM, GN, GK, Align, NAlign int
	// BOrder numbers the blocks with the row blocks innermost:
	// lo + ((b*GN + j)*GK + l)*GM + i, so that the GM tiles sharing a B
	// block are contiguous (one multicast) instead of the GN sharing an A
	// block.
	BOrder bool
	// ColCut lets a k split's reduce-scatter cut the columns of a block
	// with fewer row groups than k blocks (ColParts).
	ColCut bool
	// Rest is the second part of a cut split (none when Rest.GM is 0).
	Rest Rest
}

// Rest is the second part of a split cut in two: the rows (Cols false)
// or the columns [At, end) in a grid of GM x GN blocks. The cut axis
// starts the rest at a multiple of its alignment. Each batch block's
// tiles hold the first part's blocks, then the rest's (numbered
// likewise, with the split's GK and order): block (b, i, j, l) of the
// rest is block (b, GM+i, j, l) of the split for a cut of the rows,
// (b, i, GN+j, l) for a cut of the columns.
type Rest struct {
	Cols   bool
	At     int
	GM, GN int
}

// Cut reports whether the split is cut in two.
func (s Split) Cut() bool { return s.Rest.GM > 0 }

func (s Split) rowAlign() int { return max(AGroup, s.Align) }

// RowAlign is the row alignment of the split's row blocks.
func (s Split) RowAlign() int { return s.rowAlign() }

func (s Split) colAlign() int { return max(BGroup, s.NAlign) }

// ColAlign is the column alignment of the split's column blocks.
func (s Split) ColAlign() int { return s.colAlign() }

// perBatch is the tiles of one batch block: the first part's, then the
// rest's.
func (s Split) perBatch() int { return s.GK * (s.GM*s.GN + s.Rest.GM*s.Rest.GN) }

// Tiles is the tile count the split uses.
func (s Split) Tiles() int { return max(s.GB, 1) * s.perBatch() }

func (s Split) String() string {
	str := fmt.Sprintf("b=%d m=%d n=%d k=%d", max(s.GB, 1), s.GM, s.GN, s.GK)
	if s.Cut() {
		axis := "m"
		if s.Rest.Cols {
			axis = "n"
		}
		str += fmt.Sprintf(" rest %s>=%d m=%d n=%d", axis, s.Rest.At, s.Rest.GM, s.Rest.GN)
	}
	return str
}

// BBlock is the batch block b.
func (s Split) BBlock(nb, b int) (lo, hi int) { return Block(nb, max(s.GB, 1), b) }

// Ranges returns the rows [m0, m1) and columns [n0, n1) of block (i, j)
// (the rest's numbered after the first part's along the cut axis).
func (s Split) Ranges(mm MatMul, i, j int) (m0, m1, n0, n1 int) {
	m, n, gm, gn := mm.M, mm.N, s.GM, s.GN
	var mOff, nOff int
	switch {
	case !s.Cut():
	case s.Rest.Cols && j >= s.GN:
		nOff, j, gm, gn = s.Rest.At, j-s.GN, s.Rest.GM, s.Rest.GN
	case s.Rest.Cols:
		n = s.Rest.At
	case i >= s.GM:
		mOff, i, gm, gn = s.Rest.At, i-s.GM, s.Rest.GM, s.Rest.GN
	default:
		m = s.Rest.At
	}
	m0, m1 = AlignedBlock(m-mOff, gm, i, s.rowAlign())
	n0, n1 = AlignedBlock(n-nOff, gn, j, s.colAlign())
	return m0 + mOff, m1 + mOff, n0 + nOff, n1 + nOff
}

// KBlock is the k block l of K terms.
func (s Split) KBlock(k, l int) (lo, hi int) { return Block(k, s.GK, l) }

// PartBlock is the row part l of a block of rows rows that tile (b, i, j,
// l) owns after the reduce-scatter of a k split: whole row groups.
func (s Split) PartBlock(rows, l int) (lo, hi int) { return AlignedBlock(rows, s.GK, l, s.rowAlign()) }

// ColParts is the number of column parts of a block of rows x cols
// after the reduce-scatter of a k split: 1 (each tile owns a row part of
// the whole width) unless ColCut is set and the block has fewer row
// groups than the split has k blocks; then each of those row groups is
// also cut in column parts (whole panels of BGroup), so that more of the
// k blocks' tiles share the sums (a block of 4 row groups under 8 k
// blocks: 8 parts of a row group and half the columns instead of 4 parts
// of a row group and 4 tiles owning none). It takes the fewest parts
// whose widest is as narrow as the k blocks allow: 3 parts of 2 panels
// rather than 4 of 2, 2, 1 and 1, as many tiles fewer and the parts as
// wide, so that one product kernel per panel of a part fills them all
// (lower's matmulKernels).
func (s Split) ColParts(rows, cols int) int {
	ru := Units(rows, s.rowAlign())
	if !s.ColCut || ru < 1 || ru >= s.GK {
		return 1
	}
	units := Units(cols, BGroup)
	most := max(1, min(units, s.GK/ru))
	widest := Units(units, most)
	for g := 1; g < most; g++ {
		if Units(units, g) == widest {
			return g
		}
	}
	return most
}

// PartBox is the part of a block of rows x cols that tile (b, i, j, l)
// owns after the reduce-scatter of a k split: rows [lo, hi) (whole row
// groups) and columns [clo, chi) (whole panels; all of them when
// ColParts is 1, as PartBlock). Parts past the last are empty (lo ==
// hi).
func (s Split) PartBox(rows, cols, l int) (lo, hi, clo, chi int) {
	gc := s.ColParts(rows, cols)
	if gc == 1 {
		lo, hi = s.PartBlock(rows, l)
		return lo, hi, 0, cols
	}
	ru := Units(rows, s.rowAlign())
	if l >= ru*gc {
		return rows, rows, 0, cols
	}
	lo, hi = AlignedBlock(rows, ru, l/gc, s.rowAlign())
	clo, chi = AlignedBlock(cols, gc, l%gc, BGroup)
	return lo, hi, clo, chi
}

// Fits reports whether s has at most one block per unit of mm, so that
// no block is empty.
func (s Split) Fits(mm MatMul) bool {
	gb := max(s.GB, 1)
	ra, ca := s.rowAlign(), s.colAlign()
	if gb > mm.Batches() || s.GM < 1 || s.GN < 1 || s.GK < 1 || s.GK > mm.K {
		return false
	}
	if !s.Cut() {
		return s.Rest == Rest{} && s.GM <= Units(mm.M, ra) && s.GN <= Units(mm.N, ca)
	}
	r := s.Rest
	if r.GN < 1 {
		return false
	}
	if r.Cols {
		return r.At > 0 && r.At < mm.N && r.At%ca == 0 && s.GM <= Units(mm.M, ra) && s.GN <= Units(r.At, ca) &&
			r.GM <= Units(mm.M, ra) && r.GN <= Units(mm.N-r.At, ca)
	}
	return r.At > 0 && r.At < mm.M && r.At%ra == 0 && s.GM <= Units(r.At, ra) && s.GN <= Units(mm.N, ca) &&
		r.GM <= Units(mm.M-r.At, ra) && r.GN <= Units(mm.N, ca)
}

// Tile returns the tile of block (b, i, j, l) over a range starting at lo
// (a block of the rest numbered after the first part's along the cut
// axis).
func (s Split) Tile(lo, b, i, j, l int) int {
	lo += b * s.perBatch()
	gm, gn := s.GM, s.GN
	if s.Cut() && (s.Rest.Cols && j >= s.GN || !s.Rest.Cols && i >= s.GM) {
		lo += s.GK * s.GM * s.GN
		if s.Rest.Cols {
			j -= s.GN
		} else {
			i -= s.GM
		}
		gm, gn = s.Rest.GM, s.Rest.GN
	}
	if s.BOrder {
		return lo + (j*s.GK+l)*gm + i
	}
	return lo + (i*s.GK+l)*gn + j
}

// Coords returns the block of tile lo+rel.
func (s Split) Coords(rel int) (b, i, j, l int) {
	b, rel = rel/s.perBatch(), rel%s.perBatch()
	gm, gn := s.GM, s.GN
	rest := s.Cut() && rel >= s.GK*s.GM*s.GN
	if rest {
		rel -= s.GK * s.GM * s.GN
		gm, gn = s.Rest.GM, s.Rest.GN
	}
	if s.BOrder {
		i = rel % gm
		rel /= gm
		l = rel % s.GK
		j = rel / s.GK
	} else {
		j = rel % gn
		rel /= gn
		l = rel % s.GK
		i = rel / s.GK
	}
	switch {
	case rest && s.Rest.Cols:
		j += s.GN
	case rest:
		i += s.GM
	}
	return b, i, j, l
}

// Block of a product on one tile: the batch indices [B0, B1) (flat, of
// the output's batch axes), rows [M0, M1), k [K0, K1), columns [N0, N1),
// and the part it owns after the reduction: rows [P0, P1) (relative to
// M0) and columns [Q0, Q1) (relative to N0; all of them unless the
// split's ColParts cuts the block's columns).
type TileBlock struct {
	Tile           int
	B0, B1         int
	M0, M1, K0, K1 int
	N0, N1         int
	P0, P1         int
	Q0, Q1         int
}

// Blocks returns the block of every tile of s from lo, in tile order.
func (s Split) Blocks(mm MatMul, lo int) []TileBlock {
	out := make([]TileBlock, 0, s.Tiles())
	for rel := 0; rel < s.Tiles(); rel++ {
		out = append(out, s.Block(mm, lo, rel))
	}
	return out
}

// Block returns the block of tile lo+rel (Blocks' element rel, without
// the slice: the planner's builds take every split's blocks for each
// point it prices).
func (s Split) Block(mm MatMul, lo, rel int) TileBlock {
	b, i, j, l := s.Coords(rel)
	var tb TileBlock
	tb.Tile = lo + rel
	tb.B0, tb.B1 = s.BBlock(mm.Batches(), b)
	tb.M0, tb.M1, tb.N0, tb.N1 = s.Ranges(mm, i, j)
	tb.K0, tb.K1 = s.KBlock(mm.K, l)
	tb.P0, tb.P1, tb.Q0, tb.Q1 = 0, tb.M1-tb.M0, 0, tb.N1-tb.N0
	if s.GK > 1 {
		tb.P0, tb.P1, tb.Q0, tb.Q1 = s.PartBox(tb.M1-tb.M0, tb.N1-tb.N0, l)
	}
	return tb
}

// OperandPieces returns the pieces of the A operand (a) or the B operand
// of mm under s from lo, in the operand's coordinates (batch axes, then
// the matrix). A split cut along the columns gives its parts' A blocks
// different rows (along the rows, B blocks different columns): those
// blocks are cut at the other part's block edges, so that the distinct
// boxes stay a partition; a block's pieces lie on its tile one after the
// other, in the order of the rows (columns), as the whole block would
// (EdgeCut).
func (s Split) OperandPieces(mm MatMul, lo int, a bool) []Piece {
	var edges []int
	if s.EdgeCut(a) {
		edges = s.edges(mm)
	}
	n := 0
	for rel := range s.Tiles() {
		b, _, _, _ := s.Coords(rel)
		b0, b1 := s.BBlock(mm.Batches(), b)
		n += b1 - b0
	}
	out := make([]Piece, 0, n) // one a block's batch, unless edges cut it
	for rel := range s.Tiles() {
		tb := s.Block(mm, lo, rel)
		for b := tb.B0; b < tb.B1; b++ {
			idx := mm.batchIndex(b)
			if a {
				for _, r := range cutAt(Range{tb.M0, tb.M1}, edges) {
					out = append(out, Piece{tb.Tile, append(project(idx, mm.ABatch), r, Range{tb.K0, tb.K1})})
				}
				continue
			}
			for _, r := range cutAt(Range{tb.N0, tb.N1}, edges) {
				out = append(out, Piece{tb.Tile, append(project(idx, mm.BBatch), Range{tb.K0, tb.K1}, r)})
			}
		}
	}
	return out
}

// EdgeCut reports whether the operand's blocks (A: a) may be cut in
// pieces along their rows (A) or columns (B): a split cut in two along
// the other axis.
func (s Split) EdgeCut(a bool) bool { return s.Cut() && a == s.Rest.Cols }

// edges returns the block edges of a cut split along the axis it does
// not cut (rows for a cut of the columns), over both parts, sorted.
func (s Split) edges(mm MatMul) []int {
	seen := map[int]bool{}
	var out []int
	add := func(v int) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	if s.Rest.Cols {
		for _, g := range []int{s.GM, s.Rest.GM} {
			for i := 0; i < g; i++ {
				lo, _ := AlignedBlock(mm.M, g, i, s.rowAlign())
				add(lo)
			}
		}
	} else {
		for _, g := range []int{s.GN, s.Rest.GN} {
			for j := 0; j < g; j++ {
				lo, _ := AlignedBlock(mm.N, g, j, s.colAlign())
				add(lo)
			}
		}
	}
	sort.Ints(out)
	return out
}

// cutAt cuts r at the edges strictly inside it.
func cutAt(r Range, edges []int) []Range {
	var out []Range
	lo := r.Lo
	for _, e := range edges[sort.SearchInts(edges, r.Lo+1):] {
		if e >= r.Hi {
			break
		}
		out = append(out, Range{lo, e})
		lo = e
	}
	return append(out, Range{lo, r.Hi})
}

// ResultPieces returns the pieces of the product's result [batch..., M,
// N]: each tile's row part of its block, per batch index (none for an
// empty part).
func (s Split) ResultPieces(mm MatMul, lo int) []Piece {
	n := 0 // at most (a tile whose part is empty has no pieces)
	for rel := range s.Tiles() {
		b, _, _, _ := s.Coords(rel)
		b0, b1 := s.BBlock(mm.Batches(), b)
		n += b1 - b0
	}
	out := make([]Piece, 0, n)
	for rel := range s.Tiles() {
		tb := s.Block(mm, lo, rel)
		if tb.P0 == tb.P1 {
			continue
		}
		for b := tb.B0; b < tb.B1; b++ {
			box := make(Box, 0, len(mm.Batch)+2)
			for _, i := range mm.batchIndex(b) {
				box = append(box, Range{i, i + 1})
			}
			box = append(box, Range{tb.M0 + tb.P0, tb.M0 + tb.P1}, Range{tb.N0 + tb.Q0, tb.N0 + tb.Q1})
			out = append(out, Piece{tb.Tile, box})
		}
	}
	return out
}

// BatchIndex returns the output batch coordinates of flat batch b.
func (mm MatMul) BatchIndex(b int) []int { return mm.batchIndex(b) }

// ProjectBatch returns an operand's batch box (batch axes batch) for the
// output batch coordinates idx.
func ProjectBatch(idx, batch []int) Box { return project(idx, batch) }
