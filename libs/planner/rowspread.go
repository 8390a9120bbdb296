package planner

// Rows spread over tiles: a LayerNormalization whose rows are few
// against the tiles runs each row on a group of tiles, each holding a
// block of its columns (libs/lower rowspread.go).

import (
	"ipu.local/libs/graph"
	"ipu.local/libs/layout"
)

// maxSpreadBlocks bounds the column blocks of a spread row: every block's
// partials go to every other block's tile, every unit combines the
// chunks of the whole row, and every tile of a group holds the three
// launches' code and the exchanges'. (BERT-base FP16: 4 blocks of 192
// columns cost 328 cycles more a layer than 8 of 96, and the 12-layer
// encoder plans and links about 15% faster.)
const maxSpreadBlocks = 4

// spreadBlockAlign is the column multiple of a block: whole FP16 quads,
// so that each block starts 8-byte aligned.
const spreadBlockAlign = 4

// minSpreadBlock is the fewest columns of a block: a shorter one's work
// is less than the two exchanges of partials cost.
const minSpreadBlock = 64

// spreadPieces returns the pieces of a row operator's input x spreading
// its rows over tiles from lo: one row per group of tiles, each tile a
// block of the row's columns, or nil when the op is not spread (not a
// LayerNormalization with its normalised axis last and no statistics
// outputs), or when whole rows would keep at least half the tiles busy
// or a row is too short for two blocks of minSpreadBlock columns.
func (pl *planner) spreadPieces(n *graph.Node, axis, lo int) []layout.Piece {
	x := n.Inputs[0]
	r := len(x.Shape)
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
	rows := layout.Full(shape[:r-1]).Volume()
	C := shape[r-1]
	if rows < 1 || 2*rows > pl.tiles {
		return nil
	}
	K := min(maxSpreadBlocks, pl.tiles/rows, C/minSpreadBlock)
	if K < 2 {
		return nil
	}
	W := (C + K - 1) / K
	W = (W + spreadBlockAlign - 1) / spreadBlockAlign * spreadBlockAlign
	K = (C + W - 1) / W
	if K < 2 {
		return nil
	}
	lo = max(0, min(lo, pl.tiles-rows*K))
	out := make([]layout.Piece, 0, rows*K)
	idx := make([]int, r-1)
	for row := 0; row < rows; row++ {
		box := make(layout.Box, r)
		for d := range idx {
			box[d] = layout.Range{Lo: idx[d], Hi: idx[d] + 1}
		}
		for k := 0; k < K; k++ {
			b := append(layout.Box(nil), box...)
			b[r-1] = layout.Range{Lo: k * W, Hi: min(C, (k+1)*W)}
			out = append(out, layout.Piece{Tile: lo + row*K + k, Box: b})
		}
		for d := r - 2; d >= 0; d-- {
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
