package planner

// Host operands delivered once: a graph input whose blocks a split
// copies to many tiles costs the host link every copy's bytes when the
// host writes the blocks themselves. Spread instead (a decision's
// CastOrder before the exchange, as for a cast operand), the host writes
// each element once, on panels spread over the product's tiles, and the
// product's re-layout copies them to the blocks in an exchange.

import (
	"fmt"

	"ipu.local/formats/plan"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
)

// spreadHost returns the block tensor of a host operand delivered
// spread, and the spread host tensor the caller's re-layout fills it
// from (-1: none, the blocks are an earlier product's). The products
// that read the same value in the same panel kind and orientation share
// the first one's spread tensor: the host writes it once; those that
// read it in the same blocks share the blocks too (one re-layout: a
// second, identical one would also be the first's in a step cache).
func (b *builder) spreadHost(pr *product, o *operand, isA bool, kind layout.Kind, transposed bool, blocks []layout.Piece, d plan.Decision) (id, src int) {
	probe := &layout.Tensor{Kind: kind, Size: lower.DeviceSize(o.w.DType), Transposed: transposed, Pieces: append([]layout.Piece(nil), blocks...)}
	probe.SortPieces()
	bkey := fmt.Sprintf("spread-blocks:%d:%s", o.w.Index, probe.Key())
	if id, ok := b.cache[bkey]; ok {
		return id, -1
	}
	key := fmt.Sprintf("spread:%d:%d:%t", o.w.Index, kind, transposed)
	src, ok := b.cache[key]
	if !ok {
		lo, n := d.Tiles[0], d.Tiles[1]-d.Tiles[0]
		if pr.a.hostBlocks() && pr.b.hostBlocks() {
			lo, n = castTiles(pr, d, isA) // no tile sends both
		}
		ps, stride := spread(panelSourcePieces(pr, isA, lo, n), lo, n)
		src = b.external(o.w, kind, 0, transposed, apart(ps, blocks, lo, n, stride))
		b.cache[key] = src
	}
	p := b.add(o.w, kind, 0, layout.FromStep, transposed, blocks)
	b.cache[bkey] = p.ID
	return p.ID, src
}

// copied reports whether blocks hold some element more than once: the
// sum of their boxes' elements exceeds the operand's.
func copied(blocks []layout.Piece, shape []int) bool {
	total := 1
	for _, d := range shape {
		total *= d
	}
	sum := 0
	for _, p := range blocks {
		sum += p.Box.Volume()
		if sum > total {
			return true
		}
	}
	return false
}
