package planner

// The pieces of a product's blocks, computed once per split: every point
// the search prices builds its whole plan, and all but the products
// whose decision changed have the blocks of a point priced before.

import (
	"sync"

	"ipu.local/libs/layout"
)

// blockPart names a product's operand (A or B) or its result.
type blockPart uint8

const (
	blocksA blockPart = iota
	blocksB
	blocksResult
)

// blockKey is what a product's block pieces depend on: the product
// (its shape), its split and its first tile.
type blockKey struct {
	node int
	s    layout.Split
	lo   int
	part blockPart
}

// pieceMemo holds block pieces by key, shared by the builders of points
// priced side by side. The pieces are never changed: a builder's tensors
// copy the slice (builder.add) and no pass writes a piece's box.
type pieceMemo struct{ m sync.Map }

// pieces returns part of product pr's blocks under split s from tile lo.
func (bm *pieceMemo) pieces(pr *product, s layout.Split, lo int, part blockPart) []layout.Piece {
	k := blockKey{pr.node.Index, s, lo, part}
	if v, ok := bm.m.Load(k); ok {
		return v.([]layout.Piece)
	}
	var ps []layout.Piece
	switch part {
	case blocksA, blocksB:
		ps = s.OperandPieces(pr.mm, lo, part == blocksA)
	default:
		ps = s.ResultPieces(pr.mm, lo)
	}
	v, _ := bm.m.LoadOrStore(k, ps)
	return v.([]layout.Piece)
}
