package planner

// Rows spread over tiles: a LayerNormalization whose rows are few
// against the tiles runs each row on a group of tiles, each holding a
// block of its columns (libs/lower rowspread.go).

import (
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
)

// maxSpreadBlocks bounds the column blocks of a deep model's spread row
// (wideSpreadBlocks a wide one's): every block's partials go to every
// other block's tile, every unit combines the chunks of the whole row,
// and every tile of a group holds the three launches' code and the
// exchanges'. (BERT-base FP16: 4 blocks of 192
// columns cost 328 cycles more a layer than 8 of 96; the 12-layer
// encoder's plan and link took 51.0 s of user time with 4, 58.7 s with
// 8, on a loaded machine.)
const maxSpreadBlocks = 4

// wideSpreadBlocks is maxSpreadBlocks for a wide model (pl.wide: one
// layer's constants, a deep model's code is not at stake). Measured
// with the fill and refit start, linked cycles at 4, 6, 8 and 12
// blocks: the BERT-base FP16 layer 49017, 48967, 48501, 49241; the
// GPT-2 FP16 block 52838, 52795, 52182, 52867; the FP32 ones 0.03% and
// 0.05% fewer at 8 than at 4. Planning the FP16 ones takes about 0.5 s
// (8%) longer at 8; the models under testdata plan to the same bytes.
const wideSpreadBlocks = 8

// spreadBlockAlign is the column multiple of a block: whole FP16 quads,
// so that each block starts 8-byte aligned.
const spreadBlockAlign = 4

// minSpreadBlock is the fewest columns of a block: a shorter one's work
// is less than the two exchanges of partials cost.
const minSpreadBlock = 64

// spreadPieces returns the pieces of a row operator's input x spreading
// its rows over tiles from lo: groups of rows (one row, or when the rows
// are too many for that, a multiple of the rows the layout preference
// aligns on), each group on K contiguous tiles (up to spreadBlocks),
// each tile a block of the rows' columns; or nil
// when the op is not spread (not a LayerNormalization along its last
// axis, or with statistics outputs), or when
// whole rows would keep more than half the tiles busy (pl.rowPieces) or
// a row is too short for two blocks of minSpreadBlock columns.
func (pl *planner) spreadPieces(n *graph.Node, axis, lo int) []layout.Piece {
	x := n.Inputs[0]
	r := len(x.Shape)
	// Softmax and LogSoftmax spread too (libs/lower), but attention's
	// softmax spread over twice the tiles overflows the code of a
	// 12-layer encoder's tiles: the planner does not size code.
	if n.Op != "LayerNormalization" || axis != r-1 || r < 1 {
		return nil
	}
	for _, v := range n.Outputs[1:] {
		if v != nil {
			return nil
		}
	}
	for _, v := range n.Inputs[1:] {
		if v != nil && len(v.Shape) != 1 {
			return nil
		}
	}
	shape := shapeOf(x)
	C := shape[r-1]
	inner, outer, align := 1, 1, 1
	if r >= 2 {
		inner = shape[r-2]
		outer = layout.Full(shape[:r-2]).Volume()
		align = min(inner, max(1, pl.prefs.alignOf(x)[r-2]))
	}
	groupsOf := func(rb int) int { return outer * ((inner + rb - 1) / rb) }
	// Whole rows (the default layout of them) leave most tiles idle?
	// (An empty value has nothing to spread.)
	if groupsOf(1) < 1 || C < 1 || 2*len(pl.rowPieces(x, axis, lo)) > pl.tiles {
		return nil
	}
	// One row a group on as many blocks as the tiles take; when rows
	// are too many for two blocks each, groups of a multiple of the
	// alignment.
	blocks := func(k int) int {
		w := ((C+k-1)/k + spreadBlockAlign - 1) / spreadBlockAlign * spreadBlockAlign
		return (C + w - 1) / w
	}
	most := min(pl.spreadBlocks(), C/minSpreadBlock)
	if most < 2 {
		return nil
	}
	rb, K := 1, 0
	if k := min(most, pl.tiles/groupsOf(1)); k >= 2 {
		K = blocks(k)
	}
	if K < 2 {
		K = blocks(most)
		for rb < inner && groupsOf(rb)*K > pl.tiles {
			rb++
		}
		rb = min(inner, (rb+align-1)/align*align)
	}
	W := (C + K - 1) / K
	W = (W + spreadBlockAlign - 1) / spreadBlockAlign * spreadBlockAlign
	groups, per := groupsOf(rb), (inner+rb-1)/rb
	if K < 2 || groups*K > pl.tiles {
		return nil
	}
	lo = max(0, min(lo, pl.tiles-groups*K))
	return groupPieces(shape, rb, per, groups, K, W, lo)
}

// groupPieces returns the pieces of groups of rb rows (per groups an
// index of the axes before the last two) on K tiles each from tile lo,
// blocks of W columns.
func groupPieces(shape []int, rb, per, groups, K, W, lo int) []layout.Piece {
	r := len(shape)
	C := shape[r-1]
	inner := 1
	if r >= 2 {
		inner = shape[r-2]
	}
	out := make([]layout.Piece, 0, groups*K)
	idx := make([]int, max(r-2, 0))
	for g := 0; g < groups; g++ {
		box := make(layout.Box, r)
		for d := range idx {
			box[d] = layout.Range{Lo: idx[d], Hi: idx[d] + 1}
		}
		if r >= 2 {
			j := g % per
			box[r-2] = layout.Range{Lo: j * rb, Hi: min(inner, (j+1)*rb)}
		}
		for k := 0; k < K; k++ {
			b := append(layout.Box(nil), box...)
			b[r-1] = layout.Range{Lo: k * W, Hi: min(C, (k+1)*W)}
			out = append(out, layout.Piece{Tile: lo + g*K + k, Box: b})
		}
		if g%per != per-1 {
			continue
		}
		for d := len(idx) - 1; d >= 0; d-- {
			if idx[d]++; idx[d] < shape[d] {
				break
			}
			idx[d] = 0
		}
	}
	return out
}

// vectorPieces returns the pieces of a spread row operator's scale or
// bias (of the normalised axis alone): on each tile of x's pieces, the
// columns of its block.
func vectorPieces(xPieces []layout.Piece) []layout.Piece {
	out := make([]layout.Piece, len(xPieces))
	for i, p := range xPieces {
		out[i] = layout.Piece{Tile: p.Tile, Box: layout.Box{p.Box[len(p.Box)-1]}}
	}
	return out
}

// spreadBlocks is the most column blocks a spread row takes.
func (pl *planner) spreadBlocks() int {
	if pl.wide {
		return wideSpreadBlocks
	}
	return maxSpreadBlocks
}
