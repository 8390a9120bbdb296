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
	"ipu.local/libs/arch"
	"ipu.local/libs/layout"
	"ipu.local/libs/lower"
	"ipu.local/libs/prog"
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

// RegionError is a point with a buffer larger than the memory region its
// kernels need it in (a product's A blocks in non-interleaved memory):
// no placement could hold it.
type RegionError struct {
	Buffer       string
	Bytes, Limit int
	Region       string
}

func (e *RegionError) Error() string {
	return fmt.Sprintf("buffer %s of %d bytes does not fit in the %d bytes of %s memory", e.Buffer, e.Bytes, e.Limit, e.Region)
}

// fitsRegions checks every buffer bound to one memory region against
// that region's size, as the linker's placement would.
func fitsRegions(p *arch.Preset, pr *prog.Program) error {
	for _, b := range pr.Buffers {
		var limit int
		var name string
		switch b.Region {
		case prog.NonInterleaved:
			limit, name = int(p.NonInterleaved.Size()), "non-interleaved"
		case prog.Interleaved:
			limit, name = int(p.Interleaved.Size()), "interleaved"
		default:
			continue
		}
		if int(b.Size) > limit {
			return &RegionError{Buffer: b.Name, Bytes: int(b.Size), Limit: limit, Region: name}
		}
	}
	return nil
}
