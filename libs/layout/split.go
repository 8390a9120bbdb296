package layout

import "fmt"

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
	box := make(Box, len(batch))
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
type Split struct {
	GB, GM, GN, GK, Align, NAlign int
	// BOrder numbers the blocks with the row blocks innermost:
	// lo + ((b*GN + j)*GK + l)*GM + i, so that the GM tiles sharing a B
	// block are contiguous (one multicast) instead of the GN sharing an A
	// block.
	BOrder bool
}

func (s Split) rowAlign() int { return max(AGroup, s.Align) }

// RowAlign is the row alignment of the split's row blocks.
func (s Split) RowAlign() int { return s.rowAlign() }

func (s Split) colAlign() int { return max(BGroup, s.NAlign) }

// ColAlign is the column alignment of the split's column blocks.
func (s Split) ColAlign() int { return s.colAlign() }

// Tiles is the tile count the split uses.
func (s Split) Tiles() int { return max(s.GB, 1) * s.GM * s.GN * s.GK }

func (s Split) String() string {
	return fmt.Sprintf("b=%d m=%d n=%d k=%d", max(s.GB, 1), s.GM, s.GN, s.GK)
}

// BBlock is the batch block b.
func (s Split) BBlock(nb, b int) (lo, hi int) { return Block(nb, max(s.GB, 1), b) }

// MBlock is the row block i of M rows.
func (s Split) MBlock(m, i int) (lo, hi int) { return AlignedBlock(m, s.GM, i, s.rowAlign()) }

// NBlock is the column block j of N columns.
func (s Split) NBlock(n, j int) (lo, hi int) { return AlignedBlock(n, s.GN, j, s.colAlign()) }

// KBlock is the k block l of K terms.
func (s Split) KBlock(k, l int) (lo, hi int) { return Block(k, s.GK, l) }

// PartBlock is the row part l of a block of rows rows that tile (b, i, j,
// l) owns after the reduce-scatter of a k split: whole row groups.
func (s Split) PartBlock(rows, l int) (lo, hi int) { return AlignedBlock(rows, s.GK, l, s.rowAlign()) }

// Fits reports whether s has at most one block per unit of mm, so that
// no block is empty.
func (s Split) Fits(mm MatMul) bool {
	gb := max(s.GB, 1)
	return gb <= mm.Batches() && s.GM >= 1 && s.GN >= 1 && s.GK >= 1 &&
		s.GM <= Units(mm.M, s.rowAlign()) && s.GN <= Units(mm.N, s.colAlign()) && s.GK <= mm.K
}

// Tile returns the tile of block (b, i, j, l) over a range starting at lo.
func (s Split) Tile(lo, b, i, j, l int) int {
	if s.BOrder {
		return lo + ((b*s.GN+j)*s.GK+l)*s.GM + i
	}
	return lo + ((b*s.GM+i)*s.GK+l)*s.GN + j
}

// Coords returns the block of tile lo+rel.
func (s Split) Coords(rel int) (b, i, j, l int) {
	if s.BOrder {
		i = rel % s.GM
		rel /= s.GM
		l = rel % s.GK
		rel /= s.GK
		j = rel % s.GN
		b = rel / s.GN
		return
	}
	j = rel % s.GN
	rel /= s.GN
	l = rel % s.GK
	rel /= s.GK
	i = rel % s.GM
	b = rel / s.GM
	return
}

// Block of a product on one tile: the batch indices [B0, B1) (flat, of
// the output's batch axes), rows [M0, M1), k [K0, K1), columns [N0, N1),
// and the row part [P0, P1) of the rows it owns after the reduction
// (relative to M0).
type TileBlock struct {
	Tile           int
	B0, B1         int
	M0, M1, K0, K1 int
	N0, N1         int
	P0, P1         int
}

// Blocks returns the block of every tile of s from lo, in tile order.
func (s Split) Blocks(mm MatMul, lo int) []TileBlock {
	out := make([]TileBlock, 0, s.Tiles())
	for rel := 0; rel < s.Tiles(); rel++ {
		b, i, j, l := s.Coords(rel)
		var tb TileBlock
		tb.Tile = lo + rel
		tb.B0, tb.B1 = s.BBlock(mm.Batches(), b)
		tb.M0, tb.M1 = s.MBlock(mm.M, i)
		tb.N0, tb.N1 = s.NBlock(mm.N, j)
		tb.K0, tb.K1 = s.KBlock(mm.K, l)
		tb.P0, tb.P1 = 0, tb.M1-tb.M0
		if s.GK > 1 {
			tb.P0, tb.P1 = s.PartBlock(tb.M1-tb.M0, l)
		}
		out = append(out, tb)
	}
	return out
}

// OperandPieces returns the pieces of the A operand (a) or the B operand
// of mm under s from lo, in the operand's coordinates (batch axes, then
// the matrix).
func (s Split) OperandPieces(mm MatMul, lo int, a bool) []Piece {
	var out []Piece
	for _, tb := range s.Blocks(mm, lo) {
		for b := tb.B0; b < tb.B1; b++ {
			idx := mm.batchIndex(b)
			var box Box
			if a {
				box = append(project(idx, mm.ABatch), Range{tb.M0, tb.M1}, Range{tb.K0, tb.K1})
			} else {
				box = append(project(idx, mm.BBatch), Range{tb.K0, tb.K1}, Range{tb.N0, tb.N1})
			}
			out = append(out, Piece{tb.Tile, box})
		}
	}
	return out
}

// ResultPieces returns the pieces of the product's result [batch..., M,
// N]: each tile's row part of its block, per batch index (none for an
// empty part).
func (s Split) ResultPieces(mm MatMul, lo int) []Piece {
	var out []Piece
	for _, tb := range s.Blocks(mm, lo) {
		if tb.P0 == tb.P1 {
			continue
		}
		for b := tb.B0; b < tb.B1; b++ {
			box := make(Box, 0, len(mm.Batch)+2)
			for _, i := range mm.batchIndex(b) {
				box = append(box, Range{i, i + 1})
			}
			box = append(box, Range{tb.M0 + tb.P0, tb.M0 + tb.P1}, Range{tb.N0, tb.N1})
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
