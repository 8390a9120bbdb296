package planner

// The pieces of a product's blocks, computed once per split: every point
// the search prices builds its whole plan, and all but the products
// whose decision changed have the blocks of a point priced before.

import (
	"sync"
	"sync/atomic"

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
// copy the slice (builder.add) and no pass writes a piece's box. It
// keeps at most maxMemoPieces pieces (a long walk meets ever more
// splits): past that, pieces are computed and not kept.
type pieceMemo struct {
	m    sync.Map
	kept atomic.Int64 // pieces kept
}

// maxMemoPieces bounds the pieces a pieceMemo keeps: about 150 MB. The
// 12-layer BERT-base encoder's start keeps 0.83 million, the BERT-base
// layer's 0.24 million.
var maxMemoPieces int64 = 2 << 20

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
	if bm.kept.Load()+int64(len(ps)) > maxMemoPieces {
		return ps
	}
	v, loaded := bm.m.LoadOrStore(k, ps)
	if !loaded {
		bm.kept.Add(int64(len(ps)))
	}
	return v.([]layout.Piece)
}
